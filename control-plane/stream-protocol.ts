// The contract between the ADS server (server.ts: gRPC, TLS, open streams, node identification, the
// push fan-out, the events) and the stream logic of each xDS protocol it serves (sotw-stream.ts for
// state of the world, delta-stream.ts for incremental). The server owns the streams and hands each
// request and each push to its stream's protocol (StreamProtocol); a protocol reaches the server only
// through StreamHost. Both protocols keep the same per-type record (TypeState, read by the operator as
// StreamTypeState) and make the same two checks before sending, kept here so they stay one: a version
// using features the pod did not announce is withheld, a response past the send bound is not sent.
import type { EventEmitter } from 'node:events';
import type { Logger } from '../common/index.js';
import type { ResourceSet, Snapshot } from './cache.js';
import {
  oversizeMessage,
  type AdsServerEvents,
  type StreamState,
  type StreamTypeState,
} from './stream-state.js';

/** The state of one type URL on one stream, as both protocols record it (delta adds to it). */
export class TypeState implements StreamTypeState {
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

/** The writable end of a stream's gRPC call: what the server and the protocols do to it. */
export interface StreamCall {
  write(b: Buffer): unknown;
  emit(e: 'error', err: unknown): unknown;
  end(): void;
}

/** One open stream (one pod's connection), opened by the server and written by its protocol. */
export class OpenStream implements StreamState {
  nodeId = '';
  protocol: 'sotw' | 'delta' = 'sotw';
  features: ReadonlySet<string> = new Set();
  readonly connectedSince = new Date();
  readonly types = new Map<string, TypeState>();
  closed = false;
  constructor(
    readonly id: number,
    readonly peer: string,
    readonly call: StreamCall,
  ) {}
}

/** What a protocol's stream logic uses of the server. */
export interface StreamHost {
  readonly log: Logger;
  /** control_plane.identifier in responses. */
  readonly identifier: string | undefined;
  /** Bound on a response's bytes (maxSendMessageBytes). */
  readonly maxSendBytes: number;
  /** The snapshot served to a node, undefined when there is none yet. */
  snapshot(nodeId: string): Snapshot | undefined;
  /** A nonce no other response of this server (or of another replica) carries. */
  readonly nextNonce: () => string;
  /** Ends a stream for the client's error (INVALID_ARGUMENT with `details`). */
  refuse(s: OpenStream, details: string): void;
  /** Emits one of the server's events. */
  readonly emit: EventEmitter<AdsServerEvents>['emit'];
}

/** What the server asks of a protocol's stream logic; the server has identified the stream's node. */
export interface StreamProtocol<Req> {
  /** A request on an open stream of this protocol. */
  onRequest(s: OpenStream, req: Req): void;
  /** Offers the current snapshot to each type the stream follows (a no-op where nothing is due). */
  push(s: OpenStream): void;
}

/** Features some resource requires that the pod did not announce, sorted. */
function missingFeatures(required: readonly string[], announced: ReadonlySet<string>): string[] {
  return required.length === 0 ? required.slice() : required.filter((f) => !announced.has(f));
}

/**
 * Never send a config that uses a feature the pod did not announce: a reference pod would ignore the
 * fields and enforce something else (a sliding window as a fixed one, rate_limits as nothing). True
 * when `version` is withheld from the stream (logged and emitted once per version).
 */
export function withheldFrom(
  host: StreamHost,
  s: OpenStream,
  ts: TypeState,
  version: string,
  requiredFeatures: readonly string[],
): boolean {
  const missing = missingFeatures(requiredFeatures, s.features);
  if (missing.length > 0) {
    if (ts.withheld?.version !== version) {
      ts.withheld = { version, features: missing };
      host.log.warn(
        { stream: s.id, node: s.nodeId, version, features: missing },
        'xDS version withheld: the pod does not announce features it uses',
      );
      host.emit('withheld', { stream: s, typeUrl: ts.typeUrl, version, features: missing });
    }
    return true;
  }
  ts.withheld = undefined;
  return false;
}

/**
 * A response of `bytes` past the send bound is not sent: sending it would fail the stream (or the
 * client would refuse it) and the pod would reconnect in a loop on its old config. Said once per stream
 * and version instead, and recorded as the stream's last refusal of that version, so whatever reports
 * NACKs (the operator's Programmed condition on the resources of these domains) reports this too.
 */
export function refuseOversize(
  host: StreamHost,
  s: OpenStream,
  ts: TypeState,
  set: ResourceSet,
  bytes: number,
): void {
  const max = host.maxSendBytes;
  const version = set.version;
  ts.oversizeVersion = version;
  ts.lastNack = { version, message: oversizeMessage(bytes, max), at: new Date() };
  host.log.error(
    { stream: s.id, node: s.nodeId, version, bytes, maxBytes: max },
    `xDS response of ${bytes} bytes exceeds the ${max}-byte maximum (--max-send-bytes, XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES); not sent, node ${s.nodeId} keeps its config`,
  );
  host.emit('oversize', {
    stream: s,
    typeUrl: ts.typeUrl,
    version,
    bytes,
    maxBytes: max,
    resources: set.resources.map((r) => r.name),
  });
}
