// Hand-written protobuf codecs for the two messages of the hot path, RateLimitRequest (decode) and
// RateLimitResponse (encode), producing and taking the same plain objects as the proto-loader
// definition (LOADER_OPTIONS: camelCase, enums as names, longs as numbers, absent fields absent).
// They cost a fraction of protobufjs' reflection codecs with object conversion (docs/decisions/007-hot-path-shapes.md). Field
// numbers are rls.proto's and ratelimit.proto's. Responses carrying dynamic metadata or quotas (rare)
// go through protobufjs: `encodeRateLimitResponse` returns undefined for them.
import type {
  WireCode,
  WireDescriptor,
  WireDescriptorStatus,
  WireEntry,
  WireHeader,
  WireRateLimitRequest,
  WireRateLimitResponse,
  WireUnit,
} from './rls.js';
import { isUtf8 } from 'node:buffer';
import { RATELIMIT_UNIT_NAMES, RATELIMIT_UNIT_NUMBER } from './units.js';
import {
  DEFAULT_REQUEST_BOUNDS,
  domainTooLong,
  hitsAddendOutOfRange,
  keyTooLong,
  type RequestBounds,
  tooManyDescriptors,
  tooManyEntries,
  valueTooLong,
} from './request-bounds.js';

const CODE_NUMBER: Record<WireCode, number> = { UNKNOWN: 0, OK: 1, OVER_LIMIT: 2 };

/**
 * The protobuf fields one request message may hold, unknown fields included: what the descriptor and
 * entry bounds allow (a descriptor is 1 field plus 3 for its limit and 2 for its hits_addend, an
 * entry 3), doubled for room, so no request within the bounds comes near it. It bounds the decoder's
 * walk over a message of millions of tiny or repeated fields.
 */
export function maxFields(b: RequestBounds): number {
  return b.maxDescriptors * (b.maxEntries * 6 + 16) + 64;
}

/** The refusal of a request past maxFields. */
export function tooManyFields(max: number): string {
  return `more than ${max} protobuf fields in one request (room for what REQUEST_MAX_DESCRIPTORS and REQUEST_MAX_DESCRIPTOR_ENTRIES allow)`;
}

// --- decoding -------------------------------------------------------------------------------------

/**
 * A caller's bad value in a well-formed message (a string field that is not UTF-8, a request past one
 * of the RequestBounds). The gRPC server (ratelimit/server/grpc-server.ts) answers it with
 * INVALID_ARGUMENT instead of INTERNAL, as for a malformed message.
 */
export class InvalidFieldError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InvalidFieldError';
  }
}

/** The largest integer a double holds exactly: counts above it cannot be added exactly. */
const SAFE = Number.MAX_SAFE_INTEGER;

/**
 * A protobuf wire reader over buf[start, end): varints (exact to 2^53 as numbers, exact uint32 and
 * uint64 reads where the field has that type), length-delimited spans, UTF-8-checked strings, skips.
 */
export class ProtoReader {
  pos: number;
  constructor(
    readonly buf: Buffer,
    start: number,
    readonly end: number,
  ) {
    this.pos = start;
  }

  /** A varint as a number: exact up to 2^53 (tags, lengths, small values); see uint32/uint64. */
  varint(): number {
    let result = 0;
    let shift = 0;
    for (;;) {
      if (this.pos >= this.end) throw new Error('truncated varint');
      const b = this.buf[this.pos++]!;
      // Multiplication keeps precision past 32 bits (up to 2^53), where << would wrap.
      result += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) return result;
      shift += 7;
      if (shift > 63) throw new Error('varint longer than 10 bytes');
    }
  }

  /** A uint32 field: the low 32 bits of the varint, exactly (as protobufjs and Go read a longer one). */
  uint32(): number {
    const start = this.pos;
    const first = this.varint();
    if (first <= 0xffffffff) return first;
    // More than 32 bits: take the low 32 from the bytes (the double above may have rounded them).
    let lo = 0;
    for (let i = 0; i < 5; i++) lo |= (this.buf[start + i]! & 0x7f) << (7 * i);
    return lo >>> 0;
  }

  /**
   * A uint64 field: a number when it is at most 2^53-1 (always, in practice), otherwise the exact
   * value as a bigint (the rare path; the caller decides whether it is in range).
   */
  uint64(): number | bigint {
    const start = this.pos;
    const n = this.varint();
    if (n <= SAFE) return n;
    let v = 0n;
    for (let i = this.pos - 1; i >= start; i--) v = (v << 7n) | BigInt(this.buf[i]! & 0x7f);
    return BigInt.asUintN(64, v);
  }

  /** Bounds of a length-delimited field's bytes; the reader moves past them. */
  span(): number {
    const len = this.varint();
    const start = this.pos;
    if (start + len > this.end) throw new Error('truncated length-delimited field');
    this.pos = start + len;
    return start;
  }

  /** A reader over the next length-delimited field (a nested message); this one moves past it. */
  nested(): ProtoReader {
    const start = this.span();
    return new ProtoReader(this.buf, start, this.pos);
  }

  /**
   * A string field; not UTF-8 is the caller's error (InvalidFieldError), as grpc-go rejects it, instead
   * of U+FFFD replacements that would make different values the same counter. ASCII (the usual case)
   * is checked byte by byte; anything else by isUtf8.
   */
  string(): string {
    const start = this.span();
    return this.utf8(start, this.pos);
  }

  /** buf[start, end) as a string, checked as string() checks it. */
  utf8(start: number, end: number): string {
    const b = this.buf;
    for (let i = start; i < end; i++) {
      if (b[i]! >= 0x80) {
        if (!isUtf8(b.subarray(start, end)))
          throw new InvalidFieldError('string field contains invalid UTF-8');
        break;
      }
    }
    return b.toString('utf8', start, end);
  }

  skip(wireType: number): void {
    switch (wireType) {
      case 0:
        this.varint();
        return;
      case 1:
        this.pos += 8;
        break;
      case 2:
        this.span();
        return;
      case 5:
        this.pos += 4;
        break;
      default:
        throw new Error(`unsupported wire type ${wireType}`);
    }
    if (this.pos > this.end) throw new Error('truncated fixed-width field');
  }
}

// Fields left to read in the request being decoded (decoding is synchronous: one request at a time).
// Every field counts, known or not, nested or not, so that 4 MiB of tiny or repeated fields stops
// after a few thousand instead of being walked two million times.
// (A property, not a module-level `let`: V8 checks a `let` binding's initialisation at every access.)
const fields = { left: 0, budget: 0 };

function nextTag(r: ProtoReader): number {
  if (--fields.left < 0) fieldsExhausted();
  return r.varint();
}

// Out of line: nextTag stays small enough to be inlined into every decoding loop.
function fieldsExhausted(): never {
  throw new InvalidFieldError(tooManyFields(fields.budget));
}

function decodeEntry(sub: ProtoReader, b: RequestBounds, i: number, j: number): WireEntry {
  const out: WireEntry = {};
  while (sub.pos < sub.end) {
    const tag = nextTag(sub);
    const field = tag >>> 3;
    const wt = tag & 7;
    if (field === 1 && wt === 2) {
      const start = sub.span();
      if (sub.pos - start > b.maxKeyBytes) throw new InvalidFieldError(keyTooLong(b, i, j, sub.pos - start));
      out.key = sub.utf8(start, sub.pos);
    } else if (field === 2 && wt === 2) {
      const start = sub.span();
      if (sub.pos - start > b.maxValueBytes)
        throw new InvalidFieldError(valueTooLong(b, i, j, sub.pos - start));
      out.value = sub.utf8(start, sub.pos);
    } else sub.skip(wt);
  }
  return out;
}

/** RateLimit override; a second occurrence of the field merges into the first (the protobuf rule). */
function decodeLimit(
  sub: ProtoReader,
  out: { requestsPerUnit?: number; unit?: WireUnit | number },
): { requestsPerUnit?: number; unit?: WireUnit | number } {
  while (sub.pos < sub.end) {
    const tag = nextTag(sub);
    const field = tag >>> 3;
    const wt = tag & 7;
    if (field === 1 && wt === 0) out.requestsPerUnit = sub.uint32();
    else if (field === 2 && wt === 0) {
      const n = sub.uint32();
      // An enum number without a name stays a number, as protobufjs leaves it.
      out.unit = RATELIMIT_UNIT_NAMES[n] ?? n;
    } else sub.skip(wt);
  }
  return out;
}

/** UInt64Value; a second occurrence of the field merges into the first. */
function decodeUInt64Value(sub: ProtoReader, out: { value?: number | bigint }): { value?: number | bigint } {
  while (sub.pos < sub.end) {
    const tag = nextTag(sub);
    if (tag === 0x08) out.value = sub.uint64();
    else sub.skip(tag & 7);
  }
  return out;
}

function decodeDescriptor(sub: ProtoReader, b: RequestBounds, i: number): WireDescriptor {
  const out: WireDescriptor = {};
  while (sub.pos < sub.end) {
    const tag = nextTag(sub);
    const field = tag >>> 3;
    const wt = tag & 7;
    if (wt === 2 && field >= 1 && field <= 3) {
      const nested = sub.nested();
      if (field === 1) {
        const entries = (out.entries ??= []);
        // Counted before the entry is decoded: a descriptor of a million entries stops here.
        if (entries.length >= b.maxEntries) throw new InvalidFieldError(tooManyEntries(b, i));
        entries.push(decodeEntry(nested, b, i, entries.length));
      } else if (field === 2) out.limit = decodeLimit(nested, out.limit ?? {});
      else out.hitsAddend = decodeUInt64Value(nested, out.hitsAddend ?? {});
    } else if (field === 4 && wt === 0) {
      // is_negative_hits, a bool: any non-zero varint is true, as protobufjs and Go read it.
      out.isNegativeHits = sub.varint() !== 0;
    } else sub.skip(wt);
  }
  const h = out.hitsAddend?.value;
  if (h !== undefined && h > b.maxHitsAddend)
    throw new InvalidFieldError(hitsAddendOutOfRange(b, `descriptors[${i}].hits_addend`, h));
  return out;
}

/**
 * RateLimitRequest from its bytes; throws on malformed input (the server answers INTERNAL) and
 * InvalidFieldError (INVALID_ARGUMENT) on a string that is not UTF-8 or a request past one of `bounds`.
 * The bounds are checked as the message is read, so a message of 200,000 descriptors costs no more
 * than one just past the bound: the decoder stops there.
 */
export function decodeRateLimitRequest(
  buf: Buffer,
  bounds: RequestBounds = DEFAULT_REQUEST_BOUNDS,
): WireRateLimitRequest {
  const r = new ProtoReader(buf, 0, buf.length);
  const out: WireRateLimitRequest = {};
  fields.left = fields.budget = maxFields(bounds);
  // A repeated singular field: the last occurrence wins, and only that one is turned into a string.
  let domainAt = -1;
  let domainEnd = -1;
  while (r.pos < r.end) {
    const tag = nextTag(r);
    const field = tag >>> 3;
    const wt = tag & 7;
    if (field === 1 && wt === 2) {
      if (domainAt < 0) out.domain = ''; // holds its place among the fields, as protobufjs orders them
      domainAt = r.span();
      domainEnd = r.pos;
      if (domainEnd - domainAt > bounds.maxKeyBytes)
        throw new InvalidFieldError(domainTooLong(bounds, domainEnd - domainAt));
    } else if (field === 2 && wt === 2) {
      const ds = (out.descriptors ??= []);
      if (ds.length >= bounds.maxDescriptors) throw new InvalidFieldError(tooManyDescriptors(bounds));
      ds.push(decodeDescriptor(r.nested(), bounds, ds.length));
    } else if (field === 3 && wt === 0) out.hitsAddend = r.uint32();
    else r.skip(wt);
  }
  if (domainAt >= 0) out.domain = r.utf8(domainAt, domainEnd);
  if (out.hitsAddend !== undefined && out.hitsAddend > bounds.maxHitsAddend)
    throw new InvalidFieldError(hitsAddendOutOfRange(bounds, 'hits_addend', out.hitsAddend));
  return out;
}

// --- encoding -------------------------------------------------------------------------------------

/** Bytes of `n` (a non-negative integer) as a protobuf varint; the hand-written encoders size with it. */
export function varintSize(n: number): number {
  let size = 1;
  while (n >= 0x80) {
    n = Math.floor(n / 128);
    size++;
  }
  return size;
}

// The encoder keeps no per-call objects: one module-level writer and one scratch array of sizes, reused
// by every call (encoding is synchronous, so no two calls can share them at once). Only the returned
// Buffer is new.
const writer = { buf: Buffer.alloc(0), pos: 0 };

function writeVarint(n: number): void {
  const b = writer.buf;
  let pos = writer.pos;
  while (n >= 0x80) {
    b[pos++] = (n % 128) | 0x80;
    n = Math.floor(n / 128);
  }
  b[pos++] = n;
  writer.pos = pos;
}

function writeString(s: string, bytes: number): void {
  writeVarint(bytes);
  writer.pos += writer.buf.write(s, writer.pos, 'utf8');
}

// Sizes computed by the first pass and read by the second: per status 4 numbers (its currentLimit
// message, the limit's name, its durationUntilReset message, the whole status), then per header 3
// (the whole header, key bytes, value bytes). Grown when a response needs more; never shrunk.
const scratch = { sizes: new Float64Array(64) };
const STATUS_SLOTS = 4;
const HEADER_SLOTS = 3;

/** Writes one status's sizes at `at` in the scratch; returns the status message's size. */
function statusSizes(s: WireDescriptorStatus, z: Float64Array, at: number): number {
  let total = 0;
  const code = CODE_NUMBER[s.code] ?? 0;
  if (code !== 0) total += 1 + varintSize(code);
  let limit = 0;
  let limitName = 0;
  const l = s.currentLimit;
  if (l) {
    if (l.requestsPerUnit) limit += 1 + varintSize(l.requestsPerUnit);
    const unit = RATELIMIT_UNIT_NUMBER[l.unit] ?? 0;
    if (unit !== 0) limit += 1 + varintSize(unit);
    if (l.name) {
      limitName = Buffer.byteLength(l.name);
      limit += 1 + varintSize(limitName) + limitName;
    }
    total += 1 + varintSize(limit) + limit;
  }
  if (s.limitRemaining) total += 1 + varintSize(s.limitRemaining);
  let duration = 0;
  const d = s.durationUntilReset;
  if (d) {
    if (d.seconds) duration += 1 + varintSize(d.seconds);
    if (d.nanos) duration += 1 + varintSize(d.nanos);
    total += 1 + varintSize(duration) + duration;
  }
  z[at] = limit;
  z[at + 1] = limitName;
  z[at + 2] = duration;
  z[at + 3] = total;
  return total;
}

/** Writes one header's sizes at `at` in the scratch; returns the header message's size. */
function headerSizes(h: WireHeader, z: Float64Array, at: number): number {
  const k = Buffer.byteLength(h.key ?? '');
  const v = Buffer.byteLength(h.value ?? '');
  let size = 0;
  if (k) size += 1 + varintSize(k) + k;
  if (v) size += 1 + varintSize(v) + v;
  z[at] = size;
  z[at + 1] = k;
  z[at + 2] = v;
  return size;
}

function fitsFastPath(res: WireRateLimitResponse): boolean {
  const r = res as WireRateLimitResponse & { quota?: unknown; rawBody?: unknown };
  if (r.dynamicMetadata != null || r.quota != null || r.rawBody != null) return false;
  const statuses = res.statuses;
  if (statuses == null) return true;
  for (let i = 0; i < statuses.length; i++) {
    const s = statuses[i]!;
    if ((s as { quota?: unknown }).quota != null) return false;
    const d = s.durationUntilReset;
    if (s.limitRemaining < 0 || (d && (d.seconds < 0 || (d.nanos ?? 0) < 0))) return false;
  }
  return true;
}

const NO_STATUSES: readonly WireDescriptorStatus[] = [];
const NO_HEADERS: readonly WireHeader[] = [];

/** The bytes of the gRPC message prefix (flag, 4-byte length) `encodeRateLimitResponse` can put first. */
export const GRPC_FRAME_PREFIX = 5;

/**
 * RateLimitResponse to bytes, or undefined when it carries what this encoder leaves to protobufjs
 * (dynamic metadata, quotas, raw body, negative numbers). With `framed`, the bytes are a whole gRPC
 * message frame: the 5-byte prefix (uncompressed, the message's length) and the message, in one Buffer.
 */
export function encodeRateLimitResponse(res: WireRateLimitResponse, framed = false): Buffer | undefined {
  if (!fitsFastPath(res)) return undefined;
  const statuses = res.statuses ?? NO_STATUSES;
  const responseHeaders = res.responseHeadersToAdd ?? NO_HEADERS;
  const requestHeaders = res.requestHeadersToAdd ?? NO_HEADERS;
  const slots =
    statuses.length * STATUS_SLOTS + (responseHeaders.length + requestHeaders.length) * HEADER_SLOTS;
  if (slots > scratch.sizes.length)
    scratch.sizes = new Float64Array(Math.max(slots, scratch.sizes.length * 2));
  const z = scratch.sizes;

  let total = 0;
  const overall = CODE_NUMBER[res.overallCode] ?? 0;
  if (overall !== 0) total += 1 + varintSize(overall);
  for (let i = 0; i < statuses.length; i++) {
    const size = statusSizes(statuses[i]!, z, i * STATUS_SLOTS);
    total += 1 + varintSize(size) + size;
  }
  const headersAt = statuses.length * STATUS_SLOTS;
  for (let i = 0; i < responseHeaders.length; i++) {
    const size = headerSizes(responseHeaders[i]!, z, headersAt + i * HEADER_SLOTS);
    total += 1 + varintSize(size) + size;
  }
  const requestHeadersAt = headersAt + responseHeaders.length * HEADER_SLOTS;
  for (let i = 0; i < requestHeaders.length; i++) {
    const size = headerSizes(requestHeaders[i]!, z, requestHeadersAt + i * HEADER_SLOTS);
    total += 1 + varintSize(size) + size;
  }

  const prefix = framed ? GRPC_FRAME_PREFIX : 0;
  const out = Buffer.allocUnsafe(prefix + total);
  if (framed) {
    out[0] = 0;
    out.writeUInt32BE(total, 1);
  }
  writer.buf = out;
  writer.pos = prefix;
  if (overall !== 0) {
    writeVarint(0x08);
    writeVarint(overall);
  }
  for (let i = 0; i < statuses.length; i++) {
    const s = statuses[i]!;
    const at = i * STATUS_SLOTS;
    writeVarint(0x12);
    writeVarint(z[at + 3]!);
    const code = CODE_NUMBER[s.code] ?? 0;
    if (code !== 0) {
      writeVarint(0x08);
      writeVarint(code);
    }
    const l = s.currentLimit;
    if (l) {
      writeVarint(0x12);
      writeVarint(z[at]!);
      if (l.requestsPerUnit) {
        writeVarint(0x08);
        writeVarint(l.requestsPerUnit);
      }
      const unit = RATELIMIT_UNIT_NUMBER[l.unit] ?? 0;
      if (unit !== 0) {
        writeVarint(0x10);
        writeVarint(unit);
      }
      if (l.name) {
        writeVarint(0x1a);
        writeString(l.name, z[at + 1]!);
      }
    }
    if (s.limitRemaining) {
      writeVarint(0x18);
      writeVarint(s.limitRemaining);
    }
    const d = s.durationUntilReset;
    if (d) {
      writeVarint(0x22);
      writeVarint(z[at + 2]!);
      if (d.seconds) {
        writeVarint(0x08);
        writeVarint(d.seconds);
      }
      if (d.nanos) {
        writeVarint(0x10);
        writeVarint(d.nanos);
      }
    }
  }
  writeHeaders(0x1a, responseHeaders, z, headersAt);
  writeHeaders(0x22, requestHeaders, z, requestHeadersAt);
  const written = writer.pos;
  // The module-level writer does not keep the response alive.
  writer.buf = EMPTY;
  if (written !== prefix + total) {
    throw new Error(`RateLimitResponse encoder size mismatch (${written - prefix} vs ${total})`);
  }
  return out;
}

const EMPTY = Buffer.alloc(0);

function writeHeaders(tag: number, headers: readonly WireHeader[], z: Float64Array, at: number): void {
  for (let i = 0; i < headers.length; i++) {
    const h = headers[i]!;
    const j = at + i * HEADER_SLOTS;
    const k = z[j + 1]!;
    const v = z[j + 2]!;
    writeVarint(tag);
    writeVarint(z[j]!);
    if (k) {
      writeVarint(0x0a);
      writeString(h.key, k);
    }
    if (v) {
      writeVarint(0x12);
      writeString(h.value, v);
    }
  }
}
