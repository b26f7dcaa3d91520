// Exact nearest-neighbour index: one contiguous Float32Array scanned linearly, with a bounded max-heap for
// the top k. `cosine` (used for the full nD vectors) stores L2-normalised rows, so a distance is 1 - dot;
// `euclidean` (used for the 2-D projections) is the plain Euclidean distance.

export type Metric = 'cosine' | 'euclidean';

export interface Hit {
  index: number;
  distance: number;
}

export class ExactIndex {
  readonly data: Float32Array;
  /** Euclidean only: the diagonal of the points' bounding box, to map distances into a 0..1 similarity. */
  readonly extent: number;

  constructor(
    rows: ArrayLike<ArrayLike<number>>,
    readonly dim: number,
    readonly metric: Metric,
  ) {
    const n = rows.length;
    // Shared, so a search worker can read the rows without a copy.
    this.data = new Float32Array(new SharedArrayBuffer(n * dim * 4));
    for (let i = 0; i < n; i++) {
      const r = rows[i];
      if (r.length !== dim) throw new Error(`row ${i} has ${r.length} values, expected ${dim}`);
      let s = 0;
      for (let d = 0; d < dim; d++) s += r[d] * r[d];
      const k = metric === 'cosine' && s > 0 ? 1 / Math.sqrt(s) : 1;
      for (let d = 0; d < dim; d++) this.data[i * dim + d] = r[d] * k;
    }
    let extent = 1;
    if (metric === 'euclidean' && n > 0) {
      let sq = 0;
      for (let d = 0; d < dim; d++) {
        let lo = Infinity;
        let hi = -Infinity;
        for (let i = 0; i < n; i++) {
          const x = this.data[i * dim + d];
          if (x < lo) lo = x;
          if (x > hi) hi = x;
        }
        sq += (hi - lo) ** 2;
      }
      extent = Math.sqrt(sq) || 1;
    }
    this.extent = extent;
  }

  get size(): number {
    return this.data.length / this.dim;
  }

  /** Similarity in 0..1: (1 + cos) / 2 for cosine, 1 - distance / extent for euclidean. */
  similarity(distance: number): number {
    const s = this.metric === 'cosine' ? 1 - distance / 2 : 1 - distance / this.extent;
    return Math.min(1, Math.max(0, s));
  }

  /**
   * The query as the scan uses it: a Float32Array, L2-normalised for cosine. Every search path (the full scan
   * here and the int8 first pass in `int8.ts`) computes keys against this same vector with `dot`, so their
   * keys are bit-identical.
   */
  prepareQuery(query: ArrayLike<number>): Float32Array {
    const { dim } = this;
    if (query.length !== dim) throw new Error(`query has ${query.length} values, expected ${dim}`);
    const q = new Float32Array(dim);
    let qs = 0;
    for (let d = 0; d < dim; d++) qs += query[d] * query[d];
    const qk = this.metric === 'cosine' && qs > 0 ? 1 / Math.sqrt(qs) : 1;
    for (let d = 0; d < dim; d++) q[d] = query[d] * qk;
    return q;
  }

  /** How many hits a search for k returns: k, capped by the rows left after the exclusions. */
  clampK(k: number, exclude?: ReadonlySet<number>): number {
    return Math.max(0, Math.min(k, this.size - (exclude?.size ?? 0)));
  }

  /**
   * The k nearest rows to `query`, nearest first (ties by row index), leaving out the rows in `exclude`: the
   * full scan, reading every row.
   */
  search(query: ArrayLike<number>, k: number, exclude?: ReadonlySet<number>): Hit[] {
    const { dim, data } = this;
    const n = this.size;
    const q = this.prepareQuery(query);
    k = this.clampK(k, exclude);
    if (k === 0) return [];
    const cosine = this.metric === 'cosine';
    // Pass 1: every key, in a small monomorphic loop V8 optimises well. Pass 2: heap selection.
    const keys = new Float64Array(n);
    if (cosine) for (let i = 0; i < n; i++) keys[i] = 1 - dot(data, i * dim, q, dim);
    else for (let i = 0; i < n; i++) keys[i] = squaredDistance(data, i * dim, q, dim);
    return selectNearest(keys, undefined, n, k, exclude, cosine);
  }

  /** An index over rows already laid out and normalised by another ExactIndex (e.g. in a worker thread). */
  static fromData(data: Float32Array, dim: number, metric: Metric, extent: number): ExactIndex {
    const index = Object.create(ExactIndex.prototype) as ExactIndex;
    Object.assign(index, { data, dim, metric, extent });
    return index;
  }
}

/**
 * Heap selection of the k smallest (key, row) pairs, then sorted nearest first (ties by row index). `rows`
 * names the row of each key (ascending); without it key j is row j. The order is total, so the result does not
 * depend on which rows are offered, only on the k best of them.
 */
export function selectNearest(
  keys: Float64Array,
  rows: Int32Array | undefined,
  count: number,
  k: number,
  exclude: ReadonlySet<number> | undefined,
  cosine: boolean,
): Hit[] {
  // Max-heap on (key, index) of the best k so far; key is 1 - dot or the squared distance.
  const hk = new Float64Array(k);
  const hi = new Int32Array(k);
  let size = 0;
  const worse = (a: number, b: number) => hk[a] > hk[b] || (hk[a] === hk[b] && hi[a] > hi[b]);
  const swap = (a: number, b: number) => {
    const t = hk[a];
    hk[a] = hk[b];
    hk[b] = t;
    const u = hi[a];
    hi[a] = hi[b];
    hi[b] = u;
  };
  for (let j = 0; j < count; j++) {
    const i = rows ? rows[j] : j;
    if (exclude?.has(i)) continue;
    const key = keys[j];
    if (size < k) {
      // Sift up.
      let c = size++;
      hk[c] = key;
      hi[c] = i;
      while (c > 0) {
        const p = (c - 1) >> 1;
        if (!worse(c, p)) break;
        swap(c, p);
        c = p;
      }
    } else if (key < hk[0]) {
      hk[0] = key;
      hi[0] = i;
      // Sift down.
      let p = 0;
      while (true) {
        const l = 2 * p + 1;
        const r = l + 1;
        let m = p;
        if (l < size && worse(l, m)) m = l;
        if (r < size && worse(r, m)) m = r;
        if (m === p) break;
        swap(p, m);
        p = m;
      }
    }
  }
  const out: Hit[] = [];
  for (let j = 0; j < size; j++) {
    const key = hk[j];
    out.push({ index: hi[j], distance: cosine ? Math.max(0, key) : Math.sqrt(key) });
  }
  return out.sort((a, b) => a.distance - b.distance || a.index - b.index);
}

/** The dot product both search paths use (four accumulators, summed in this order). */
export function dot(a: Float32Array, off: number, b: Float32Array, dim: number): number {
  let s0 = 0;
  let s1 = 0;
  let s2 = 0;
  let s3 = 0;
  let d = 0;
  for (; d + 3 < dim; d += 4) {
    s0 += a[off + d] * b[d];
    s1 += a[off + d + 1] * b[d + 1];
    s2 += a[off + d + 2] * b[d + 2];
    s3 += a[off + d + 3] * b[d + 3];
  }
  for (; d < dim; d++) s0 += a[off + d] * b[d];
  return s0 + s1 + s2 + s3;
}

function squaredDistance(a: Float32Array, off: number, b: Float32Array, dim: number): number {
  let s = 0;
  for (let d = 0; d < dim; d++) {
    const t = a[off + d] - b[d];
    s += t * t;
  }
  return s;
}

/** Element-wise mean of vectors (the query for several input papers). */
export function mean(vectors: ArrayLike<number>[], dim: number): Float64Array {
  const out = new Float64Array(dim);
  for (const v of vectors) for (let d = 0; d < dim; d++) out[d] += v[d];
  if (vectors.length) for (let d = 0; d < dim; d++) out[d] /= vectors.length;
  return out;
}

/**
 * The naive baseline, kept for tests and the benchmark: arrays of numbers, norms recomputed per row,
 * every distance collected and fully sorted.
 */
export function naiveSearch(rows: number[][], query: number[], k: number, metric: Metric): Hit[] {
  const all: Hit[] = rows.map((r, index) => {
    if (metric === 'cosine') {
      let dot = 0;
      let a = 0;
      let b = 0;
      for (let d = 0; d < r.length; d++) {
        dot += r[d] * query[d];
        a += r[d] * r[d];
        b += query[d] * query[d];
      }
      const cos = a > 0 && b > 0 ? dot / Math.sqrt(a * b) : 0;
      return { index, distance: 1 - cos };
    }
    return { index, distance: Math.sqrt(r.reduce((s, x, d) => s + (x - query[d]) ** 2, 0)) };
  });
  return all.sort((x, y) => x.distance - y.distance || x.index - y.index).slice(0, k);
}
