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
  /** The increase since the previous call (what a flush sends); marks it flushed. */
  latch(): number {
    const d = this.value - this.flushed;
    this.flushed = this.value;
    return d;
  }
}

/** A value that is set, not added to (e.g. a circuit state); flushed whole, every interval. */
export class Gauge {
  value = 0;
  constructor(readonly name: string) {}
  set(v: number): void {
    this.value = v;
  }
}

/**
 * Samples kept per flush interval per timer; past it, a uniform reservoir sample is kept (and the
 * sinks scale by the call count), so a flush costs the same at 100 or 100 000 calls per second.
 */
export const TIMER_RESERVOIR = 2048;

export class Timer {
  /** Cumulative, since start. */
  count = 0;
  sumMs = 0;
  /** Samples since the last flush (at most TIMER_RESERVOIR, a uniform sample beyond that). */
  samples: number[] = [];
  /** Calls since the last flush (>= samples.length). */
  pending = 0;
  constructor(readonly name: string) {}
  record(ms: number): void {
    this.count++;
    this.sumMs += ms;
    const seen = ++this.pending;
    if (seen <= TIMER_RESERVOIR) {
      this.samples.push(ms);
    } else {
      // Reservoir sampling (algorithm R): every call has the same chance to be kept.
      const j = Math.floor(Math.random() * seen);
      if (j < TIMER_RESERVOIR) this.samples[j] = ms;
    }
  }
  /** Hands over the samples since the last flush and how many calls they stand for. */
  drain(): { samples: number[]; count: number } | undefined {
    if (this.pending === 0) return undefined;
    const out = { samples: this.samples, count: this.pending };
    this.samples = [];
    this.pending = 0;
    return out;
  }
}

/**
 * The reference's SanitizeStatName: ':' and '|' would break the StatsD line format, so they
 * become '_' in descriptor-derived parts of a statistic name. Control characters too (ours): a
 * request value with a line break would otherwise end the line and let the caller write its own.
 */
// eslint-disable-next-line no-control-regex
const STAT_UNSAFE = /[:|\x00-\x1f\x7f]/;
// eslint-disable-next-line no-control-regex
const STAT_UNSAFE_ALL = /[:|\x00-\x1f\x7f]/g;

export function sanitizeStatName(s: string): string {
  return STAT_UNSAFE.test(s) ? s.replace(STAT_UNSAFE_ALL, '_') : s;
}

/** Rule statistics of the reference: ratelimit.service.rate_limit.<statKey>.<stat>. */
export class RuleStats {
  readonly totalHits: Counter;
  readonly overLimit: Counter;
  readonly nearLimit: Counter;
  readonly withinLimit: Counter;
  readonly shadowMode: Counter;
  readonly overLimitWithLocalCache: Counter;
  /** Hits a refund (is_negative_hits) asked to return to the rule, clamped or not. */
  readonly totalNegativeHits: Counter;
  constructor(store: StatsStore, statKey: string) {
    const p = `ratelimit.service.rate_limit.${sanitizeStatName(statKey)}.`;
    this.totalHits = store.counter(p + 'total_hits');
    this.overLimit = store.counter(p + 'over_limit');
    this.nearLimit = store.counter(p + 'near_limit');
    this.withinLimit = store.counter(p + 'within_limit');
    this.shadowMode = store.counter(p + 'shadow_mode');
    this.overLimitWithLocalCache = store.counter(p + 'over_limit_with_local_cache');
    this.totalNegativeHits = store.counter(p + 'total_negative_hits');
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
  private readonly gauges = new Map<string, Gauge>();
  private readonly rules = new Map<string, RuleStats>();
  private readonly notFound = new Map<string, Counter>();
  private readonly maxUnknownDomains: number;
  /** Requests for unknown domains past STATS_MAX_UNKNOWN_DOMAINS distinct ones (one series for all). */
  private unlistedNotFound?: Counter;
  private readonly namedOver = new Map<string, Counter>();
  private readonly maxNamedLimits: number;
  /** Over-limit hits of limit names past NAMED_LIMITS_STATS_MAX_SERIES distinct ones. */
  private unlistedNamedOver?: Counter;
  readonly service: ServiceStats;

  /**
   * maxUnknownDomains bounds the domain_not_found series: the domain comes from the caller, and one
   * series per distinct value would let any caller grow memory, /stats and every metrics backend.
   */
  constructor(opts: { maxUnknownDomains?: number; maxNamedLimits?: number } = {}) {
    this.maxUnknownDomains = opts.maxUnknownDomains ?? 100;
    this.maxNamedLimits = opts.maxNamedLimits ?? 1000;
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

  gauge(name: string): Gauge {
    let g = this.gauges.get(name);
    if (!g) {
      g = new Gauge(name);
      this.gauges.set(name, g);
    }
    return g;
  }

  allGauges(): IterableIterator<Gauge> {
    return this.gauges.values();
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

  /**
   * ratelimit.service.rate_limit.<domain>.domain_not_found: requests for a domain the loaded
   * config does not have (the reference counts once per descriptor); past maxUnknownDomains distinct
   * domains, ratelimit.service.domain_not_found_unlisted counts the rest.
   */
  domainNotFound(domain: string): Counter {
    let c = this.notFound.get(domain);
    if (!c) {
      if (this.notFound.size >= this.maxUnknownDomains) {
        return (this.unlistedNotFound ??= this.counter('ratelimit.service.domain_not_found_unlisted'));
      }
      c = this.counter(`ratelimit.service.rate_limit.${sanitizeStatName(domain)}.domain_not_found`);
      this.notFound.set(domain, c);
    }
    return c;
  }

  /**
   * ratelimit.service.named_limit.<NAME>.over_limit: hits a named limit rejected. Names come from the
   * config (bounded by its size limits) and, for a request-supplied limit, from request values; so
   * past maxNamedLimits distinct names (NAMED_LIMITS_STATS_MAX_SERIES) the rest share
   * ratelimit.service.named_limit_unlisted.over_limit. Undefined when maxNamedLimits is 0 (off).
   */
  namedLimitOverLimit(name: string): Counter | undefined {
    if (this.maxNamedLimits === 0) return undefined;
    let c = this.namedOver.get(name);
    if (!c) {
      if (this.namedOver.size >= this.maxNamedLimits) {
        return (this.unlistedNamedOver ??= this.counter('ratelimit.service.named_limit_unlisted.over_limit'));
      }
      // A request-supplied limit's name carries request values.
      c = this.counter(`ratelimit.service.named_limit.${sanitizeStatName(name)}.over_limit`);
      this.namedOver.set(name, c);
    }
    return c;
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
    for (const name of [...this.gauges.keys()].sort()) out[name] = this.gauges.get(name)!.value;
    return out;
  }

  /** Cumulative timer figures, sorted by name (for /stats). */
  timerSnapshot(): Record<string, { count: number; sumMs: number }> {
    const out: Record<string, { count: number; sumMs: number }> = {};
    for (const name of [...this.timers.keys()].sort()) {
      const t = this.timers.get(name)!;
      out[name] = { count: t.count, sumMs: t.sumMs };
    }
    return out;
  }
}
