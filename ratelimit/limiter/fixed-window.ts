// The fixed-window decision: counts hits per cache key in the store and turns the counts into
// per-descriptor statuses and rule statistics exactly as the reference's base limiter does.
// Rules with another algorithm or several limits (rule.scripted) go to the store's evaluate (one
// atomic call per descriptor, algorithms.ts) in parallel with the fixed-window increments.
import type { LimitMatch, RateLimitRule } from '../config/index.js';
import type { WireDescriptorStatus, WireRateLimit } from '../../proto/index.js';
import type { StatsStore } from '../stats/index.js';
import { buildLimitCheck, taggedKeyBase, type LimitCheck } from './algorithms.js';
import { cacheKey } from './cache-key.js';
import { VerdictStatuses } from './verdict-status.js';
import type { LocalOverLimitCache } from './local-cache.js';
import { CacheError, type CounterOp, type CounterStore } from './store.js';

export interface FixedWindowLimiterOptions {
  store: CounterStore;
  stats: StatsStore;
  cacheKeyPrefix?: string;
  nearLimitRatio?: number;
  expirationJitterMaxSeconds?: number;
  localCache?: LocalOverLimitCache;
  stopCacheKeyIncrementWhenOverlimit?: boolean;
  /** Unix time in seconds (injectable for tests). */
  nowSeconds?: () => number;
  /** Unix time in milliseconds for the scripted algorithms (injectable for tests; Date.now). */
  nowMs?: () => number;
  random?: () => number;
}

const OK_NO_LIMIT: WireDescriptorStatus = Object.freeze({
  code: 'OK',
  limitRemaining: 0,
}) as WireDescriptorStatus;

export class FixedWindowLimiter {
  private readonly store: CounterStore;
  private readonly stats: StatsStore;
  private readonly prefix: string;
  private readonly nearRatio: number;
  private readonly jitterMax: number;
  private readonly localCache?: LocalOverLimitCache;
  private readonly stopIncrementWhenOverlimit: boolean;
  private readonly nowSeconds: () => number;
  private readonly random: () => number;
  private readonly wireLimits = new WeakMap<RateLimitRule, WireRateLimit>();
  private readonly nowMs: () => number;
  private readonly verdicts: VerdictStatuses;

  constructor(opts: FixedWindowLimiterOptions) {
    this.store = opts.store;
    this.stats = opts.stats;
    this.prefix = opts.cacheKeyPrefix ?? '';
    this.nearRatio = Math.fround(opts.nearLimitRatio ?? 0.8);
    this.jitterMax = opts.expirationJitterMaxSeconds ?? 0;
    this.localCache = opts.localCache;
    this.stopIncrementWhenOverlimit = opts.stopCacheKeyIncrementWhenOverlimit ?? false;
    this.nowSeconds = opts.nowSeconds ?? (() => Math.floor(Date.now() / 1000));
    this.random = opts.random ?? Math.random;
    this.nowMs = opts.nowMs ?? (opts.nowSeconds ? () => opts.nowSeconds!() * 1000 : Date.now);
    this.verdicts = new VerdictStatuses(this.stats, this.nearRatio);
  }

  /** The currentLimit message for a rule (built once per rule). */
  wireLimit(rule: RateLimitRule): WireRateLimit {
    let w = this.wireLimits.get(rule);
    if (!w) {
      w = { requestsPerUnit: rule.requestsPerUnit, unit: rule.unit };
      if (rule.name) w.name = rule.name;
      this.wireLimits.set(rule, w);
    }
    return w;
  }

  /**
   * One status per entry of `matches`; undefined entries (no limit, unlimited or replaced) are
   * answered OK with no limit and never reach the store.
   */
  async doLimit(
    domain: string,
    matches: readonly (LimitMatch | undefined)[],
    hits: readonly number[],
  ): Promise<WireDescriptorStatus[]> {
    const now = this.nowSeconds();
    const n = matches.length;
    const keys: (string | undefined)[] = new Array(n);
    const localOver: boolean[] = new Array(n).fill(false);
    let anyLocalOver = false;
    let keyCount = 0;
    let scripted: number[] | undefined;

    for (let i = 0; i < n; i++) {
      const m = matches[i];
      if (!m) continue;
      this.stats.ruleStats(m.statKey).totalHits.inc(hits[i]);
      if (m.rule.scripted) {
        // Decided by evaluate(); takes part in STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT as a receiver.
        (scripted ??= []).push(i);
        keyCount++;
        continue;
      }
      const key = cacheKey(this.prefix, domain, m.keyEntries, m.rule.unitSeconds, now);
      keys[i] = key;
      keyCount++;
      if (this.localCache !== undefined && this.localCache.has(key)) {
        localOver[i] = true;
        anyLocalOver = true;
      }
    }

    // Hits sent to the store per descriptor. With STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT, once one
    // descriptor is (or is about to be) over limit the others are not incremented (INCRBY 0).
    const storeHits = hits.slice();
    if (this.stopIncrementWhenOverlimit) {
      if (anyLocalOver) {
        for (let i = 0; i < n; i++) storeHits[i] = 0;
      } else if (keyCount > 1) {
        const probe: CounterOp[] = [];
        const probeIndex: number[] = [];
        for (let i = 0; i < n; i++) {
          const m = matches[i];
          if (!m || m.rule.scripted) continue;
          probe.push({ key: keys[i]!, hits: 0, expireSeconds: 0, perSecond: m.rule.unit === 'SECOND' });
          probeIndex.push(i);
        }
        const current = probe.length > 0 ? await this.store.get(probe) : [];
        for (let j = 0; j < probeIndex.length; j++) {
          const i = probeIndex[j];
          if (current[j] + hits[i] > matches[i]!.rule.requestsPerUnit) {
            for (let k = 0; k < n; k++) if (k !== i) storeHits[k] = 0;
            break;
          }
        }
      }
    }

    const ops: CounterOp[] = [];
    const opIndex: number[] = [];
    for (let i = 0; i < n; i++) {
      const m = matches[i];
      if (!m || localOver[i] || m.rule.scripted) continue;
      let expire = m.rule.unitSeconds;
      if (this.jitterMax > 0) expire += Math.floor(this.random() * this.jitterMax);
      ops.push({
        key: keys[i]!,
        hits: storeHits[i],
        expireSeconds: expire,
        perSecond: m.rule.unit === 'SECOND',
      });
      opIndex.push(i);
    }
    const counting = ops.length > 0 ? this.store.increment(ops) : undefined;
    const verdicts = scripted ? this.evaluate(domain, matches, scripted, storeHits) : undefined;
    const counts = counting ? await counting : [];
    const decided = verdicts ? await verdicts : undefined;

    const statuses: WireDescriptorStatus[] = new Array(n);
    for (let i = 0; i < n; i++) if (!matches[i]) statuses[i] = { ...OK_NO_LIMIT };
    for (let i = 0; i < n; i++) {
      const m = matches[i];
      if (m && localOver[i]) statuses[i] = this.overLimitFromLocalCache(m, hits[i], now);
    }
    for (let j = 0; j < opIndex.length; j++) {
      const i = opIndex[j];
      statuses[i] = this.statusFromCount(matches[i]!, keys[i]!, counts[j], hits[i], now);
    }
    if (scripted && decided) {
      for (let j = 0; j < scripted.length; j++) {
        const i = scripted[j]!;
        statuses[i] = this.verdicts.status(matches[i]!, decided[j]!, hits[i]);
      }
    }
    return statuses;
  }

  /** One atomic store call per scripted descriptor (all sent together). */
  private evaluate(
    domain: string,
    matches: readonly (LimitMatch | undefined)[],
    scripted: readonly number[],
    storeHits: readonly number[],
  ): Promise<number[][]> {
    if (!this.store.evaluate) {
      // The service refuses such configurations for this store at load; never counted as fixed.
      return Promise.reject(new CacheError('the counter store cannot evaluate this rate limit algorithm'));
    }
    const nowMs = this.nowMs();
    const checks: LimitCheck[] = new Array(scripted.length);
    for (let j = 0; j < scripted.length; j++) {
      const i = scripted[j]!;
      const m = matches[i]!;
      checks[j] = buildLimitCheck(
        taggedKeyBase(this.prefix, domain, m.keyEntries),
        m.rule,
        storeHits[i]!,
        nowMs,
      );
    }
    return this.store.evaluate(checks);
  }

  private overLimitFromLocalCache(m: LimitMatch, hits: number, now: number): WireDescriptorStatus {
    const rs = this.stats.ruleStats(m.statKey);
    rs.overLimit.inc(hits);
    rs.overLimitWithLocalCache.inc(hits);
    const status: WireDescriptorStatus = {
      code: 'OVER_LIMIT',
      currentLimit: this.wireLimit(m.rule),
      limitRemaining: 0,
      durationUntilReset: { seconds: resetSeconds(m.rule.unitSeconds, now) },
    };
    if (m.rule.shadowMode) {
      status.code = 'OK';
      rs.shadowMode.inc(hits);
    }
    return status;
  }

  private statusFromCount(
    m: LimitMatch,
    key: string,
    after: number,
    hits: number,
    now: number,
  ): WireDescriptorStatus {
    const rule = m.rule;
    const rs = this.stats.ruleStats(m.statKey);
    const before = after - hits;
    const overThreshold = rule.requestsPerUnit;
    const nearThreshold = Math.floor(Math.fround(Math.fround(overThreshold) * this.nearRatio));
    const status: WireDescriptorStatus = {
      code: 'OK',
      currentLimit: this.wireLimit(rule),
      limitRemaining: 0,
      durationUntilReset: { seconds: resetSeconds(rule.unitSeconds, now) },
    };
    if (after > overThreshold) {
      status.code = 'OVER_LIMIT';
      if (before >= overThreshold) {
        rs.overLimit.inc(hits);
      } else {
        rs.overLimit.inc(after - overThreshold);
        rs.nearLimit.inc(overThreshold - Math.max(nearThreshold, before));
      }
      if (this.localCache !== undefined) this.localCache.set(key, rule.unitSeconds);
      if (rule.shadowMode) {
        status.code = 'OK';
        rs.shadowMode.inc(hits);
      }
    } else {
      status.limitRemaining = overThreshold - after;
      if (after > nearThreshold) {
        rs.nearLimit.inc(before >= nearThreshold ? hits : after - nearThreshold);
      }
      rs.withinLimit.inc(hits);
    }
    return status;
  }
}

/** Seconds until the current window ends (the reference's CalculateReset). */
export function resetSeconds(unitSeconds: number, nowSeconds: number): number {
  return unitSeconds - (nowSeconds % unitSeconds);
}
