// A Prometheus histogram fed from flushed timer samples with integer weights, so a reservoir
// sample of a few thousand calls can stand for any number of calls with an exact _count, at a
// cost that does not grow with traffic. prom-client's Histogram only observes one value at a time;
// this registers into the same prom-client registry through its metric interface (name, help,
// type, get()).
import type { Registry } from 'prom-client';

interface Series {
  labels: Record<string, string>;
  /** Non-cumulative counts per bucket; the last slot is +Inf. */
  counts: Float64Array;
  sum: number;
  count: number;
}

export class AggregatedHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  private readonly series = new Map<string, Series>();
  private readonly buckets: number[];

  constructor(
    readonly name: string,
    readonly help: string,
    buckets: readonly number[],
    registry: Registry,
  ) {
    this.buckets = [...buckets].sort((a, b) => a - b);
    registry.registerMetric(this as never);
  }

  private seriesFor(labels: Record<string, string>): Series {
    const key = JSON.stringify(
      Object.keys(labels)
        .sort()
        .map((k) => [k, labels[k]]),
    );
    let s = this.series.get(key);
    if (!s) {
      s = { labels: { ...labels }, counts: new Float64Array(this.buckets.length + 1), sum: 0, count: 0 };
      this.series.set(key, s);
    }
    return s;
  }

  /** Adds `weight` observations of `value`. */
  observe(labels: Record<string, string>, value: number, weight = 1): void {
    this.observeMany(labels, [value], weight);
  }

  /** `total` observations represented by `values` (spread as evenly as integers allow). */
  observeMany(labels: Record<string, string>, values: readonly number[], total = values.length): void {
    if (values.length === 0 || total <= 0) return;
    const s = this.seriesFor(labels);
    const base = Math.floor(total / values.length);
    const extra = total - base * values.length;
    for (let i = 0; i < values.length; i++) {
      const w = i < extra ? base + 1 : base;
      if (w === 0) continue;
      const v = values[i];
      let b = 0;
      while (b < this.buckets.length && v > this.buckets[b]) b++;
      s.counts[b] += w;
      s.sum += v * w;
      s.count += w;
    }
  }

  reset(): void {
    this.series.clear();
  }

  get(): { name: string; help: string; type: string; aggregator: string; values: object[] } {
    const values: object[] = [];
    for (const s of this.series.values()) {
      let cumulative = 0;
      for (let b = 0; b <= this.buckets.length; b++) {
        cumulative += s.counts[b];
        const le = b < this.buckets.length ? this.buckets[b] : '+Inf';
        values.push({ metricName: `${this.name}_bucket`, labels: { ...s.labels, le }, value: cumulative });
      }
      values.push({ metricName: `${this.name}_sum`, labels: s.labels, value: s.sum });
      values.push({ metricName: `${this.name}_count`, labels: s.labels, value: s.count });
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }
}
