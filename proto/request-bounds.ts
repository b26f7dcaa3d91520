// Bounds on the work one rate limit request may ask for, shared by the two request decoders (gRPC
// bytes in rls-codec.ts, which also bounds the protobuf fields it walks; /json in
// ratelimit/server/json.ts) so that both refuse the same requests with the same words. Every bound is
// a setting (REQUEST_MAX_*, ratelimit/settings); the reasoning behind the defaults is in
// docs/decisions/003-request-bounds.md. A request past a bound is the caller's error (gRPC
// INVALID_ARGUMENT, HTTP 400) and is refused while it is decoded, before it costs more.

export interface RequestBounds {
  /** REQUEST_MAX_DESCRIPTORS: descriptors in one request. */
  maxDescriptors: number;
  /** REQUEST_MAX_DESCRIPTOR_ENTRIES: entries in one descriptor. */
  maxEntries: number;
  /** REQUEST_MAX_KEY_BYTES: UTF-8 bytes of the domain and of each entry key. */
  maxKeyBytes: number;
  /** REQUEST_MAX_VALUE_BYTES: UTF-8 bytes of each entry value. */
  maxValueBytes: number;
  /** REQUEST_MAX_HITS_ADDEND: the request's and each descriptor's hits_addend. */
  maxHitsAddend: number;
}

/**
 * Largest hits_addend counted, whatever REQUEST_MAX_HITS_ADDEND says (the service checks it again for
 * requests that reach it without a decoder): a double adds exactly up to 2^53-1, and a larger addend
 * is over any uint32 limit anyway. Above it (up to 2^64-1 on the wire) is the caller's error, never
 * sent to Redis, whose INCRBY refuses more than 2^63-1 and would report it as a cache failure.
 */
export const MAX_HITS_ADDEND = Number.MAX_SAFE_INTEGER;

export const DEFAULT_REQUEST_BOUNDS: Readonly<RequestBounds> = Object.freeze({
  maxDescriptors: 64,
  maxEntries: 32,
  maxKeyBytes: 512,
  maxValueBytes: 8192,
  maxHitsAddend: 4294967295,
});

// The refusal messages: each names the bound, its value and the setting that changes it.

export function tooManyDescriptors(b: RequestBounds): string {
  return `more than ${b.maxDescriptors} descriptors in one request (REQUEST_MAX_DESCRIPTORS)`;
}

export function tooManyEntries(b: RequestBounds, i: number): string {
  return `descriptors[${i}]: more than ${b.maxEntries} entries (REQUEST_MAX_DESCRIPTOR_ENTRIES)`;
}

export function domainTooLong(b: RequestBounds, bytes: number): string {
  return `domain: ${bytes} bytes, more than ${b.maxKeyBytes} (REQUEST_MAX_KEY_BYTES)`;
}

export function keyTooLong(b: RequestBounds, i: number, j: number, bytes: number): string {
  return `descriptors[${i}].entries[${j}].key: ${bytes} bytes, more than ${b.maxKeyBytes} (REQUEST_MAX_KEY_BYTES)`;
}

export function valueTooLong(b: RequestBounds, i: number, j: number, bytes: number): string {
  return `descriptors[${i}].entries[${j}].value: ${bytes} bytes, more than ${b.maxValueBytes} (REQUEST_MAX_VALUE_BYTES)`;
}

/** `where` is `hits_addend` or `descriptors[i].hits_addend`. */
export function hitsAddendOutOfRange(
  b: RequestBounds,
  where: string,
  value: number | bigint | string,
): string {
  return `${where}: ${value} is out of range (at most ${b.maxHitsAddend}, REQUEST_MAX_HITS_ADDEND)`;
}

/**
 * UTF-8 bytes of a string, computed only when its length leaves it in doubt: a UTF-16 unit is 1 to 3
 * UTF-8 bytes, so `length > max` is always over and `3 * length <= max` never is.
 */
export function utf8Over(s: string, max: number): number {
  if (s.length > max) return Buffer.byteLength(s);
  if (s.length * 3 <= max) return 0;
  const n = Buffer.byteLength(s);
  return n > max ? n : 0;
}
