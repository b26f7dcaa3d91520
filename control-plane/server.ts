// State-of-the-world ADS server: envoy.service.discovery.v3.AggregatedDiscoveryService/
// StreamAggregatedResources on @grpc/grpc-js, serving whatever the SnapshotCache holds.
//
// Per stream and type URL at most one response is in flight: the next one goes out after the
// ACK/NACK of the previous one (the request that carries the nonce we sent), as go-control-plane
// does. A request with a nonce other than the last one sent is stale and ignored. A NACKed version
// is never sent again on that stream.
import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import * as grpc from '@grpc/grpc-js';
import {
  announcedFeatures,
  adsServiceDefinition,
  XDS_MAX_MESSAGE_BYTES,
  type WireDiscoveryRequest,
} from '../proto/index.js';
import type { ResourceSet, SnapshotCache } from './cache.js';
import { encodeResponse, type EncodedResponse } from './response-encoding.js';
import { ReloadingTlsFiles, reloadingServerCredentials, type TlsFiles } from './tls.js';
import { silentLogger, type Logger } from '../common/index.js';
import {
  oversizeMessage,
  type AdsServerEvents,
  type StreamState,
  type StreamTypeState,
} from './stream-state.js';

export type { TlsFiles } from './tls.js';

export interface KeepaliveOptions {
  /** Server pings an idle connection after this long (default 30 s). */
  readonly timeMs?: number;
  /** And closes it if the ping is not answered within this (default 10 s). */
  readonly timeoutMs?: number;
  /** Optional GOAWAY after this connection age, so pods rebalance over replicas. */
  readonly maxConnectionAgeMs?: number;
  readonly maxConnectionAgeGraceMs?: number;
}

export interface AdsServerOptions {
  readonly cache: SnapshotCache;
  /** host:port; port 0 picks a free one (see `port` after start). Default 0.0.0.0:18000. */
  readonly listen?: string;
  readonly tls?: TlsFiles;
  readonly keepalive?: KeepaliveOptions;
  /** Bound on a request (default 4 MiB; requests are small). */
  readonly maxReceiveMessageBytes?: number;
  /**
   * Bound on a response (default XDS_MAX_MESSAGE_BYTES, what the service's xDS client accepts by
   * default; raise both together). A larger response is not sent: see the `oversize` event.
   */
  readonly maxSendMessageBytes?: number;
  /** control_plane.identifier in responses. */
  readonly identifier?: string;
  readonly logger?: Logger;
}

export const DEFAULT_LISTEN = '0.0.0.0:18000';

/**
 * The address grpc-js bound for `listen` (host as given, the port it chose for port 0): what the
 * listening line names, so `0.0.0.0:18000` reads as every interface. grpc-js shows no socket address.
 */
function boundAddress(listen: string, port: number): string {
  const i = listen.lastIndexOf(':');
  return i < 0 ? `${listen}:${port}` : `${listen.slice(0, i)}:${port}`;
}

/** Features some resource requires that the pod did not announce, sorted. */
function missingFeatures(required: readonly string[], announced: ReadonlySet<string>): string[] {
  return required.length === 0 ? required.slice() : required.filter((f) => !announced.has(f));
}

/**
 * The ADS service with responses written as bytes: each version is encoded once (response-encoding.ts)
 * and the same bytes go to every stream, instead of grpc-js serializing a response object per stream.
 */
function preencodedAdsDefinition(): grpc.ServiceDefinition {
  const def = adsServiceDefinition();
  return Object.fromEntries(
    Object.entries(def).map(([name, method]) => [
      name,
      name === 'StreamAggregatedResources' ? { ...method, responseSerialize: (b: Buffer) => b } : method,
    ]),
  );
}

type AdsCall = grpc.ServerDuplexStream<WireDiscoveryRequest, Buffer>;

class TypeState implements StreamTypeState {
  versionSent: string | undefined;
  nonceSent: string | undefined;
  versionAcked: string | undefined;
  ackedAt: Date | undefined;
  lastNack: { version: string; message: string; at: Date } | undefined;
  readonly nackedVersions = new Set<string>();
  awaitingAck = false;
  withheld: { version: string; features: readonly string[] } | undefined;
  /** version_info of the client's last accepted request: what it runs now. */
  clientVersion = '';
  /** A version too large to send (reported once). */
  oversizeVersion: string | undefined;
  constructor(readonly typeUrl: string) {}
}

class OpenStream implements StreamState {
  nodeId = '';
  features: ReadonlySet<string> = new Set();
  readonly connectedSince = new Date();
  readonly types = new Map<string, TypeState>();
  closed = false;
  constructor(
    readonly id: number,
    readonly peer: string,
    readonly call: AdsCall,
  ) {}
}

export class AdsServer extends EventEmitter<AdsServerEvents> {
  private readonly cache: SnapshotCache;
  private readonly log: Logger;
  private server: grpc.Server | undefined;
  private readonly open = new Map<number, OpenStream>();
  private streamSeq = 0;
  private nonceSeq = 0;
  // Nonces differ across server instances, so a nonce from another replica is never taken as ours.
  private readonly noncePrefix = randomBytes(4).toString('hex');
  private boundPort = 0;
  private readonly onCacheChange = () => this.pushAll();
  private readonly maxSendBytes: number;
  private tlsFiles: ReloadingTlsFiles | undefined;
  /** Each resource set's response, encoded the first time a stream is sent it. */
  private readonly encoded = new WeakMap<ResourceSet, EncodedResponse>();
  private encodes = 0;

  constructor(private readonly opts: AdsServerOptions) {
    super();
    this.cache = opts.cache;
    this.log = opts.logger ?? silentLogger;
    this.maxSendBytes = opts.maxSendMessageBytes ?? XDS_MAX_MESSAGE_BYTES;
  }

  /** Port bound by start(). */
  get port(): number {
    return this.boundPort;
  }

  /** Responses encoded so far: one per resource set sent, however many streams it went to. */
  get responsesEncoded(): number {
    return this.encodes;
  }

  /** Snapshot of every open stream that has sent its first request. */
  streams(): StreamState[] {
    return [...this.open.values()].filter((s) => s.nodeId !== '');
  }

  async start(): Promise<void> {
    if (this.server) throw new Error('AdsServer already started');
    const o = this.opts;
    const ka = o.keepalive ?? {};
    const channelOptions: grpc.ChannelOptions = {
      'grpc.keepalive_time_ms': ka.timeMs ?? 30_000,
      'grpc.keepalive_timeout_ms': ka.timeoutMs ?? 10_000,
      'grpc.keepalive_permit_without_calls': 1,
      'grpc.max_receive_message_length': o.maxReceiveMessageBytes ?? 4 * 1024 * 1024,
      'grpc.max_send_message_length': this.maxSendBytes,
    };
    if (ka.maxConnectionAgeMs) channelOptions['grpc.max_connection_age_ms'] = ka.maxConnectionAgeMs;
    if (ka.maxConnectionAgeGraceMs)
      channelOptions['grpc.max_connection_age_grace_ms'] = ka.maxConnectionAgeGraceMs;
    const server = new grpc.Server(channelOptions);
    server.addService(preencodedAdsDefinition(), {
      StreamAggregatedResources: (call: AdsCall) => this.handleStream(call),
      DeltaAggregatedResources: (call: grpc.ServerDuplexStream<unknown, unknown>) => {
        call.emit('error', {
          code: grpc.status.UNIMPLEMENTED,
          details: 'only state-of-the-world xDS is served',
        });
      },
    });
    const creds = this.credentials();
    const listen = o.listen ?? DEFAULT_LISTEN;
    this.boundPort = await new Promise<number>((resolve, reject) =>
      server.bindAsync(listen, creds, (err, port) => (err ? reject(err) : resolve(port))),
    );
    this.server = server;
    this.cache.on('change', this.onCacheChange);
    this.log.info(
      { listen, port: this.boundPort, tls: !!o.tls, mtls: !!o.tls?.caFile },
      `xDS server listening on ${boundAddress(listen, this.boundPort)}`,
    );
  }

  private credentials(): grpc.ServerCredentials {
    const t = this.opts.tls;
    if (!t) return grpc.ServerCredentials.createInsecure();
    this.tlsFiles = new ReloadingTlsFiles(t, this.log);
    this.tlsFiles.start();
    return reloadingServerCredentials(t, this.tlsFiles);
  }

  async close(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = undefined;
    this.tlsFiles?.close();
    this.tlsFiles = undefined;
    this.cache.off('change', this.onCacheChange);
    // Ending our side of each stream lets clients reconnect elsewhere at once.
    for (const s of this.open.values()) {
      try {
        s.call.end();
      } catch {
        /* already closed */
      }
    }
    await new Promise<void>((resolve) => {
      const t = setTimeout(() => {
        server.forceShutdown();
        resolve();
      }, 1000);
      server.tryShutdown(() => {
        clearTimeout(t);
        resolve();
      });
    });
    for (const s of [...this.open.values()]) this.closeStream(s);
  }

  private handleStream(call: AdsCall): void {
    const s = new OpenStream(++this.streamSeq, call.getPeer(), call);
    this.open.set(s.id, s);
    call.on('data', (req: WireDiscoveryRequest) => {
      try {
        this.onRequest(s, req);
      } catch (err) {
        this.log.error({ err, stream: s.id }, 'xDS request handling failed');
      }
    });
    call.on('end', () => {
      try {
        call.end();
      } catch {
        /* already closed */
      }
      this.closeStream(s);
    });
    call.on('error', () => this.closeStream(s));
    call.on('cancelled', () => this.closeStream(s));
    call.on('close', () => this.closeStream(s));
  }

  private closeStream(s: OpenStream): void {
    if (s.closed) return;
    s.closed = true;
    this.open.delete(s.id);
    if (s.nodeId !== '') {
      this.log.info({ stream: s.id, node: s.nodeId, peer: s.peer }, 'xDS stream closed');
      this.emit('disconnect', s);
    }
  }

  private onRequest(s: OpenStream, req: WireDiscoveryRequest): void {
    if (s.closed) return;
    if (s.nodeId === '') {
      const id = req.node?.id ?? '';
      if (id === '') {
        s.call.emit('error', {
          code: grpc.status.INVALID_ARGUMENT,
          details: 'the first request must carry node.id',
        });
        this.closeStream(s);
        return;
      }
      s.nodeId = id;
      s.features = announcedFeatures(req.node);
      this.log.info({ stream: s.id, node: id, peer: s.peer }, 'xDS stream opened');
      this.emit('connect', s);
    }
    const typeUrl = req.typeUrl ?? '';
    if (typeUrl === '') {
      this.log.warn({ stream: s.id, node: s.nodeId }, 'ignoring ADS request without type_url');
      return;
    }
    let ts = s.types.get(typeUrl);
    const firstForType = !ts;
    if (!ts) s.types.set(typeUrl, (ts = new TypeState(typeUrl)));
    const nonce = req.responseNonce ?? '';
    const version = req.versionInfo ?? '';

    if (ts.nonceSent !== undefined) {
      if (nonce !== ts.nonceSent) {
        this.log.debug(
          { stream: s.id, node: s.nodeId, nonce, expected: ts.nonceSent },
          'stale nonce ignored',
        );
        this.emit('stale', { stream: s, typeUrl, nonce });
        return;
      }
      ts.awaitingAck = false;
      if (req.errorDetail) {
        const nacked = ts.versionSent ?? '';
        const message = req.errorDetail.message ?? '';
        ts.lastNack = { version: nacked, message, at: new Date() };
        ts.nackedVersions.add(nacked);
        this.log.warn({ stream: s.id, node: s.nodeId, version: nacked, message }, 'xDS NACK');
        this.emit('nack', { stream: s, typeUrl, version: nacked, message });
      } else {
        ts.versionAcked = version;
        ts.ackedAt = new Date();
        this.log.debug({ stream: s.id, node: s.nodeId, version }, 'xDS ACK');
        this.emit('ack', { stream: s, typeUrl, version, resumed: false });
      }
    } else if (firstForType && version !== '' && !req.errorDetail) {
      // A pod reconnecting (maybe from another replica) tells us what it runs; with content
      // hashed versions that is comparable with ours.
      ts.versionAcked = version;
      ts.ackedAt = new Date();
      this.emit('ack', { stream: s, typeUrl, version, resumed: true });
    }
    ts.clientVersion = version;
    this.respond(s, ts);
  }

  private respond(s: OpenStream, ts: TypeState): void {
    if (s.closed || ts.awaitingAck) return;
    const snap = this.cache.getSnapshot(s.nodeId);
    if (!snap) return;
    const set = snap.resourceSet(ts.typeUrl);
    if (set.version === ts.clientVersion || ts.nackedVersions.has(set.version)) return;
    // Never send a config that uses a feature the pod did not announce: a reference pod would ignore
    // the fields and enforce something else (a sliding window as a fixed one, rate_limits as nothing).
    const encoded = this.encodedResponse(set);
    const missing = missingFeatures(encoded.requiredFeatures, s.features);
    if (missing.length > 0) {
      if (ts.withheld?.version !== set.version) {
        ts.withheld = { version: set.version, features: missing };
        this.log.warn(
          { stream: s.id, node: s.nodeId, version: set.version, features: missing },
          'xDS version withheld: the pod does not announce features it uses',
        );
        this.emit('withheld', { stream: s, typeUrl: ts.typeUrl, version: set.version, features: missing });
      }
      return;
    }
    ts.withheld = undefined;
    if (ts.oversizeVersion === set.version) return;
    const bytes = encoded.bytes.length;
    if (bytes > this.maxSendBytes) {
      // Sending it would fail the stream (or the client would refuse it) and the pod would reconnect
      // in a loop on its old config; say so once per stream and version instead, and send nothing.
      ts.oversizeVersion = set.version;
      const names = set.resources.map((r) => r.name);
      // Recorded as the stream's last refusal of that version, so whatever reports NACKs (the
      // operator's Programmed condition on the resources of these domains) reports this too.
      ts.lastNack = {
        version: set.version,
        message: oversizeMessage(bytes, this.maxSendBytes),
        at: new Date(),
      };
      this.log.error(
        { stream: s.id, node: s.nodeId, version: set.version, bytes, maxBytes: this.maxSendBytes },
        `xDS response of ${bytes} bytes exceeds the ${this.maxSendBytes}-byte maximum (--max-send-bytes, XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES); not sent, node ${s.nodeId} keeps its config`,
      );
      this.emit('oversize', {
        stream: s,
        typeUrl: ts.typeUrl,
        version: set.version,
        bytes,
        maxBytes: this.maxSendBytes,
        resources: names,
      });
      return;
    }
    const nonce = encoded.nonce;
    ts.versionSent = set.version;
    ts.nonceSent = nonce;
    ts.awaitingAck = true;
    s.call.write(encoded.bytes);
    this.log.debug({ stream: s.id, node: s.nodeId, version: set.version, nonce }, 'xDS response sent');
    this.emit('response', {
      stream: s,
      typeUrl: ts.typeUrl,
      version: set.version,
      nonce,
      resources: set.resources.length,
    });
  }

  private encodedResponse(set: ResourceSet): EncodedResponse {
    let e = this.encoded.get(set);
    if (!e) {
      e = encodeResponse(set, this.opts.identifier, `${this.noncePrefix}-${++this.nonceSeq}`);
      this.encoded.set(set, e);
      this.encodes++;
    }
    return e;
  }

  /** Offers the current snapshot to every open stream (a no-op for those already on it or awaiting an ACK). */
  private pushAll(): void {
    for (const s of this.open.values()) {
      if (s.nodeId === '') continue;
      for (const ts of s.types.values()) this.respond(s, ts);
    }
  }
}
