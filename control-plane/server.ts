// ADS server: envoy.service.discovery.v3.AggregatedDiscoveryService on @grpc/grpc-js, serving whatever
// the SnapshotCache holds, state of the world (StreamAggregatedResources) and incremental
// (DeltaAggregatedResources). This file holds what both share: the gRPC service, listen, TLS and
// keepalive, the open streams, the node of each (its first request), refusing and closing a stream, the
// cache subscription and the push of each new snapshot to every stream, and the events the operator
// reads. What a request means and what is sent is each protocol's: sotw-stream.ts and delta-stream.ts,
// reached through StreamProtocol and reaching back through StreamHost (stream-protocol.ts).
import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import * as grpc from '@grpc/grpc-js';
import {
  announcedFeatures,
  adsServiceDefinition,
  DELTA_WILDCARD,
  XDS_MAX_MESSAGE_BYTES,
  type WireDeltaDiscoveryRequest,
  type WireDiscoveryRequest,
} from '../proto/index.js';
import type { SnapshotCache } from './cache.js';
import { DeltaEncoder, NOTHING, type DeltaBody, type DeltaView } from './delta.js';
import { SotwStreams } from './sotw-stream.js';
import { ReloadingTlsFiles, reloadingServerCredentials, type TlsFiles } from './tls.js';
import { silentLogger, type Logger } from '../common/index.js';
import type { AdsServerEvents, StreamState } from './stream-state.js';
import {
  OpenStream,
  refuseOversize,
  TypeState,
  withheldFrom,
  type StreamHost,
  type StreamProtocol,
} from './stream-protocol.js';

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
  /** Bounds on what a delta (incremental) stream sends: see DeltaBounds. */
  readonly delta?: Partial<DeltaBounds>;
  readonly logger?: Logger;
}

export const DEFAULT_LISTEN = '0.0.0.0:18000';

/**
 * What one delta stream may send (a request past them ends that stream with INVALID_ARGUMENT naming
 * the bound; other streams are not affected). Requests are bounded in bytes by maxReceiveMessageBytes;
 * these bound what a stream accumulates over many requests.
 */
export interface DeltaBounds {
  /**
   * Names one stream subscribes to (all its requests together), and entries of its
   * initial_resource_versions (--max-delta-names, default 50000).
   */
  readonly maxNames: number;
  /** UTF-8 bytes of one name or version the client sends (--max-delta-name-bytes, default 1024). */
  readonly maxNameBytes: number;
}

export const DEFAULT_DELTA_BOUNDS: Readonly<DeltaBounds> = Object.freeze({
  maxNames: 50_000,
  maxNameBytes: 1024,
});

/**
 * The address grpc-js bound for `listen` (host as given, the port it chose for port 0): what the
 * listening line names, so `0.0.0.0:18000` reads as every interface. grpc-js shows no socket address.
 */
function boundAddress(listen: string, port: number): string {
  const i = listen.lastIndexOf(':');
  return i < 0 ? `${listen}:${port}` : `${listen.slice(0, i)}:${port}`;
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
      name === 'StreamAggregatedResources' || name === 'DeltaAggregatedResources'
        ? { ...method, responseSerialize: (b: Buffer) => b }
        : method,
    ]),
  );
}

type AdsCall = grpc.ServerDuplexStream<WireDiscoveryRequest, Buffer>;
type DeltaCall = grpc.ServerDuplexStream<WireDeltaDiscoveryRequest, Buffer>;

/** A type on a delta stream: the SotW record (what the operator reads) plus what the client has and wants. */
class DeltaTypeState extends TypeState {
  /** Subscribed to every resource of the type. */
  wildcard = false;
  /** Names subscribed to explicitly. */
  readonly subscribed = new Set<string>();
  /** name -> version the client has (ACKed, or told in initial_resource_versions); shared, never mutated. */
  known: ReadonlyMap<string, string> = NOTHING;
  /** What the client has once it ACKs the response in flight. */
  pendingKnown: ReadonlyMap<string, string> | undefined;
  /** The first request carried initial_resource_versions (a reconnect). */
  resumed = false;
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
  private readonly sotw: SotwStreams;
  private readonly host: StreamHost;
  private readonly delta: DeltaEncoder;
  private readonly deltaBounds: DeltaBounds;

  constructor(private readonly opts: AdsServerOptions) {
    super();
    this.cache = opts.cache;
    this.log = opts.logger ?? silentLogger;
    this.maxSendBytes = opts.maxSendMessageBytes ?? XDS_MAX_MESSAGE_BYTES;
    const host: StreamHost = (this.host = {
      log: this.log,
      identifier: opts.identifier,
      maxSendBytes: this.maxSendBytes,
      snapshot: (nodeId) => this.cache.getSnapshot(nodeId),
      nextNonce: () => `${this.noncePrefix}-${++this.nonceSeq}`,
      refuse: (s, details) => this.refuse(s, details),
      emit: (event, ...args) => this.emit(event, ...args),
    });
    this.sotw = new SotwStreams(host);
    this.delta = new DeltaEncoder(opts.identifier);
    this.deltaBounds = {
      maxNames: opts.delta?.maxNames ?? DEFAULT_DELTA_BOUNDS.maxNames,
      maxNameBytes: opts.delta?.maxNameBytes ?? DEFAULT_DELTA_BOUNDS.maxNameBytes,
    };
  }

  /** Port bound by start(). */
  get port(): number {
    return this.boundPort;
  }

  /** Responses encoded so far: one per resource set sent, however many streams it went to. */
  get responsesEncoded(): number {
    return this.sotw.responsesEncoded;
  }

  /** Resources encoded for delta streams so far: each once per version, however many streams get it. */
  get deltaResourcesEncoded(): number {
    return this.delta.resourcesEncoded;
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
      DeltaAggregatedResources: (call: DeltaCall) => this.handleDeltaStream(call),
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
    this.attach(call, 'sotw', this.sotw);
  }

  private handleDeltaStream(call: DeltaCall): void {
    this.attach(call, 'delta', {
      onRequest: (s, req: WireDeltaDiscoveryRequest) => this.onDeltaRequest(s, req),
      push: (s) => {
        for (const ts of s.types.values()) this.respondDelta(s, ts as DeltaTypeState);
      },
    });
  }

  private attach<Req extends { readonly node?: WireDiscoveryRequest['node'] }>(
    call: grpc.ServerDuplexStream<Req, Buffer>,
    protocol: 'sotw' | 'delta',
    streams: StreamProtocol<Req>,
  ): void {
    const s = new OpenStream(++this.streamSeq, call.getPeer(), call);
    s.protocol = protocol;
    this.open.set(s.id, s);
    call.on('data', (req: Req) => {
      try {
        if (s.closed || !this.identify(s, req.node)) return;
        streams.onRequest(s, req);
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

  /** Offers the current snapshot to every open stream (a no-op for those already on it or awaiting an ACK). */
  private pushAll(): void {
    for (const s of this.open.values()) {
      if (s.nodeId === '') continue;
      if (s.protocol === 'sotw') this.sotw.push(s);
      else for (const ts of s.types.values()) this.respondDelta(s, ts as DeltaTypeState);
    }
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

  /** Takes the node from a stream's first request; false (and the stream ended) when it has none. */
  private identify(s: OpenStream, node: WireDiscoveryRequest['node']): boolean {
    if (s.nodeId !== '') return true;
    const id = node?.id ?? '';
    if (id === '') {
      this.refuse(s, 'the first request must carry node.id');
      return false;
    }
    s.nodeId = id;
    s.features = announcedFeatures(node);
    this.log.info({ stream: s.id, node: id, peer: s.peer, protocol: s.protocol }, 'xDS stream opened');
    this.emit('connect', s);
    return true;
  }

  /** Ends a stream for the client's error (INVALID_ARGUMENT with `details`). */
  private refuse(s: OpenStream, details: string): void {
    this.log.warn({ stream: s.id, node: s.nodeId, peer: s.peer, details }, 'xDS stream refused');
    s.call.emit('error', { code: grpc.status.INVALID_ARGUMENT, details });
    this.closeStream(s);
  }

  // ---------------------------------------------------------------------------------------------
  // Delta (incremental) streams. The ACK bookkeeping is the SotW one (TypeState: versionSent,
  // versionAcked, lastNack, the ack/nack events) with system_version_info as the version, so whatever
  // reads which pod runs which snapshot version reads delta pods the same way.

  /** The first bound a delta request breaks, as the refusal message; undefined when within them. */
  private deltaOverBound(ts: DeltaTypeState | undefined, req: WireDeltaDiscoveryRequest): string | undefined {
    const b = this.deltaBounds;
    const sub = req.resourceNamesSubscribe ?? [];
    const unsub = req.resourceNamesUnsubscribe ?? [];
    const initial = req.initialResourceVersions ? Object.entries(req.initialResourceVersions) : [];
    if (sub.length + unsub.length > b.maxNames || initial.length > b.maxNames) {
      return `more than ${b.maxNames} resource names in one request (--max-delta-names)`;
    }
    for (const n of sub) if (Buffer.byteLength(n) > b.maxNameBytes) return this.nameTooLong(n);
    for (const n of unsub) if (Buffer.byteLength(n) > b.maxNameBytes) return this.nameTooLong(n);
    for (const [n, v] of initial) {
      if (Buffer.byteLength(n) > b.maxNameBytes) return this.nameTooLong(n);
      if (Buffer.byteLength(v) > b.maxNameBytes) {
        return `initial_resource_versions: a version of more than ${b.maxNameBytes} bytes (--max-delta-name-bytes)`;
      }
    }
    let added = 0;
    for (const n of sub) if (n !== DELTA_WILDCARD && !ts?.subscribed.has(n)) added++;
    if ((ts?.subscribed.size ?? 0) + added > b.maxNames) {
      return `more than ${b.maxNames} resource names subscribed on one stream (--max-delta-names)`;
    }
    return undefined;
  }

  private nameTooLong(name: string): string {
    return `a resource name of ${Buffer.byteLength(name)} bytes, more than ${this.deltaBounds.maxNameBytes} (--max-delta-name-bytes)`;
  }

  private onDeltaRequest(s: OpenStream, req: WireDeltaDiscoveryRequest): void {
    const typeUrl = req.typeUrl ?? '';
    if (typeUrl === '') {
      this.log.warn({ stream: s.id, node: s.nodeId }, 'ignoring delta ADS request without type_url');
      return;
    }
    const existing = s.types.get(typeUrl) as DeltaTypeState | undefined;
    const over = this.deltaOverBound(existing, req);
    if (over !== undefined) {
      this.refuse(s, over);
      return;
    }
    let ts = existing;
    if (!ts) {
      s.types.set(typeUrl, (ts = new DeltaTypeState(typeUrl)));
      this.subscribe(ts, req, true);
    } else {
      this.subscribe(ts, req, false);
    }

    const nonce = req.responseNonce ?? '';
    if (nonce !== '') {
      if (nonce !== ts.nonceSent) {
        this.log.debug(
          { stream: s.id, node: s.nodeId, nonce, expected: ts.nonceSent },
          'stale nonce ignored',
        );
        this.emit('stale', { stream: s, typeUrl, nonce });
      } else if (ts.awaitingAck) {
        ts.awaitingAck = false;
        const version = ts.versionSent ?? '';
        if (req.errorDetail) {
          // The client kept what it had: so do we.
          ts.pendingKnown = undefined;
          const message = req.errorDetail.message ?? '';
          ts.lastNack = { version, message, at: new Date() };
          ts.nackedVersions.add(version);
          this.log.warn({ stream: s.id, node: s.nodeId, version, message }, 'xDS NACK');
          this.emit('nack', { stream: s, typeUrl, version, message });
        } else {
          ts.known = ts.pendingKnown ?? ts.known;
          ts.pendingKnown = undefined;
          ts.versionAcked = version;
          ts.ackedAt = new Date();
          ts.clientVersion = version;
          this.log.debug({ stream: s.id, node: s.nodeId, version }, 'xDS ACK');
          this.emit('ack', { stream: s, typeUrl, version, resumed: false });
        }
      }
    }
    this.respondDelta(s, ts);
  }

  /** Applies a request's subscribe/unsubscribe lists (and, on the first, initial_resource_versions). */
  private subscribe(ts: DeltaTypeState, req: WireDeltaDiscoveryRequest, first: boolean): void {
    const sub = req.resourceNamesSubscribe ?? [];
    const unsub = req.resourceNamesUnsubscribe ?? [];
    // An empty first subscription is the legacy wildcard: every resource of the type.
    if (first && sub.length === 0) ts.wildcard = true;
    let forget: string[] | undefined;
    for (const n of sub) {
      if (n === DELTA_WILDCARD) {
        ts.wildcard = true;
        continue;
      }
      ts.subscribed.add(n);
      // A later subscription to a name is a request to be sent it, whatever we think it has.
      if (!first) (forget ??= []).push(n);
    }
    for (const n of unsub) {
      if (n === DELTA_WILDCARD) {
        ts.wildcard = false;
        continue;
      }
      ts.subscribed.delete(n);
      // The client dropped it; a wildcard stream still gets every resource, so nothing changes there.
      if (!ts.wildcard) (forget ??= []).push(n);
    }
    if (first && req.initialResourceVersions) {
      const initial = new Map<string, string>();
      for (const [n, v] of Object.entries(req.initialResourceVersions)) initial.set(n, v);
      if (initial.size > 0) {
        ts.known = initial;
        ts.resumed = true;
      }
    }
    if (forget) {
      ts.known = without(ts.known, forget);
      if (ts.pendingKnown) ts.pendingKnown = without(ts.pendingKnown, forget);
    }
  }

  private respondDelta(s: OpenStream, ts: DeltaTypeState): void {
    if (s.closed || ts.awaitingAck) return;
    const snap = this.cache.getSnapshot(s.nodeId);
    if (!snap) return;
    const set = snap.resourceSet(ts.typeUrl);
    if (ts.nackedVersions.has(set.version)) return;
    const view = this.delta.view(set);
    if (withheldFrom(this.host, s, ts, set.version, view.requiredFeatures)) return;
    let body: DeltaBody;
    let after: ReadonlyMap<string, string>;
    if (ts.wildcard) {
      body = this.delta.wildcardBody(ts.known, view);
      after = view.versions;
    } else {
      ({ body, after } = this.delta.subscribedBody(ts.known, ts.subscribed, view));
    }
    if (body.added === 0 && body.removed.length === 0) {
      if (ts.versionAcked === set.version) return;
      if (ts.nonceSent === undefined && ts.resumed) {
        // A pod reconnecting with exactly what the snapshot holds runs this version: nothing to send.
        ts.known = after;
        ts.versionAcked = set.version;
        ts.clientVersion = set.version;
        ts.ackedAt = new Date();
        this.emit('ack', { stream: s, typeUrl: ts.typeUrl, version: set.version, resumed: true });
        return;
      }
      // Otherwise an empty response moves the pod to this version (and its ACK says it got there).
    }
    if (ts.oversizeVersion === set.version) return;
    if (!this.withinSendBound(s, ts, view, body.bytes.length)) return;
    const { nonce, bytes } = DeltaEncoder.seal(body, this.host.nextNonce);
    ts.versionSent = set.version;
    ts.nonceSent = nonce;
    ts.awaitingAck = true;
    ts.pendingKnown = after;
    s.call.write(bytes);
    this.log.debug(
      {
        stream: s.id,
        node: s.nodeId,
        version: set.version,
        nonce,
        added: body.added,
        removed: body.removed.length,
      },
      'xDS delta response sent',
    );
    this.emit('response', {
      stream: s,
      typeUrl: ts.typeUrl,
      version: set.version,
      nonce,
      resources: body.added,
    });
  }

  /** As SotW: a response past the send bound is not sent, recorded once per version as its refusal. */
  private withinSendBound(s: OpenStream, ts: TypeState, view: DeltaView, bytes: number): boolean {
    // The nonce adds a few dozen bytes.
    if (bytes + 64 <= this.maxSendBytes) return true;
    refuseOversize(this.host, s, ts, view.set, bytes);
    return false;
  }
}

/** A copy of `m` without `names` (the maps a stream holds are shared and never changed in place). */
function without(m: ReadonlyMap<string, string>, names: readonly string[]): ReadonlyMap<string, string> {
  if (!names.some((n) => m.has(n))) return m;
  const copy = new Map(m);
  for (const n of names) copy.delete(n);
  return copy;
}
