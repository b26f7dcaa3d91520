// State-of-the-world ADS streams (StreamAggregatedResources): what a request means for a stream (its
// nonce and version_info: ACK, NACK, stale, a reconnecting pod's resume) and what is sent to it (the
// whole resource set of the type, encoded once per set by response-encoding.ts and written as the same
// bytes to every stream). The server (server.ts) opens the streams and identifies their node; this file
// talks to it through StreamHost (stream-protocol.ts).
//
// Per stream and type URL at most one response is in flight: the next one goes out after the ACK/NACK
// of the previous one (the request that carries the nonce we sent), as go-control-plane does. A request
// with a nonce other than the last one sent is stale and ignored. A NACKed version is never sent again
// on that stream.
import type { WireDiscoveryRequest } from '../proto/index.js';
import type { ResourceSet } from './cache.js';
import { encodeResponse, type EncodedResponse } from './response-encoding.js';
import {
  refuseOversize,
  TypeState,
  withheldFrom,
  type OpenStream,
  type StreamHost,
  type StreamProtocol,
} from './stream-protocol.js';

export class SotwStreams implements StreamProtocol<WireDiscoveryRequest> {
  /** Each resource set's response, encoded the first time a stream is sent it. */
  private readonly encoded = new WeakMap<ResourceSet, EncodedResponse>();
  private encodes = 0;

  constructor(private readonly host: StreamHost) {}

  /** Responses encoded so far: one per resource set sent, however many streams it went to. */
  get responsesEncoded(): number {
    return this.encodes;
  }

  onRequest(s: OpenStream, req: WireDiscoveryRequest): void {
    const typeUrl = req.typeUrl ?? '';
    const host = this.host;
    if (typeUrl === '') {
      host.log.warn({ stream: s.id, node: s.nodeId }, 'ignoring ADS request without type_url');
      return;
    }
    let ts = s.types.get(typeUrl);
    const firstForType = !ts;
    if (!ts) s.types.set(typeUrl, (ts = new TypeState(typeUrl)));
    const nonce = req.responseNonce ?? '';
    const version = req.versionInfo ?? '';

    if (ts.nonceSent !== undefined) {
      if (nonce !== ts.nonceSent) {
        host.log.debug(
          { stream: s.id, node: s.nodeId, nonce, expected: ts.nonceSent },
          'stale nonce ignored',
        );
        host.emit('stale', { stream: s, typeUrl, nonce });
        return;
      }
      ts.awaitingAck = false;
      if (req.errorDetail) {
        const nacked = ts.versionSent ?? '';
        const message = req.errorDetail.message ?? '';
        ts.lastNack = { version: nacked, message, at: new Date() };
        ts.nackedVersions.add(nacked);
        host.log.warn({ stream: s.id, node: s.nodeId, version: nacked, message }, 'xDS NACK');
        host.emit('nack', { stream: s, typeUrl, version: nacked, message });
      } else {
        ts.versionAcked = version;
        ts.ackedAt = new Date();
        host.log.debug({ stream: s.id, node: s.nodeId, version }, 'xDS ACK');
        host.emit('ack', { stream: s, typeUrl, version, resumed: false });
      }
    } else if (firstForType && version !== '' && !req.errorDetail) {
      // A pod reconnecting (maybe from another replica) tells us what it runs; with content
      // hashed versions that is comparable with ours.
      ts.versionAcked = version;
      ts.ackedAt = new Date();
      host.emit('ack', { stream: s, typeUrl, version, resumed: true });
    }
    ts.clientVersion = version;
    this.respond(s, ts);
  }

  push(s: OpenStream): void {
    for (const ts of s.types.values()) this.respond(s, ts);
  }

  private respond(s: OpenStream, ts: TypeState): void {
    if (s.closed || ts.awaitingAck) return;
    const host = this.host;
    const snap = host.snapshot(s.nodeId);
    if (!snap) return;
    const set = snap.resourceSet(ts.typeUrl);
    if (set.version === ts.clientVersion || ts.nackedVersions.has(set.version)) return;
    const encoded = this.encodedResponse(set);
    if (withheldFrom(host, s, ts, set.version, encoded.requiredFeatures)) return;
    if (ts.oversizeVersion === set.version) return;
    if (encoded.bytes.length > host.maxSendBytes) {
      refuseOversize(host, s, ts, set, encoded.bytes.length);
      return;
    }
    const nonce = encoded.nonce;
    ts.versionSent = set.version;
    ts.nonceSent = nonce;
    ts.awaitingAck = true;
    s.call.write(encoded.bytes);
    host.log.debug({ stream: s.id, node: s.nodeId, version: set.version, nonce }, 'xDS response sent');
    host.emit('response', {
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
      e = encodeResponse(set, this.host.identifier, this.host.nextNonce());
      this.encoded.set(set, e);
      this.encodes++;
    }
    return e;
  }
}
