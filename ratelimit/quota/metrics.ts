// RLQS statistics. Per rule, not per bucket: a bucket's values come from requests (one bucket per user
// id would be one series per user), the rules from the config, so the series are bounded by the config.
// Buckets that match no rule share the `unknown` series.
import type { Counter, Gauge, StatsStore } from '../stats/index.js';

const PREFIX = 'ratelimit.rlqs.';

export interface RuleMetrics {
  /** Subscriptions (stream, bucket) to the rule's buckets on this pod; set on each tick. */
  readonly subscribers: Gauge;
  /** Requests per second assigned to this pod's subscribers of the rule's buckets; set on each tick. */
  readonly assigned: Gauge;
  readonly allowed: Counter;
  readonly denied: Counter;
  readonly abandoned: Counter;
}

export class QuotaMetrics {
  readonly streams: Gauge;
  readonly buckets: Gauge;
  readonly reports: Counter;
  readonly responses: Counter;
  readonly streamErrors: Counter;
  readonly unknownBuckets: Counter;
  readonly fleetErrors: Counter;
  private readonly rules = new Map<string, RuleMetrics>();

  constructor(private readonly stats: StatsStore) {
    this.streams = stats.gauge(PREFIX + 'streams');
    this.buckets = stats.gauge(PREFIX + 'buckets');
    this.reports = stats.counter(PREFIX + 'reports');
    this.responses = stats.counter(PREFIX + 'responses');
    this.streamErrors = stats.counter(PREFIX + 'stream_errors');
    this.unknownBuckets = stats.counter(PREFIX + 'unknown_buckets');
    this.fleetErrors = stats.counter(PREFIX + 'fleet_errors');
  }

  /** The series of a rule (its stat key), `unknown` for buckets without one. */
  rule(statKey: string | undefined): RuleMetrics {
    const name = statKey ?? 'unknown';
    let m = this.rules.get(name);
    if (m === undefined) {
      const p = `${PREFIX}${name}.`;
      m = {
        subscribers: this.stats.gauge(p + 'subscribers'),
        assigned: this.stats.gauge(p + 'assigned'),
        allowed: this.stats.counter(p + 'allowed'),
        denied: this.stats.counter(p + 'denied'),
        abandoned: this.stats.counter(p + 'abandoned'),
      };
      this.rules.set(name, m);
    }
    return m;
  }

  /** Sets the per-rule gauges from the buckets' current state. */
  refresh(buckets: Iterable<{ rule: RuleMetrics; subscribers: number; assigned: number }>): void {
    for (const m of this.rules.values()) {
      m.subscribers.set(0);
      m.assigned.set(0);
    }
    for (const b of buckets) {
      b.rule.subscribers.set(b.rule.subscribers.value + b.subscribers);
      b.rule.assigned.set(b.rule.assigned.value + b.assigned);
    }
  }
}
