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
import { varintSize } from '../proto/index.js';
import type { Resource, ResourceSet } from './cache.js';

const TAG_VERSION = 0x0a; // field 1, length-delimited
const TAG_RESOURCES = 0x12; // field 2
const TAG_TYPE_URL = 0x22; // field 4
const TAG_NONCE = 0x2a; // field 5
const TAG_CONTROL_PLANE = 0x32; // field 6
const TAG_ANY_TYPE_URL = 0x0a; // Any.type_url = 1
const TAG_ANY_VALUE = 0x12; // Any.value = 2
const TAG_IDENTIFIER = 0x0a; // ControlPlane.identifier = 1

/** Size of a length-delimited field with a payload of `len` bytes. */
function fieldSize(len: number): number {
  return 1 + varintSize(len) + len;
}

class Out {
  pos = 0;
  constructor(readonly buf: Buffer) {}
  varint(n: number): void {
    while (n >= 0x80) {
      this.buf[this.pos++] = (n % 128) | 0x80;
      n = Math.floor(n / 128);
    }
    this.buf[this.pos++] = n;
  }
  bytes(tag: number, b: Uint8Array): void {
    this.buf[this.pos++] = tag;
    this.varint(b.length);
    this.buf.set(b, this.pos);
    this.pos += b.length;
  }
  header(tag: number, len: number): void {
    this.buf[this.pos++] = tag;
    this.varint(len);
  }
}

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
  if (ident) total += fieldSize(fieldSize(ident.length));
  const values: Uint8Array[] = new Array(set.resources.length);
  for (let i = 0; i < set.resources.length; i++) {
    const r = set.resources[i];
    const value = r.value;
    values[i] = value;
    total += fieldSize(fieldSize(urlOf(r).length) + fieldSize(value.length));
    for (const f of r.requiredFeatures ?? []) features.add(f);
  }
  const out = new Out(Buffer.allocUnsafe(total));
  out.bytes(TAG_VERSION, version);
  for (let i = 0; i < set.resources.length; i++) {
    const url = urlOf(set.resources[i]);
    out.header(TAG_RESOURCES, fieldSize(url.length) + fieldSize(values[i].length));
    out.bytes(TAG_ANY_TYPE_URL, url);
    out.bytes(TAG_ANY_VALUE, values[i]);
  }
  out.bytes(TAG_TYPE_URL, typeUrl);
  out.bytes(TAG_NONCE, nonceBytes);
  if (ident) {
    out.header(TAG_CONTROL_PLANE, fieldSize(ident.length));
    out.bytes(TAG_IDENTIFIER, ident);
  }
  if (out.pos !== total) throw new Error(`DiscoveryResponse size mismatch: ${out.pos} of ${total}`);
  return { version: set.version, nonce, bytes: out.buf, requiredFeatures: [...features].sort() };
}
