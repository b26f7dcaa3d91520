// The protobuf writing both ADS responses share (DiscoveryResponse in response-encoding.ts,
// DeltaDiscoveryResponse in delta.ts): length-delimited fields into a buffer sized beforehand, a
// google.protobuf.Any (type_url = 1, value = 2) and a ControlPlane (identifier = 1). Each put returns
// the position after what it wrote.
import { varintSize } from '../proto/index.js';

const TAG_ANY_TYPE_URL = 0x0a; // Any.type_url = 1
const TAG_ANY_VALUE = 0x12; // Any.value = 2
const TAG_IDENTIFIER = 0x0a; // ControlPlane.identifier = 1

/** Size of a length-delimited field (one-byte tag) with a payload of `len` bytes. */
export function fieldSize(len: number): number {
  return 1 + varintSize(len) + len;
}

export function putVarint(buf: Buffer, pos: number, n: number): number {
  while (n >= 0x80) {
    buf[pos++] = (n % 128) | 0x80;
    n = Math.floor(n / 128);
  }
  buf[pos++] = n;
  return pos;
}

/** A length-delimited field's tag and length; its payload follows. */
export function putHeader(buf: Buffer, pos: number, tag: number, len: number): number {
  buf[pos++] = tag;
  return putVarint(buf, pos, len);
}

export function putField(buf: Buffer, pos: number, tag: number, b: Uint8Array): number {
  pos = putHeader(buf, pos, tag, b.length);
  buf.set(b, pos);
  return pos + b.length;
}

/** Payload size of an Any of this type URL and value. */
export function anySize(typeUrl: Uint8Array, value: Uint8Array): number {
  return fieldSize(typeUrl.length) + fieldSize(value.length);
}

/** An Any as field `tag`. */
export function putAny(
  buf: Buffer,
  pos: number,
  tag: number,
  typeUrl: Uint8Array,
  value: Uint8Array,
): number {
  pos = putHeader(buf, pos, tag, anySize(typeUrl, value));
  pos = putField(buf, pos, TAG_ANY_TYPE_URL, typeUrl);
  return putField(buf, pos, TAG_ANY_VALUE, value);
}

/** Whole size of a ControlPlane field with this identifier. */
export function controlPlaneSize(identifier: Uint8Array): number {
  return fieldSize(fieldSize(identifier.length));
}

/** A ControlPlane { identifier } as field `tag`. */
export function putControlPlane(buf: Buffer, pos: number, tag: number, identifier: Uint8Array): number {
  pos = putHeader(buf, pos, tag, fieldSize(identifier.length));
  return putField(buf, pos, TAG_IDENTIFIER, identifier);
}
