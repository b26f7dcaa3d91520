// HPACK (RFC 7541) for our own HTTP/2 layer under the gRPC listener: a decoder for the request header
// blocks and an encoder for response headers and trailers. node:http2 did this in nghttp2; doing it here
// keeps a request's header strings ordinary young-generation JS strings.
//
// The decoder runs once per gRPC call, so it allocates the result array and the strings it must create
// (literals), and nothing per field otherwise: static and dynamic table hits return the stored strings,
// Huffman strings are decoded into a shared scratch buffer and sliced from it once, and the cursor lives
// on the decoder instead of in returned objects. Every coding error is an HpackError, which the
// connection answers with COMPRESSION_ERROR. The encoder never indexes, so the decoder on the other side
// keeps an empty dynamic table and its size never matters to us.
import { HUFFMAN_EOS, huffmanDecode } from './huffman.js';

/** A header block that cannot be decoded: the connection must end with COMPRESSION_ERROR (RFC 9113 4.3). */
export class HpackError extends Error {
  override name = 'HpackError';
}

// RFC 7541 Appendix A; index 0 is unused.
// prettier-ignore
const STATIC: readonly (readonly [string, string])[] = [
  ['', ''],
  [':authority', ''], [':method', 'GET'], [':method', 'POST'], [':path', '/'], [':path', '/index.html'],
  [':scheme', 'http'], [':scheme', 'https'], [':status', '200'], [':status', '204'], [':status', '206'],
  [':status', '304'], [':status', '400'], [':status', '404'], [':status', '500'], ['accept-charset', ''],
  ['accept-encoding', 'gzip, deflate'], ['accept-language', ''], ['accept-ranges', ''], ['accept', ''],
  ['access-control-allow-origin', ''], ['age', ''], ['allow', ''], ['authorization', ''], ['cache-control', ''],
  ['content-disposition', ''], ['content-encoding', ''], ['content-language', ''], ['content-length', ''],
  ['content-location', ''], ['content-range', ''], ['content-type', ''], ['cookie', ''], ['date', ''],
  ['etag', ''], ['expect', ''], ['expires', ''], ['from', ''], ['host', ''], ['if-match', ''],
  ['if-modified-since', ''], ['if-none-match', ''], ['if-range', ''], ['if-unmodified-since', ''],
  ['last-modified', ''], ['link', ''], ['location', ''], ['max-forwards', ''], ['proxy-authenticate', ''],
  ['proxy-authorization', ''], ['range', ''], ['referer', ''], ['refresh', ''], ['retry-after', ''],
  ['server', ''], ['set-cookie', ''], ['strict-transport-security', ''], ['transfer-encoding', ''],
  ['user-agent', ''], ['vary', ''], ['via', ''], ['www-authenticate', ''],
];
const STATIC_LAST = STATIC.length - 1; // 61
const STATIC_NAMES: readonly string[] = STATIC.map((e) => e[0]);
const STATIC_VALUES: readonly string[] = STATIC.map((e) => e[1]);
/** The first static index of each name, for the encoder. */
const STATIC_NAME_INDEX = new Map<string, number>();
for (let i = STATIC_LAST; i >= 1; i--) STATIC_NAME_INDEX.set(STATIC_NAMES[i], i);

/** Integers (indexes, lengths, sizes) past this are a coding error: nothing legitimate comes near it. */
const MAX_INT = 0x7fffffff;
const ENTRY_OVERHEAD = 32; // RFC 7541 4.1
const DEFAULT_TABLE_SIZE = 4096;

// Buffer's latin1 slice without toString's argument handling; it copies into an ordinary one-byte string.
type Latin1Buffer = Buffer & {
  latin1Slice(start: number, end: number): string;
  latin1Write(s: string, offset: number, length: number): number;
};

// Huffman output goes here (one decode at a time: decode is synchronous). Sized for the worst case of a
// block, 8/5 output bytes per input byte; kept up to SCRATCH_KEEP bytes, larger ones are per block.
const SCRATCH_KEEP = 64 * 1024;
let scratch = Buffer.allocUnsafeSlow(4096) as Latin1Buffer;

export class HpackDecoder {
  private readonly maxTableSize: number;
  /** The dynamic table's current maximum size: maxTableSize until the peer's encoder lowers it. */
  private limit: number;
  private size = 0;
  // The dynamic table as a ring buffer: the newest entry (index 62) is at `head`, older ones before it.
  private names: string[] = new Array<string>(16).fill('');
  private values: string[] = new Array<string>(16).fill('');
  private head = 0;
  private count = 0;
  // The cursor and the last string read (see literal()).
  private p = 0;
  private end = 0;
  private strBuf: Latin1Buffer = scratch;
  private strAt = 0;
  /** The decoded size of the last block (names, values and 32 bytes a field), as SETTINGS_MAX_HEADER_LIST_SIZE counts. */
  listSize = 0;

  /** maxTableSize: the SETTINGS_HEADER_TABLE_SIZE we announce (default 4096); a dynamic table size update above it is an HpackError. */
  constructor(maxTableSize: number = DEFAULT_TABLE_SIZE) {
    if (!Number.isInteger(maxTableSize) || maxTableSize < 0 || maxTableSize > MAX_INT)
      throw new RangeError(`HPACK table size must be an integer in [0, ${MAX_INT}], got ${maxTableSize}`);
    this.maxTableSize = maxTableSize;
    this.limit = maxTableSize;
  }

  /**
   * Decodes one complete header block (a HEADERS payload plus its CONTINUATION payloads, joined, padding and
   * priority fields already removed). Returns the fields as one flat array [name0, value0, name1, value1, ...] in
   * block order, or null when the decoded list passes maxListSize (sum of name.length + value.length + 32 per field,
   * RFC 9113 SETTINGS_MAX_HEADER_LIST_SIZE): then the block is still decoded to its end so that the dynamic table
   * stays in step with the peer's encoder, but no more strings are kept past the bound (no unbounded allocation).
   * Throws HpackError on every coding error: index 0 or past the tables, integer overflow, string length past the
   * end of the block, Huffman errors (EOS symbol inside a string, padding longer than 7 bits or not all ones), a
   * table size update above maxTableSize or not at the start of the block.
   */
  decode(block: Uint8Array, maxListSize: number): string[] | null {
    const buf = (
      Buffer.isBuffer(block) ? block : Buffer.from(block.buffer, block.byteOffset, block.byteLength)
    ) as Latin1Buffer;
    const need = Math.ceil((block.length * 8) / 5);
    const scr =
      need <= scratch.length
        ? scratch
        : need <= SCRATCH_KEEP
          ? (scratch = Buffer.allocUnsafeSlow(SCRATCH_KEEP) as Latin1Buffer)
          : (Buffer.allocUnsafeSlow(need) as Latin1Buffer);
    this.p = 0;
    this.end = block.length;
    let out: string[] = [];
    let listSize = 0;
    let over = false;
    let fieldSeen = false;
    while (this.p < this.end) {
      const b = buf[this.p];
      if (b & 0x80) {
        // Indexed field (6.1).
        const index = this.integer(buf, 0x7f);
        if (index === 0) throw new HpackError('HPACK indexed field with index 0');
        const name = this.nameAt(index);
        const value = index <= STATIC_LAST ? STATIC_VALUES[index] : this.values[this.slot(index)];
        fieldSeen = true;
        if (over) continue;
        listSize += name.length + value.length + ENTRY_OVERHEAD;
        if (listSize > maxListSize) {
          over = true;
          out = [];
        } else out.push(name, value);
        continue;
      }
      if ((b & 0xe0) === 0x20) {
        // Dynamic table size update (6.3): only before the first field of a block (4.2).
        if (fieldSeen) throw new HpackError('HPACK dynamic table size update after a header field');
        const size = this.integer(buf, 0x1f);
        if (size > this.maxTableSize)
          throw new HpackError(
            `HPACK dynamic table size update to ${size}, above the ${this.maxTableSize} allowed`,
          );
        this.limit = size;
        this.evictTo(size);
        continue;
      }
      // Literal field (6.2): with incremental indexing (01), without indexing (0000) or never indexed (0001).
      const indexing = (b & 0xc0) === 0x40;
      const nameIndex = this.integer(buf, indexing ? 0x3f : 0x0f);
      fieldSeen = true;
      let name: string | null = null;
      let nameBuf = buf;
      let nameAt = 0;
      let nameLen: number;
      if (nameIndex !== 0) {
        name = this.nameAt(nameIndex);
        nameLen = name.length;
      } else {
        nameLen = this.literal(buf, scr, 0);
        nameBuf = this.strBuf;
        nameAt = this.strAt;
      }
      // A Huffman value goes after a Huffman name in the scratch buffer.
      const valueLen = this.literal(buf, scr, nameBuf === scr ? nameLen : 0);
      const entrySize = nameLen + valueLen + ENTRY_OVERHEAD;
      let keep = false;
      if (!over) {
        listSize += entrySize;
        if (listSize > maxListSize) {
          over = true;
          out = [];
        } else keep = true;
      }
      if (!keep && !(indexing && entrySize <= this.limit)) {
        if (indexing) this.clear(); // 4.4: an entry larger than the table empties it and is not added
        continue;
      }
      if (name === null) name = nameBuf.latin1Slice(nameAt, nameAt + nameLen);
      const value = this.strBuf.latin1Slice(this.strAt, this.strAt + valueLen);
      if (indexing) {
        if (entrySize <= this.limit) this.add(name, value, entrySize);
        else this.clear();
      }
      if (keep) out.push(name, value);
    }
    this.strBuf = scratch; // not the caller's block: it is not ours to keep alive
    this.listSize = listSize;
    return over ? null : out;
  }

  /** Reads an integer with an N-bit prefix (5.1); mask is 2^N - 1. */
  private integer(buf: Uint8Array, mask: number): number {
    let value = buf[this.p++] & mask;
    if (value < mask) return value;
    let shift = 0;
    for (;;) {
      if (this.p >= this.end) throw new HpackError('HPACK integer runs past the end of the block');
      const b = buf[this.p++];
      value += (b & 0x7f) * (1 << shift);
      if ((b & 0x80) === 0) break;
      shift += 7;
      if (shift > 28) throw new HpackError('HPACK integer too long');
    }
    if (value > MAX_INT) throw new HpackError('HPACK integer too large');
    return value;
  }

  /**
   * Reads a string literal (5.2) and returns its decoded length; its bytes are then strBuf[strAt, strAt + length):
   * in the block itself when raw, in scr from `at` on when Huffman-coded.
   */
  private literal(buf: Latin1Buffer, scr: Latin1Buffer, at: number): number {
    if (this.p >= this.end) throw new HpackError('HPACK string missing at the end of the block');
    const huffman = buf[this.p] & 0x80;
    const length = this.integer(buf, 0x7f);
    const start = this.p;
    if (length > this.end - start) throw new HpackError('HPACK string length runs past the end of the block');
    this.p = start + length;
    if (!huffman) {
      this.strBuf = buf;
      this.strAt = start;
      return length;
    }
    const n = huffmanDecode(buf, start, start + length, scr, at);
    if (n < 0)
      throw new HpackError(
        n === HUFFMAN_EOS
          ? 'HPACK Huffman string holds the EOS symbol'
          : 'HPACK Huffman string has invalid padding',
      );
    this.strBuf = scr;
    this.strAt = at;
    return n;
  }

  private nameAt(index: number): string {
    if (index <= STATIC_LAST) return STATIC_NAMES[index];
    return this.names[this.slot(index)];
  }

  /** The ring-buffer slot of dynamic index `index` (62 = newest); an HpackError past the table. */
  private slot(index: number): number {
    const age = index - STATIC_LAST - 1;
    if (age >= this.count)
      throw new HpackError(`HPACK index ${index} past the tables (${STATIC_LAST + this.count})`);
    const cap = this.names.length;
    return (this.head - age + cap) % cap;
  }

  private add(name: string, value: string, entrySize: number): void {
    this.evictTo(this.limit - entrySize);
    let cap = this.names.length;
    if (this.count === cap) {
      // Grow, laying the entries out again oldest first from slot 0.
      const names = new Array<string>(cap * 2).fill('');
      const values = new Array<string>(cap * 2).fill('');
      for (let i = 0; i < cap; i++) {
        const from = (this.head + 1 + i) % cap;
        names[i] = this.names[from];
        values[i] = this.values[from];
      }
      this.names = names;
      this.values = values;
      this.head = cap - 1;
      cap *= 2;
    }
    this.head = (this.head + 1) % cap;
    this.names[this.head] = name;
    this.values[this.head] = value;
    this.count++;
    this.size += entrySize;
  }

  /** Evicts the oldest entries until the table's size is at most `size` (4.3, 4.4). */
  private evictTo(size: number): void {
    const cap = this.names.length;
    while (this.size > size && this.count > 0) {
      const oldest = (this.head - this.count + 1 + cap) % cap;
      this.size -= this.names[oldest].length + this.values[oldest].length + ENTRY_OVERHEAD;
      this.names[oldest] = '';
      this.values[oldest] = '';
      this.count--;
    }
  }

  private clear(): void {
    this.evictTo(0);
  }
}

/** Bytes of an integer with an N-bit prefix; mask is 2^N - 1. */
function integerLength(value: number, mask: number): number {
  if (value < mask) return 1;
  let n = 2;
  for (let v = value - mask; v >= 0x80; v = Math.floor(v / 0x80)) n++;
  return n;
}

function writeInteger(out: Uint8Array, at: number, value: number, mask: number, first: number): number {
  if (value < mask) {
    out[at++] = first | value;
    return at;
  }
  out[at++] = first | mask;
  let v = value - mask;
  while (v >= 0x80) {
    out[at++] = (v & 0x7f) | 0x80;
    v = Math.floor(v / 0x80);
  }
  out[at++] = v;
  return at;
}

function fieldLength(name: string, value: string): number {
  const index = STATIC_NAME_INDEX.get(name);
  const nameBytes =
    index !== undefined ? integerLength(index, 0x0f) : 1 + integerLength(name.length, 0x7f) + name.length;
  return nameBytes + integerLength(value.length, 0x7f) + value.length;
}

function writeField(out: Latin1Buffer, at: number, name: string, value: string): number {
  const index = STATIC_NAME_INDEX.get(name);
  if (index !== undefined) at = writeInteger(out, at, index, 0x0f, 0x00);
  else {
    out[at++] = 0x00;
    at = writeInteger(out, at, name.length, 0x7f, 0x00);
    at += out.latin1Write(name, at, name.length);
  }
  at = writeInteger(out, at, value.length, 0x7f, 0x00);
  return at + out.latin1Write(value, at, value.length);
}

/**
 * Encodes response fields as one header block: ':status' first when present, then the rest in object order; every
 * field a literal without indexing (a name from the static table by index when it is there, else a literal name),
 * no Huffman. Never adds to a dynamic table, so the peer's SETTINGS_HEADER_TABLE_SIZE never matters.
 * Numbers are written as their decimal string. Names are written as given (callers pass lower-case).
 */
export function encodeHeaders(headers: Readonly<Record<string, string | number>>): Buffer {
  const status = headers[':status'];
  const statusText = status === undefined ? undefined : String(status);
  let length = statusText === undefined ? 0 : fieldLength(':status', statusText);
  for (const name in headers) {
    if (name !== ':status') length += fieldLength(name, String(headers[name]));
  }
  const out = Buffer.allocUnsafe(length) as Latin1Buffer;
  let at = statusText === undefined ? 0 : writeField(out, 0, ':status', statusText);
  for (const name in headers) {
    if (name !== ':status') at = writeField(out, at, name, String(headers[name]));
  }
  return out;
}
