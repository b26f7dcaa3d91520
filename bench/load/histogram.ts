// A log-linear latency histogram in microseconds (HdrHistogram-like, ~1.5% precision, 1 µs .. ~18 h):
// values below 128 µs get one bucket each, every power of two above gets 64 buckets. Mergeable, cheap
// to record (no allocation), serialisable as a plain array.
const SUB = 64;
const BUCKETS = 40 * SUB;

function indexOf(us: number): number {
  const v = us < 0 ? 0 : Math.floor(us);
  if (v < 2 * SUB) return v;
  const e = 32 - Math.clz32(v) - 7; // v >> e lands in [64, 128)
  const i = e * SUB + (v >>> e);
  return i < BUCKETS ? i : BUCKETS - 1;
}

/** Lower bound of a bucket, in µs. */
function lowerOf(i: number): number {
  if (i < 2 * SUB) return i;
  const e = Math.floor(i / SUB) - 1;
  return (i - e * SUB) * 2 ** e;
}

export interface LatencySummary {
  count: number;
  meanUs: number;
  p50Us: number;
  p90Us: number;
  p99Us: number;
  p999Us: number;
  maxUs: number;
}

export class Histogram {
  readonly counts = new Float64Array(BUCKETS);
  count = 0;
  sum = 0;
  max = 0;

  record(us: number): void {
    this.counts[indexOf(us)]++;
    this.count++;
    this.sum += us;
    if (us > this.max) this.max = us;
  }

  merge(other: Histogram): void {
    for (let i = 0; i < BUCKETS; i++) this.counts[i] += other.counts[i];
    this.count += other.count;
    this.sum += other.sum;
    if (other.max > this.max) this.max = other.max;
  }

  /** The value at quantile q (0..1): the midpoint of the bucket holding it, capped at the max seen. */
  quantile(q: number): number {
    if (this.count === 0) return 0;
    const rank = Math.max(1, Math.ceil(q * this.count));
    let seen = 0;
    for (let i = 0; i < BUCKETS; i++) {
      seen += this.counts[i];
      if (seen >= rank) return Math.min(this.max, (lowerOf(i) + lowerOf(i + 1)) / 2);
    }
    return this.max;
  }

  summary(): LatencySummary {
    const r = (x: number) => Math.round(x * 10) / 10;
    return {
      count: this.count,
      meanUs: r(this.count ? this.sum / this.count : 0),
      p50Us: r(this.quantile(0.5)),
      p90Us: r(this.quantile(0.9)),
      p99Us: r(this.quantile(0.99)),
      p999Us: r(this.quantile(0.999)),
      maxUs: r(this.max),
    };
  }
}
