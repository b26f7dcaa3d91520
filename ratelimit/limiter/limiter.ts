// The decision for one request's descriptors (Limiter.doLimit) and its fixed windows, exactly as the
// reference's cache key generator and base limiter do: each descriptor's cache key, the local
// over-limit cache, the counts in the store, the statuses and rule statistics the counts give.
// A decision on the common path (fixed windows only) runs in this file. The steps beside it have a
// file each and reach the fixed windows through their face (fixed-window.ts): rules with another
// algorithm or several limits (scripted.ts), refunds (refunds.ts), the stop-increment probe
// (stop-increment.ts) and what a descriptor gets when the store could not count it (failure-mode.ts).
//
// Cache keys are byte-compatible with the reference service:
//   prefix + domain + "_" + (key + "_" + value + "_") for each entry + windowStart
// where windowStart = floor(now / unitSeconds) * unitSeconds (fixed windows aligned to the epoch).
import type { DescriptorEntry, LimitMatch, LimitSpec, RateLimitRule } from '../config/index.js';
import type { WireDescriptorStatus, WireRateLimit } from '../../proto/index.js';
import type { StatsStore } from '../stats/index.js';
import { storeCall, type CounterOp, type CounterStore } from '../counting/index.js';
import type { LocalOverLimitCache } from './local-cache.js';
import type { FixedWindows } from './fixed-window.js';
import {
  DEFAULT_FAILURE_MODE,
  FailureModes,
  type FailureModeSettings,
  type FailureNotes,
} from './failure-mode.js';
import { Refunds } from './refunds.js';
import { ScriptedRules } from './scripted.js';
import { stopIncrementProbe } from './stop-increment.js';
import { specOf, VerdictStatuses } from './verdict-status.js';

export interface LimiterOptions {
  store: CounterStore;
  stats: StatsStore;
  cacheKeyPrefix?: string;
  nearLimitRatio?: number;
  expirationJitterMaxSeconds?: number;
  localCache?: LocalOverLimitCache;
  stopCacheKeyIncrementWhenOverlimit?: boolean;
  /** What a descriptor whose count failed gets (CACHE_FAILURE_MODE*); `error` by default. */
  failureMode?: FailureModeSettings;
  /** Unix time in seconds (injectable for tests). */
  nowSeconds?: () => number;
  /** Unix time in milliseconds for the scripted algorithms (injectable for tests; Date.now). */
  nowMs?: () => number;
  random?: () => number;
}

/**
 * How long a pod keeps a rule's key in the local over-limit cache once it has answered a refund on that
 * rule: refunds answered by other pods can bring the key back under its limit at any time.
 */
export const REFUNDED_LOCAL_CACHE_SECONDS = 1;

const NO_COUNTS: readonly (number | Error)[] = [];

const OK_NO_LIMIT: WireDescriptorStatus = Object.freeze({
  code: 'OK',
  limitRemaining: 0,
}) as WireDescriptorStatus;

export class Limiter {
  private readonly windows: Windows;
  private readonly store: CounterStore;
  private readonly stats: StatsStore;
  private readonly localCache?: LocalOverLimitCache;
  private readonly stopIncrementWhenOverlimit: boolean;
  private readonly jitterMax: number;
  private readonly random: () => number;
  private readonly nowSeconds: () => number;
  private readonly failures: FailureModes;
  private readonly scriptedRules: ScriptedRules;
  private readonly refunds: Refunds;

  constructor(opts: LimiterOptions) {
    this.store = opts.store;
    this.stats = opts.stats;
    this.localCache = opts.localCache;
    this.stopIncrementWhenOverlimit = opts.stopCacheKeyIncrementWhenOverlimit ?? false;
    this.jitterMax = opts.expirationJitterMaxSeconds ?? 0;
    this.random = opts.random ?? Math.random;
    this.nowSeconds = opts.nowSeconds ?? (() => Math.floor(Date.now() / 1000));
    const nowMs = opts.nowMs ?? (opts.nowSeconds ? () => opts.nowSeconds!() * 1000 : Date.now);
    const nearRatio = Math.fround(opts.nearLimitRatio ?? 0.8);
    this.windows = new Windows(opts.store, opts.stats, opts.cacheKeyPrefix ?? '', nearRatio, opts.localCache);
    const verdicts = new VerdictStatuses(opts.stats, nearRatio);
    this.failures = new FailureModes(opts.failureMode ?? DEFAULT_FAILURE_MODE, opts.stats, this.windows);
    this.scriptedRules = new ScriptedRules(opts.store, this.windows, verdicts, this.failures, nowMs);
    this.refunds = new Refunds(opts.store, this.windows, verdicts, this.failures, nowMs);
  }

  /**
   * The limiter's one function: one status per entry of `matches`, in order. Undefined entries (no
   * limit, unlimited or replaced) are answered OK with no limit and never reach the store. `hits` are
   * each descriptor's hits, `negative[i]` marks a refund (is_negative_hits). A descriptor the store
   * could not count is decided by its failure mode, noted in `notes.decidedBy[i]` when notes are
   * given; in mode `error`, or on a failure that is not a cache failure (a key the store refuses), the
   * promise rejects with that failure (CacheError, KeyRejectedError).
   *
   * Not an async function: on the common path (fixed windows only, no STOP_CACHE_KEY_INCREMENT_WHEN_
   * OVERLIMIT) the ops are built and sent at once, and the statuses come from one `then` on the
   * store's promise. Anything else goes through the steps beside it (others).
   */
  doLimit(
    domain: string,
    matches: readonly (LimitMatch | undefined)[],
    hits: readonly number[],
    notes?: FailureNotes,
    negative?: readonly boolean[],
  ): Promise<WireDescriptorStatus[]> {
    const now = this.nowSeconds();
    const n = matches.length;
    // The fixed-window ops (all but the scripted descriptors, the refunds and those the local cache
    // answered): sized for the most there can be (an empty array's first push allocates room for 17),
    // then cut to the ops there are. `opIndex[j]` is the descriptor of op j; undefined while op j is
    // descriptor j (every descriptor so far has an op, the usual request).
    const ops: CounterOp[] = new Array(n);
    let opIndex: number[] | undefined;
    let nOps = 0;
    // Allocated on the first descriptor the local over-limit cache answers (rare on the hot path).
    let localOver: boolean[] | undefined;
    let keyCount = 0;
    let scripted: number[] | undefined;
    let refunds: number[] | undefined;
    const prefix = this.windows.prefix;

    for (let i = 0; i < n; i++) {
      const m = matches[i];
      if (!m) continue;
      if (negative !== undefined && negative[i]) {
        // Not a hit: counted apart, never in the local cache nor in STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT.
        this.stats.ruleStats(m.statKey).totalNegativeHits.inc(hits[i]);
        (refunds ??= []).push(i);
        continue;
      }
      this.stats.ruleStats(m.statKey).totalHits.inc(hits[i]);
      keyCount++;
      const rule = m.rule;
      if (rule.scripted) {
        // Decided by evaluate(); takes part in STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT as a receiver.
        (scripted ??= []).push(i);
        continue;
      }
      const key = cacheKey(prefix, domain, m.keyEntries, rule.unitSeconds, now);
      if (this.localCache !== undefined && this.localCache.has(key)) {
        (localOver ??= new Array<boolean>(n).fill(false))[i] = true;
        continue;
      }
      let expire = rule.unitSeconds;
      if (this.jitterMax > 0) expire += Math.floor(this.random() * this.jitterMax);
      if (opIndex === undefined && nOps !== i) opIndex = identity(nOps, n);
      if (opIndex !== undefined) opIndex[nOps] = i;
      ops[nOps++] = { key, hits: hits[i], expireSeconds: expire, perSecond: rule.unit === 'SECOND' };
    }
    if (nOps < n) {
      ops.length = nOps;
      if (opIndex !== undefined) opIndex.length = nOps;
    }
    if (this.stopIncrementWhenOverlimit || scripted !== undefined || refunds !== undefined) {
      return this.others(
        domain,
        matches,
        hits,
        now,
        ops,
        opIndex ?? identity(nOps, nOps),
        localOver,
        keyCount,
        scripted,
        refunds,
        notes,
      );
    }
    if (nOps === 0) {
      return Promise.resolve(this.statuses(matches, hits, now, localOver, ops, opIndex, NO_COUNTS, notes));
    }
    return this.windows
      .count(ops)
      .then((counts) => this.statuses(matches, hits, now, localOver, ops, opIndex, counts, notes));
  }

  /**
   * doLimit with the steps beside the fixed windows: the stop-increment probe first (it may set the
   * ops' hits to 0), then the fixed-window counts, the scripted rules' verdicts and the refunds sent
   * together, and their statuses.
   */
  private async others(
    domain: string,
    matches: readonly (LimitMatch | undefined)[],
    hits: readonly number[],
    now: number,
    ops: CounterOp[],
    opIndex: readonly number[],
    localOver: boolean[] | undefined,
    keyCount: number,
    scripted: number[] | undefined,
    refunds: number[] | undefined,
    notes: FailureNotes | undefined,
  ): Promise<WireDescriptorStatus[]> {
    // Hits sent to the store per descriptor (STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT may zero some).
    let storeHits = hits;
    if (this.stopIncrementWhenOverlimit) {
      storeHits = await stopIncrementProbe(
        this.store,
        this.failures,
        matches,
        ops,
        opIndex,
        hits,
        localOver !== undefined,
        keyCount,
      );
      for (let j = 0; j < ops.length; j++) ops[j] = { ...ops[j]!, hits: storeHits[opIndex[j]!]! };
    }
    const counting = ops.length > 0 ? this.windows.count(ops) : undefined;
    const verdicts = scripted ? this.scriptedRules.evaluate(domain, matches, scripted, storeHits) : undefined;
    const refunding = refunds ? this.refunds.send(domain, matches, hits, refunds, now) : undefined;
    const counts = counting ? await counting : NO_COUNTS;
    const decided = verdicts ? await verdicts : undefined;
    const refunded = refunding ? await refunding : undefined;
    const statuses = this.statuses(matches, hits, now, localOver, ops, opIndex, counts, notes);
    if (scripted && decided !== undefined) {
      this.scriptedRules.statuses(statuses, domain, matches, scripted, decided, hits, now, notes);
    }
    if (refunds && refunded !== undefined) {
      this.refunds.statuses(statuses, domain, matches, refunds, refunded, now, notes);
    }
    return statuses;
  }

  /**
   * The statuses from the fixed-window counts (`counts[j]` for `ops[j]`, the op of descriptor
   * `opIndex[j]`, or of descriptor j without opIndex): unmatched descriptors OK with
   * no limit, the local over-limit cache's answers, each count's status, then the counts the store
   * failed through the failure modes. Scripted descriptors and refunds are left to their steps.
   */
  private statuses(
    matches: readonly (LimitMatch | undefined)[],
    hits: readonly number[],
    now: number,
    localOver: boolean[] | undefined,
    ops: readonly CounterOp[],
    opIndex: readonly number[] | undefined,
    counts: readonly (number | Error)[],
    notes: FailureNotes | undefined,
  ): WireDescriptorStatus[] {
    const n = matches.length;
    const statuses: WireDescriptorStatus[] = new Array(n);
    for (let i = 0; i < n; i++) if (!matches[i]) statuses[i] = { ...OK_NO_LIMIT };
    if (localOver !== undefined) {
      for (let i = 0; i < n; i++) {
        const m = matches[i];
        if (m && localOver[i]) statuses[i] = this.windows.fromLocalCache(m, hits[i], now);
      }
    }
    let failed = false;
    for (let j = 0; j < ops.length; j++) {
      const i = opIndex === undefined ? j : opIndex[j];
      const c = counts[j];
      if (typeof c === 'number')
        statuses[i] = this.windows.fromCount(matches[i]!, ops[j].key, c, hits[i], now);
      else failed = true;
    }
    if (failed) {
      for (let j = 0; j < ops.length; j++) {
        const c = counts[j];
        if (typeof c === 'number') continue;
        const i = opIndex === undefined ? j : opIndex[j];
        statuses[i] = this.failures.decide(c, matches[i]!, ops[j], hits[i], now, i, notes);
      }
    }
    return statuses;
  }
}

/** An opIndex whose first `count` ops are descriptors 0 to count - 1, with room for `size`. */
function identity(count: number, size: number): number[] {
  const index: number[] = new Array(size);
  for (let j = 0; j < count; j++) index[j] = j;
  return index;
}

/**
 * Which limit of the matched rule a status of doLimit reports (the one that rejected, or the one with
 * the least remaining); undefined without a limit. Named-limit outputs use it.
 */
export function limitOf(m: LimitMatch, status: WireDescriptorStatus): LimitSpec | undefined {
  const w = status.currentLimit;
  if (!w) return undefined;
  const limits = m.rule.limits;
  if (limits.length <= 1) return limits[0];
  return specOf(w) ?? limits[0];
}

/** The fixed windows of one limiter: their keys, and the status and rule statistics of a count. */
class Windows implements FixedWindows {
  private readonly wireLimits = new WeakMap<RateLimitRule, WireRateLimit>();
  /** Rules this pod has answered a refund on (REFUNDED_LOCAL_CACHE_SECONDS). */
  private readonly refundedRules = new WeakSet<RateLimitRule>();

  constructor(
    private readonly store: CounterStore,
    private readonly stats: StatsStore,
    readonly prefix: string,
    /** Math.fround'ed NEAR_LIMIT_RATIO. */
    private readonly nearRatio: number,
    private readonly localCache: LocalOverLimitCache | undefined,
  ) {}

  key(domain: string, m: LimitMatch, nowSeconds: number): string {
    return cacheKey(this.prefix, domain, m.keyEntries, m.rule.unitSeconds, nowSeconds);
  }

  count(ops: readonly CounterOp[]): Promise<(number | Error)[]> {
    // Not async: the store's own promise is returned as is (one promise and two turns fewer per request).
    if (this.store.incrementEach) return this.store.incrementEach(ops);
    return storeCall(() => this.store.increment(ops)).then(undefined, (err: unknown) =>
      ops.map(() => err as Error),
    );
  }

  withLimit(rule: RateLimitRule, nowSeconds: number, remaining: number): WireDescriptorStatus {
    return {
      code: 'OK',
      currentLimit: this.wireLimit(rule),
      limitRemaining: remaining,
      durationUntilReset: { seconds: resetSeconds(rule.unitSeconds, nowSeconds) },
    };
  }

  refunded(domain: string, m: LimitMatch, nowSeconds: number, remaining: number): void {
    if (this.localCache === undefined) return;
    this.refundedRules.add(m.rule);
    if (remaining > 0) this.localCache.delete(this.key(domain, m, nowSeconds));
  }

  fromLocalCache(m: LimitMatch, hits: number, nowSeconds: number): WireDescriptorStatus {
    const rs = this.stats.ruleStats(m.statKey);
    rs.overLimit.inc(hits);
    rs.overLimitWithLocalCache.inc(hits);
    const status = this.withLimit(m.rule, nowSeconds, 0);
    if (m.rule.shadowMode) rs.shadowMode.inc(hits);
    else status.code = 'OVER_LIMIT';
    return status;
  }

  fromCount(
    m: LimitMatch,
    key: string,
    after: number,
    hits: number,
    nowSeconds: number,
    overThreshold = m.rule.requestsPerUnit,
    remember = true,
  ): WireDescriptorStatus {
    const rule = m.rule;
    const rs = this.stats.ruleStats(m.statKey);
    const before = after - hits;
    const nearThreshold = Math.floor(Math.fround(Math.fround(overThreshold) * this.nearRatio));
    const status = this.withLimit(rule, nowSeconds, 0);
    if (after > overThreshold) {
      status.code = 'OVER_LIMIT';
      if (before >= overThreshold) {
        rs.overLimit.inc(hits);
      } else {
        rs.overLimit.inc(after - overThreshold);
        rs.nearLimit.inc(overThreshold - Math.max(nearThreshold, before));
      }
      if (remember && this.localCache !== undefined) {
        const ttl = this.refundedRules.has(rule)
          ? Math.min(rule.unitSeconds, REFUNDED_LOCAL_CACHE_SECONDS)
          : rule.unitSeconds;
        this.localCache.set(key, ttl);
      }
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

  /** The currentLimit message for a rule (built once per rule). */
  private wireLimit(rule: RateLimitRule): WireRateLimit {
    let w = this.wireLimits.get(rule);
    if (!w) {
      w = { requestsPerUnit: rule.requestsPerUnit, unit: rule.unit };
      if (rule.name) w.name = rule.name;
      this.wireLimits.set(rule, w);
    }
    return w;
  }
}

export function cacheKeyBase(prefix: string, domain: string, entries: readonly DescriptorEntry[]): string {
  let k = prefix + domain + '_';
  for (let i = 0; i < entries.length; i++) k += entries[i].key + '_' + entries[i].value + '_';
  return k;
}

export function windowStart(nowSeconds: number, unitSeconds: number): number {
  return Math.floor(nowSeconds / unitSeconds) * unitSeconds;
}

export function cacheKey(
  prefix: string,
  domain: string,
  entries: readonly DescriptorEntry[],
  unitSeconds: number,
  nowSeconds: number,
): string {
  return cacheKeyBase(prefix, domain, entries) + windowStart(nowSeconds, unitSeconds);
}

/** Seconds until the current window ends (the reference's CalculateReset). */
export function resetSeconds(unitSeconds: number, nowSeconds: number): number {
  return unitSeconds - (nowSeconds % unitSeconds);
}
