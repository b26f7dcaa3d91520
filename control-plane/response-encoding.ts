// A DiscoveryResponse encoded once per resource set and written as the same bytes to every stream
// that is sent that set: with N pods on one version, the resources are serialized once, not N times,
// and not copied per stream either (grpc-js frames the bytes once per stream; a second copy of a
// large set per stream cost as much CPU as the rest of a push). So the nonce is per encoded response,
// not per stream: unique on each stream all the same, since a stream is sent a given response at most
// once, except when a client asks again for a version it already had, and then the same content
// under the same nonce is exactly what it is.
//
// DiscoveryResponse (envoy.service.discovery.v3): version_info = 1, resources = 2 (google.protobuf.Any:
// type_url = 1, value = 2), type_url = 4, nonce = 5, control_plane = 6 (ControlPlane: identifier = 1).
import type { Resource, ResourceSet } from './cache.js';
import { anySize, controlPlaneSize, fieldSize, putAny, putControlPlane, putField } from './wire.js';

const TAG_VERSION = 0x0a; // field 1, length-delimited
const TAG_RESOURCES = 0x12; // field 2
const TAG_TYPE_URL = 0x22; // field 4
const TAG_NONCE = 0x2a; // field 5
const TAG_CONTROL_PLANE = 0x32; // field 6

/** One resource set's response, shared by every stream that is sent it. */
export interface EncodedResponse {
  readonly version: string;
  readonly nonce: string;
  /** The whole encoded DiscoveryResponse. */
  readonly bytes: Buffer;
  /** Features the set's resources require (the union, sorted); empty for most sets. */
  readonly requiredFeatures: readonly string[];
}

/** Encodes a resource set's response. */
export function encodeResponse(
  set: ResourceSet,
  identifier: string | undefined,
  nonce: string,
): EncodedResponse {
  const version = Buffer.from(set.version, 'utf8');
  const nonceBytes = Buffer.from(nonce, 'utf8');
  const typeUrl = Buffer.from(set.typeUrl, 'utf8');
  const ident = identifier ? Buffer.from(identifier, 'utf8') : undefined;
  // Resources of one set share their type URL nearly always: one Buffer per distinct URL.
  const urls = new Map<string, Buffer>();
  const urlOf = (r: Resource) => {
    let b = urls.get(r.typeUrl);
    if (!b) urls.set(r.typeUrl, (b = Buffer.from(r.typeUrl, 'utf8')));
    return b;
  };
  const features = new Set<string>();
  let total = fieldSize(version.length) + fieldSize(typeUrl.length) + fieldSize(nonceBytes.length);
  if (ident) total += controlPlaneSize(ident);
  for (let i = 0; i < set.resources.length; i++) {
    const r = set.resources[i];
    total += fieldSize(anySize(urlOf(r), r.value));
    for (const f of r.requiredFeatures ?? []) features.add(f);
  }
  const buf = Buffer.allocUnsafe(total);
  let pos = putField(buf, 0, TAG_VERSION, version);
  for (const r of set.resources) pos = putAny(buf, pos, TAG_RESOURCES, urlOf(r), r.value);
  pos = putField(buf, pos, TAG_TYPE_URL, typeUrl);
  pos = putField(buf, pos, TAG_NONCE, nonceBytes);
  if (ident) pos = putControlPlane(buf, pos, TAG_CONTROL_PLANE, ident);
  if (pos !== total) throw new Error(`DiscoveryResponse size mismatch: ${pos} of ${total}`);
  return { version: set.version, nonce, bytes: buf, requiredFeatures: [...features].sort() };
}
