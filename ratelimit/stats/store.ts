// In-memory statistics: counters and timers aggregated in process and read (or flushed to a sink)
// on an interval, so the decision hot path only bumps numbers on objects it already holds.

export class Counter {
  value = 0;
  /** Value at the last flush, so sinks can send deltas. */
  flushed = 0;
  constructor(readonly name: string) {}
  inc(n = 1): void {
    this.value += n;
  }
}

export class Timer {
  count = 0;
  sumMs = 0;
  /** Samples since the last flush (bounded). */
  samples: number[] = [];
  constructor(readonly name: string) {}
  record(ms: number): void {
    this.count++;
    this.sumMs += ms;
    if (this.samples.length < 4096) this.samples.push(ms);
  }
}

/** Rule statistics of the reference: ratelimit.service.rate_limit.<statKey>.<stat>. */
export class RuleStats {
  readonly totalHits: Counter;
  readonly overLimit: Counter;
  readonly nearLimit: Counter;
  readonly withinLimit: Counter;
  readonly shadowMode: Counter;
  readonly overLimitWithLocalCache: Counter;
  constructor(store: StatsStore, statKey: string) {
    const p = `ratelimit.service.rate_limit.${statKey}.`;
    this.totalHits = store.counter(p + 'total_hits');
    this.overLimit = store.counter(p + 'over_limit');
    this.nearLimit = store.counter(p + 'near_limit');
    this.withinLimit = store.counter(p + 'within_limit');
    this.shadowMode = store.counter(p + 'shadow_mode');
    this.overLimitWithLocalCache = store.counter(p + 'over_limit_with_local_cache');
  }
}

/** Service statistics of the reference. */
export class ServiceStats {
  readonly configLoadSuccess: Counter;
  readonly configLoadError: Counter;
  readonly redisError: Counter;
  readonly serviceError: Counter;
  readonly globalShadowMode: Counter;
  constructor(store: StatsStore) {
    this.configLoadSuccess = store.counter('ratelimit.service.config_load_success');
    this.configLoadError = store.counter('ratelimit.service.config_load_error');
    this.redisError = store.counter('ratelimit.service.call.should_rate_limit.redis_error');
    this.serviceError = store.counter('ratelimit.service.call.should_rate_limit.service_error');
    this.globalShadowMode = store.counter('ratelimit.service.global_shadow_mode');
  }
}

export class StatsStore {
  private readonly counters = new Map<string, Counter>();
  private readonly timers = new Map<string, Timer>();
  private readonly rules = new Map<string, RuleStats>();
  readonly service: ServiceStats;

  constructor() {
    this.service = new ServiceStats(this);
  }

  counter(name: string): Counter {
    let c = this.counters.get(name);
    if (!c) {
      c = new Counter(name);
      this.counters.set(name, c);
    }
    return c;
  }

  timer(name: string): Timer {
    let t = this.timers.get(name);
    if (!t) {
      t = new Timer(name);
      this.timers.set(name, t);
    }
    return t;
  }

  /** Rule statistics for a stats key; the same object for the same key, so callers may cache it. */
  ruleStats(statKey: string): RuleStats {
    let r = this.rules.get(statKey);
    if (!r) {
      r = new RuleStats(this, statKey);
      this.rules.set(statKey, r);
    }
    return r;
  }

  allCounters(): IterableIterator<Counter> {
    return this.counters.values();
  }

  allTimers(): IterableIterator<Timer> {
    return this.timers.values();
  }

  /** Current values, sorted by name: what the debug server's /stats prints. */
  snapshot(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const name of [...this.counters.keys()].sort()) out[name] = this.counters.get(name)!.value;
    return out;
  }
}
