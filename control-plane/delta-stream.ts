// Incremental ADS streams (DeltaAggregatedResources): what a request means for a stream (subscribe and
// unsubscribe lists, initial_resource_versions on a reconnect, ACK, NACK, stale nonces), the bounds on
// what one stream may send us, and what is sent to it (the resources whose version differs from what
// it has, assembled by delta.ts from per-resource bytes encoded once per version). The server
// (server.ts) opens the streams and identifies their node; this file talks to it through StreamHost
// (stream-protocol.ts).
//
// The ACK bookkeeping is the state-of-the-world one (TypeState: versionSent, versionAcked, lastNack, the
// ack/nack events, one response in flight per type) with system_version_info as the version, so
// whatever reads which pod runs which snapshot version reads delta pods the same way.
import { DELTA_WILDCARD, type WireDeltaDiscoveryRequest } from '../proto/index.js';
import { DeltaEncoder, NOTHING, type DeltaBody } from './delta.js';
import {
  refuseOversize,
  TypeState,
  withheldFrom,
  type OpenStream,
  type StreamHost,
  type StreamProtocol,
} from './stream-protocol.js';

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

export class DeltaStreams implements StreamProtocol<WireDeltaDiscoveryRequest> {
  private readonly encoder: DeltaEncoder;
  private readonly bounds: DeltaBounds;

  constructor(
    private readonly host: StreamHost,
    bounds: Partial<DeltaBounds> | undefined,
  ) {
    this.encoder = new DeltaEncoder(host.identifier);
    this.bounds = {
      maxNames: bounds?.maxNames ?? DEFAULT_DELTA_BOUNDS.maxNames,
      maxNameBytes: bounds?.maxNameBytes ?? DEFAULT_DELTA_BOUNDS.maxNameBytes,
    };
  }

  /** Resources encoded so far: each once per version, however many streams get it. */
  get resourcesEncoded(): number {
    return this.encoder.resourcesEncoded;
  }

  onRequest(s: OpenStream, req: WireDeltaDiscoveryRequest): void {
    const host = this.host;
    const typeUrl = req.typeUrl ?? '';
    if (typeUrl === '') {
      host.log.warn({ stream: s.id, node: s.nodeId }, 'ignoring delta ADS request without type_url');
      return;
    }
    const existing = s.types.get(typeUrl) as DeltaTypeState | undefined;
    const over = this.overBound(existing, req);
    if (over !== undefined) {
      host.refuse(s, over);
      return;
    }
    let ts = existing;
    if (!ts) {
      s.types.set(typeUrl, (ts = new DeltaTypeState(typeUrl)));
      subscribe(ts, req, true);
    } else {
      subscribe(ts, req, false);
    }

    const nonce = req.responseNonce ?? '';
    if (nonce !== '') {
      if (nonce !== ts.nonceSent) {
        host.log.debug(
          { stream: s.id, node: s.nodeId, nonce, expected: ts.nonceSent },
          'stale nonce ignored',
        );
        host.emit('stale', { stream: s, typeUrl, nonce });
      } else if (ts.awaitingAck) {
        ts.awaitingAck = false;
        const version = ts.versionSent ?? '';
        if (req.errorDetail) {
          // The client kept what it had: so do we.
          ts.pendingKnown = undefined;
          const message = req.errorDetail.message ?? '';
          ts.lastNack = { version, message, at: new Date() };
          ts.nackedVersions.add(version);
          host.log.warn({ stream: s.id, node: s.nodeId, version, message }, 'xDS NACK');
          host.emit('nack', { stream: s, typeUrl, version, message });
        } else {
          ts.known = ts.pendingKnown ?? ts.known;
          ts.pendingKnown = undefined;
          ts.versionAcked = version;
          ts.ackedAt = new Date();
          ts.clientVersion = version;
          host.log.debug({ stream: s.id, node: s.nodeId, version }, 'xDS ACK');
          host.emit('ack', { stream: s, typeUrl, version, resumed: false });
        }
      }
    }
    this.respond(s, ts);
  }

  push(s: OpenStream): void {
    for (const ts of s.types.values()) this.respond(s, ts as DeltaTypeState);
  }

  /** The first bound a request breaks, as the refusal message; undefined when within them. */
  private overBound(ts: DeltaTypeState | undefined, req: WireDeltaDiscoveryRequest): string | undefined {
    const b = this.bounds;
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
    return `a resource name of ${Buffer.byteLength(name)} bytes, more than ${this.bounds.maxNameBytes} (--max-delta-name-bytes)`;
  }

  private respond(s: OpenStream, ts: DeltaTypeState): void {
    if (s.closed || ts.awaitingAck) return;
    const host = this.host;
    const snap = host.snapshot(s.nodeId);
    if (!snap) return;
    const set = snap.resourceSet(ts.typeUrl);
    if (ts.nackedVersions.has(set.version)) return;
    const view = this.encoder.view(set);
    if (withheldFrom(host, s, ts, set.version, view.requiredFeatures)) return;
    let body: DeltaBody;
    let after: ReadonlyMap<string, string>;
    if (ts.wildcard) {
      body = this.encoder.wildcardBody(ts.known, view);
      after = view.versions;
    } else {
      ({ body, after } = this.encoder.subscribedBody(ts.known, ts.subscribed, view));
    }
    if (body.added === 0 && body.removed.length === 0) {
      if (ts.versionAcked === set.version) return;
      if (ts.nonceSent === undefined && ts.resumed) {
        // A pod reconnecting with exactly what the snapshot holds runs this version: nothing to send.
        ts.known = after;
        ts.versionAcked = set.version;
        ts.clientVersion = set.version;
        ts.ackedAt = new Date();
        host.emit('ack', { stream: s, typeUrl: ts.typeUrl, version: set.version, resumed: true });
        return;
      }
      // Otherwise an empty response moves the pod to this version (and its ACK says it got there).
    }
    if (ts.oversizeVersion === set.version) return;
    // As SotW: a response past the send bound is not sent. The nonce adds a few dozen bytes.
    if (body.bytes.length + 64 > host.maxSendBytes) {
      refuseOversize(host, s, ts, set, body.bytes.length);
      return;
    }
    const { nonce, bytes } = DeltaEncoder.seal(body, host.nextNonce);
    ts.versionSent = set.version;
    ts.nonceSent = nonce;
    ts.awaitingAck = true;
    ts.pendingKnown = after;
    s.call.write(bytes);
    host.log.debug(
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
    host.emit('response', {
      stream: s,
      typeUrl: ts.typeUrl,
      version: set.version,
      nonce,
      resources: body.added,
    });
  }
}

/** Applies a request's subscribe/unsubscribe lists (and, on the first, initial_resource_versions). */
function subscribe(ts: DeltaTypeState, req: WireDeltaDiscoveryRequest, first: boolean): void {
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

/** A copy of `m` without `names` (the maps a stream holds are shared and never changed in place). */
function without(m: ReadonlyMap<string, string>, names: readonly string[]): ReadonlyMap<string, string> {
  if (!names.some((n) => m.has(n))) return m;
  const copy = new Map(m);
  for (const n of names) copy.delete(n);
  return copy;
}
