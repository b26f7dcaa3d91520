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
  XDS_MAX_MESSAGE_BYTES,
  type WireDeltaDiscoveryRequest,
  type WireDiscoveryRequest,
} from '../proto/index.js';
import type { SnapshotCache } from './cache.js';
import { DeltaStreams, type DeltaBounds } from './delta-stream.js';
import { SotwStreams } from './sotw-stream.js';
import { ReloadingTlsFiles, reloadingServerCredentials, type TlsFiles } from './tls.js';
import { silentLogger, type Logger } from '../common/index.js';
import type { AdsServerEvents, StreamState } from './stream-state.js';
import { OpenStream, type StreamHost, type StreamProtocol } from './stream-protocol.js';

export type { TlsFiles } from './tls.js';
export { DEFAULT_DELTA_BOUNDS, type DeltaBounds } from './delta-stream.js';

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

/** Longest run of stream writes in one event-loop turn during a fan-out (see pushAll). */
const PUSH_SLICE_MS = 2;

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
  private readonly delta: DeltaStreams;
  /** The streams of the fan-out in progress, the next one to offer, whether a slice is scheduled. */
  private pushQueue: OpenStream[] = [];
  private pushNext = 0;
  private pushScheduled = false;

  constructor(private readonly opts: AdsServerOptions) {
    super();
    this.cache = opts.cache;
    this.log = opts.logger ?? silentLogger;
    this.maxSendBytes = opts.maxSendMessageBytes ?? XDS_MAX_MESSAGE_BYTES;
    const host: StreamHost = {
      log: this.log,
      identifier: opts.identifier,
      maxSendBytes: this.maxSendBytes,
      snapshot: (nodeId) => this.cache.getSnapshot(nodeId),
      nextNonce: () => `${this.noncePrefix}-${++this.nonceSeq}`,
      refuse: (s, details) => this.refuse(s, details),
      emit: (event, ...args) => this.emit(event, ...args),
    };
    this.sotw = new SotwStreams(host);
    this.delta = new DeltaStreams(host, opts.delta);
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
    this.pushQueue = [];
    this.pushNext = 0;
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
    this.attach(call, 'delta', this.delta);
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

  /**
   * Offers the current snapshot to every open stream (a no-op for those already on it or awaiting an
   * ACK), in slices of PUSH_SLICE_MS with a macrotask between them. grpc-js only queues a stream's
   * write; its HTTP/2 session sends the bytes from the event loop's next immediate phase. In one
   * synchronous pass over a thousand streams no pod would receive anything before the last stream was
   * written; in slices the first pods receive (and decode, on their side) while the server is still
   * writing to the rest. A change during a fan-out restarts it over every stream: a stream already sent
   * the previous version is awaiting its ACK and gets the newest version then.
   */
  private pushAll(): void {
    this.pushQueue = [...this.open.values()];
    this.pushNext = 0;
    if (!this.pushScheduled) this.pushSlice();
  }

  private pushSlice(): void {
    this.pushScheduled = false;
    const queue = this.pushQueue;
    const until = performance.now() + PUSH_SLICE_MS;
    while (this.pushNext < queue.length) {
      const s = queue[this.pushNext++];
      if (s.nodeId === '' || s.closed) continue;
      (s.protocol === 'delta' ? this.delta : this.sotw).push(s);
      if (performance.now() >= until && this.pushNext < queue.length) {
        this.pushScheduled = true;
        setImmediate(() => this.pushSlice());
        return;
      }
    }
    this.pushQueue = [];
    this.pushNext = 0;
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
}
