// The HPACK Huffman code (RFC 7541 Appendix B) and its decoder, for the header blocks of our own HTTP/2
// layer. The code is canonical (within one length, codes count up in symbol order; shorter codes come
// first), so the 257 code lengths determine every code: the table below is those lengths, and the codes
// are derived from them once at module load. hpack.test.ts checks a sample of the derived codes against
// Appendix B and decodes the RFC's own examples and nghttp2's output.
//
// Decoding walks a finite-state machine four bits at a time: a state is an internal node of the code
// tree (256 of them), and a 256x16 table says, for a state and the next nibble, which state follows,
// which symbol (if any) was completed on the way (at most one: the shortest code is 5 bits), whether
// the EOS symbol was met, and whether the string may end there (RFC 7541 5.2: the padding is a prefix
// of EOS, so all ones, and shorter than 8 bits). Two table reads per input byte, no allocation.

/** Code length in bits of each symbol 0..255, then EOS (256): RFC 7541 Appendix B. */
// prettier-ignore
export const HUFFMAN_CODE_LENGTHS: readonly number[] = [
  13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, // 0x00
  28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28, // 0x10
  6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, // 0x20
  5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10, // 0x30
  13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, // 0x40
  7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, // 0x50
  15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5, // 0x60
  6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, // 0x70
  20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23, // 0x80
  24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, // 0x90
  22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, // 0xa0
  21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23, // 0xb0
  26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, // 0xc0
  19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, // 0xd0
  20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23, // 0xe0
  26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, // 0xf0
  30, // EOS
];

const EOS = 256;

/** The code of each symbol (right-aligned in its length), derived canonically from HUFFMAN_CODE_LENGTHS. */
export const HUFFMAN_CODES: Uint32Array = deriveCodes(HUFFMAN_CODE_LENGTHS);

function deriveCodes(lengths: readonly number[]): Uint32Array {
  const order = lengths.map((_, sym) => sym).sort((a, b) => lengths[a] - lengths[b] || a - b);
  const codes = new Uint32Array(lengths.length);
  let code = 0;
  for (let i = 0; i < order.length; i++) {
    if (i > 0) code = (code + 1) * 2 ** (lengths[order[i]] - lengths[order[i - 1]]);
    codes[order[i]] = code;
  }
  return codes;
}

// FSM entry layout: bits 0-7 next state, bit 8 a symbol was completed, bits 9-16 that symbol,
// bit 17 the EOS symbol was met (an error), bit 18 the string may end in the next state.
const EMITS = 1 << 8;
const FAILS = 1 << 17;
const ACCEPTS = 1 << 18;

const FSM: Uint32Array = buildFsm();

function buildFsm(): Uint32Array {
  // The code tree: node 0 is the root; a child >= 0 is an internal node, a child < 0 is the leaf -(sym + 1).
  const child0: number[] = [-1];
  const child1: number[] = [-1];
  const onesPath: boolean[] = [true]; // reached from the root by 1-bits only
  const depth: number[] = [0];
  for (let sym = 0; sym <= EOS; sym++) {
    const len = HUFFMAN_CODE_LENGTHS[sym];
    let node = 0;
    for (let i = len - 1; i >= 0; i--) {
      const bit = Math.floor(HUFFMAN_CODES[sym] / 2 ** i) & 1;
      const kids = bit ? child1 : child0;
      if (i === 0) {
        kids[node] = -(sym + 1);
      } else {
        if (kids[node] === -1) {
          kids[node] = child0.length;
          child0.push(-1);
          child1.push(-1);
          onesPath.push(onesPath[node] && bit === 1);
          depth.push(depth[node] + 1);
        }
        node = kids[node];
      }
    }
  }
  if (child0.length !== 256)
    throw new Error(`HPACK Huffman tree has ${child0.length} internal nodes, not 256`);
  const fsm = new Uint32Array(256 * 16);
  for (let state = 0; state < 256; state++) {
    for (let nibble = 0; nibble < 16; nibble++) {
      let node = state;
      let entry = 0;
      for (let i = 3; i >= 0; i--) {
        const next = (nibble >> i) & 1 ? child1[node] : child0[node];
        if (next >= 0) {
          node = next;
          continue;
        }
        const sym = -next - 1;
        if (sym === EOS) {
          entry = FAILS;
          break;
        }
        entry = EMITS | (sym << 9);
        node = 0;
      }
      if (entry !== FAILS) {
        entry |= node;
        if (onesPath[node] && depth[node] <= 7) entry |= ACCEPTS;
      }
      fsm[(state << 4) | nibble] = entry;
    }
  }
  return fsm;
}

/** huffmanDecode's result when the string holds the EOS symbol. */
export const HUFFMAN_EOS = -1;
/** huffmanDecode's result when the padding is 8 bits or more, or not all ones. */
export const HUFFMAN_BAD_PADDING = -2;

/**
 * Decodes the Huffman-coded string src[start, end) into dst from dstAt on, and returns the number of
 * bytes written, or HUFFMAN_EOS / HUFFMAN_BAD_PADDING. The caller gives dst room for
 * ceil((end - start) * 8 / 5) bytes (the most that many bits can hold with 5-bit codes).
 */
export function huffmanDecode(
  src: Uint8Array,
  start: number,
  end: number,
  dst: Uint8Array,
  dstAt: number,
): number {
  let state = 0;
  let entry = ACCEPTS; // an empty string is a valid one
  let o = dstAt;
  for (let i = start; i < end; i++) {
    const b = src[i];
    entry = FSM[(state << 4) | (b >> 4)];
    if (entry & FAILS) return HUFFMAN_EOS;
    if (entry & EMITS) dst[o++] = (entry >> 9) & 0xff;
    state = entry & 0xff;
    entry = FSM[(state << 4) | (b & 0xf)];
    if (entry & FAILS) return HUFFMAN_EOS;
    if (entry & EMITS) dst[o++] = (entry >> 9) & 0xff;
    state = entry & 0xff;
  }
  return entry & ACCEPTS ? o - dstAt : HUFFMAN_BAD_PADDING;
}
