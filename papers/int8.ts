// Exact cosine search that reads a quarter of the bytes: a first pass over int8 codes of the rows (one scale per
// row), run by a small WebAssembly SIMD kernel, bounds every row's dot product; only the rows whose upper bound
// reaches the k-th best lower bound are re-scored in float32 with the full scan's own arithmetic (`dot`,
// `selectNearest` in knn.ts), so the answer is the full scan's, bit for bit. Why int8 and not binary codes or a
// plain float32 kernel: papers/docs/decisions/int8-first-pass.md.
//
// The bound. For a stored row x and the prepared query q (both float32), with int8 codes x̂ = sx·cx and
// q̂ = sq·cq and residuals rx = x - x̂, rq = q - q̂:
//   q·x = q̂·x̂ + q̂·rx + rq·x,   so   |q·x - q̂·x̂| ≤ |q̂|·|rx| + |rq|·|x| = e   (Cauchy–Schwarz, twice).
// q̂·x̂ = sq·sx·(cq·cx) with cq·cx an exact integer sum. A row can only be among the k best if
// q̂·x̂ + e ≥ T, T being the k-th largest q̂·x̂ - e; the rest are provably worse than k other rows.
import { type ExactIndex, type Hit, dot, selectNearest } from './knn.js';

/** Added to every bound (and e scaled by 1 + this) to cover float64 rounding in the scores, ~1e-13 at most. */
const SLACK = 1e-9;

/**
 * The kernel: scan(codes, query, out, rows, stride) writes, for each of `rows` rows of `stride` int8 codes
 * (stride a multiple of 16) starting at byte `codes`, the i32 dot product with the `stride` codes at `query`
 * into the i32 array at `out`. Hand-assembled; the text form is in the comments.
 */
function kernelBytes(memoryPages: number): Uint8Array<ArrayBuffer> {
  const u32 = (v: number): number[] => {
    const out: number[] = [];
    do {
      let b = v & 0x7f;
      v >>>= 7;
      if (v) b |= 0x80;
      out.push(b);
    } while (v);
    return out;
  };
  const str = (s: string) => [...u32(s.length), ...Buffer.from(s, 'utf8')];
  const section = (id: number, body: number[]) => [id, ...u32(body.length), ...body];
  const I32 = 0x7f;
  const simd = (op: number) => [0xfd, ...u32(op)];
  const get = (i: number) => [0x20, i];
  const set = (i: number) => [0x21, i];
  const tee = (i: number) => [0x22, i];
  const add = 0x6a;
  const ltU = 0x49;
  // params: 0 codes, 1 query, 2 out, 3 rows, 4 stride; locals: 5 row, 6 byte, 7 acc, 8 a, 9 b.
  const body = [
    ...[0x02, 0x02, I32, 0x03, 0x7b], // locals: 2 × i32, 3 × v128
    ...[0x02, 0x40], // block
    ...get(3),
    0x45,
    ...[0x0d, 0x00], // br_if 0 (no rows)
    ...[0x03, 0x40], // loop (rows)
    ...simd(0x0c),
    ...new Array<number>(16).fill(0), // v128.const 0
    ...set(7),
    ...[0x41, 0x00],
    ...set(6), // byte = 0
    ...[0x03, 0x40], // loop (16 codes at a time)
    ...get(0),
    ...get(6),
    add,
    ...simd(0x00),
    0x00,
    0x00, // v128.load
    ...set(8),
    ...get(1),
    ...get(6),
    add,
    ...simd(0x00),
    0x00,
    0x00,
    ...set(9),
    ...get(7),
    ...get(8),
    ...simd(0x87), // i16x8.extend_low_i8x16_s
    ...get(9),
    ...simd(0x87),
    ...simd(0xba), // i32x4.dot_i16x8_s
    ...simd(0xae), // i32x4.add
    ...get(8),
    ...simd(0x88), // i16x8.extend_high_i8x16_s
    ...get(9),
    ...simd(0x88),
    ...simd(0xba),
    ...simd(0xae),
    ...set(7),
    ...get(6),
    ...[0x41, 0x10],
    add,
    ...tee(6), // byte += 16
    ...get(4),
    ltU,
    ...[0x0d, 0x00], // br_if (byte < stride)
    0x0b, // end loop
    ...get(2), // out address
    ...get(7),
    ...simd(0x1b),
    0x00, // i32x4.extract_lane 0
    ...get(7),
    ...simd(0x1b),
    0x01,
    add,
    ...get(7),
    ...simd(0x1b),
    0x02,
    add,
    ...get(7),
    ...simd(0x1b),
    0x03,
    add,
    ...[0x36, 0x02, 0x00], // i32.store
    ...get(2),
    ...[0x41, 0x04],
    add,
    ...set(2), // out += 4
    ...get(0),
    ...get(4),
    add,
    ...set(0), // codes += stride
    ...get(5),
    ...[0x41, 0x01],
    add,
    ...tee(5),
    ...get(3),
    ltU,
    ...[0x0d, 0x00], // br_if (row < rows)
    0x0b, // end loop
    0x0b, // end block
    0x0b, // end function
  ];
  return new Uint8Array([
    ...[0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00],
    ...section(1, [0x01, 0x60, 0x05, I32, I32, I32, I32, I32, 0x00]),
    ...section(2, [0x01, ...str('env'), ...str('memory'), 0x02, 0x00, ...u32(memoryPages)]),
    ...section(3, [0x01, 0x00]),
    ...section(7, [0x01, ...str('scan'), 0x00, 0x00]),
    ...section(10, [0x01, ...u32(body.length), ...body]),
  ]);
}

type Scan = (codes: number, query: number, out: number, rows: number, stride: number) => void;

/** A cosine ExactIndex with an int8 first pass; `search` returns exactly what `exact.search` returns. */
export class Int8Index {
  readonly size: number;
  readonly dim: number;
  /** Bytes per row of codes: dim rounded up to 16 (the kernel reads 16 at a time; the padding is zeros). */
  readonly stride: number;
  /** Bytes held besides the float32 rows: codes, per-row numbers and scratch. */
  readonly bytes: number;
  private readonly scan: Scan;
  private readonly codes: Int8Array;
  private readonly queryCodes: Int8Array;
  private readonly queryOffset: number;
  private readonly outOffset: number;
  private readonly dots: Int32Array;
  /** Per row: the code scale sx, |rx| and |x|. */
  private readonly scale: Float64Array;
  private readonly residual: Float64Array;
  private readonly norm: Float64Array;
  /** Scratch for one search: each row's approximate score q̂·x̂ and its error bound e. */
  private readonly approx: Float64Array;
  private readonly err: Float64Array;
  /** Rows with a value the codes cannot bound (not finite): the full scan answers. */
  private readonly unbounded: boolean;
  /** Candidates of the last search (for the benchmark and tests). */
  lastCandidates = 0;

  /**
   * @param fullScanAt a search for k ≥ this fraction of the rows runs the full scan instead (same answer): with
   *   that many results almost every row is a candidate, and the first pass would only add to the scan.
   */
  constructor(
    readonly exact: ExactIndex,
    readonly fullScanAt = 0.25,
  ) {
    if (exact.metric !== 'cosine') throw new Error('Int8Index is for cosine indexes');
    const n = (this.size = exact.size);
    const dim = (this.dim = exact.dim);
    const stride = (this.stride = Math.max(16, Math.ceil(dim / 16) * 16));
    this.queryOffset = n * stride;
    this.outOffset = this.queryOffset + stride;
    const pages = Math.ceil((this.outOffset + 4 * n) / 65536) || 1;
    const memory = new WebAssembly.Memory({ initial: pages, maximum: pages });
    const module = new WebAssembly.Module(kernelBytes(pages));
    this.scan = new WebAssembly.Instance(module, { env: { memory } }).exports.scan as Scan;
    this.codes = new Int8Array(memory.buffer, 0, n * stride);
    this.queryCodes = new Int8Array(memory.buffer, this.queryOffset, stride);
    this.dots = new Int32Array(memory.buffer, this.outOffset, n);
    this.scale = new Float64Array(n);
    this.residual = new Float64Array(n);
    this.norm = new Float64Array(n);
    this.approx = new Float64Array(n);
    this.err = new Float64Array(n);
    this.bytes = pages * 65536 + 5 * 8 * n;
    const { data } = exact;
    let unbounded = false;
    for (let i = 0; i < n; i++) {
      const off = i * dim;
      let max = 0;
      for (let d = 0; d < dim; d++) {
        const a = Math.abs(data[off + d]);
        if (a > max) max = a;
        else if (!(a <= max)) unbounded = true; // NaN
      }
      if (!Number.isFinite(max)) unbounded = true;
      const s = max / 127;
      // Any code in -127..127 is sound (the bound uses the actual residual); x·(127/max) rounds to one.
      const inv = s > 0 ? 127 / max : 0;
      const codes = this.codes;
      const base = i * stride;
      let r2 = 0;
      let x2 = 0;
      for (let d = 0; d < dim; d++) {
        const x = data[off + d];
        const c = Math.round(x * inv);
        codes[base + d] = c;
        const r = x - c * s;
        r2 += r * r;
        x2 += x * x;
      }
      this.scale[i] = s;
      this.residual[i] = Math.sqrt(r2);
      this.norm[i] = Math.sqrt(x2);
    }
    this.unbounded = unbounded;
  }

  /** The k nearest rows to `query`, nearest first (ties by row index), without the rows in `exclude`. */
  search(query: ArrayLike<number>, k: number, exclude?: ReadonlySet<number>): Hit[] {
    const { exact, size: n, dim, stride, scale, residual, norm, approx, err, dots, queryCodes } = this;
    const q = exact.prepareQuery(query);
    k = exact.clampK(k, exclude);
    if (k === 0) return [];
    if (k >= this.fullScanAt * n) {
      this.lastCandidates = n;
      return exact.search(query, k, exclude);
    }
    // Quantise the query the same way as the rows.
    let max = 0;
    for (let d = 0; d < dim; d++) max = Math.max(max, Math.abs(q[d]));
    if (this.unbounded || !Number.isFinite(max)) return exact.search(query, k, exclude);
    const sq = max / 127;
    let qh2 = 0;
    let rq2 = 0;
    for (let d = 0; d < dim; d++) {
      const c = sq > 0 ? Math.round(q[d] / sq) : 0;
      queryCodes[d] = c;
      qh2 += c * sq * (c * sq);
      const r = q[d] - c * sq;
      rq2 += r * r;
    }
    const qh = Math.sqrt(qh2) * (1 + SLACK);
    const rq = Math.sqrt(rq2) * (1 + SLACK);
    this.scan(0, this.queryOffset, this.outOffset, n, stride);

    // T: the k-th largest lower bound, by a min-heap of the k largest.
    const heap = new Float64Array(k);
    let size = 0;
    for (let i = 0; i < n; i++) {
      const a = sq * scale[i] * dots[i];
      const e = qh * residual[i] + rq * norm[i] + SLACK;
      approx[i] = a;
      err[i] = e;
      if (exclude?.has(i)) continue;
      const lo = a - e;
      if (size < k) {
        let c = size++;
        heap[c] = lo;
        while (c > 0) {
          const p = (c - 1) >> 1;
          if (heap[p] <= heap[c]) break;
          const t = heap[p];
          heap[p] = heap[c];
          heap[c] = t;
          c = p;
        }
      } else if (lo > heap[0]) {
        heap[0] = lo;
        let p = 0;
        while (true) {
          const l = 2 * p + 1;
          const r = l + 1;
          let m = p;
          if (l < size && heap[l] < heap[m]) m = l;
          if (r < size && heap[r] < heap[m]) m = r;
          if (m === p) break;
          const t = heap[p];
          heap[p] = heap[m];
          heap[m] = t;
          p = m;
        }
      }
    }
    const threshold = heap[0];

    // Candidates, re-scored exactly as the full scan scores them.
    let m = 0;
    for (let i = 0; i < n; i++) if (approx[i] + err[i] >= threshold && !exclude?.has(i)) m++;
    const rows = new Int32Array(m);
    const keys = new Float64Array(m);
    const { data } = exact;
    m = 0;
    for (let i = 0; i < n; i++) {
      if (approx[i] + err[i] >= threshold && !exclude?.has(i)) {
        rows[m] = i;
        keys[m++] = 1 - dot(data, i * dim, q, dim);
      }
    }
    this.lastCandidates = m;
    return selectNearest(keys, rows, m, k, undefined, true);
  }
}
