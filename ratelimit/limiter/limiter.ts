// The fixed-window decision: counts hits per cache key in the store and turns the counts into
// per-descriptor statuses and rule statistics exactly as the reference's base limiter does.
// Rules with another algorithm or several limits (rule.scripted) go to the store's evaluate (one
// atomic call per descriptor, counting/algorithms.ts) in parallel with the fixed-window increments.
// A refund (is_negative_hits) returns its hits to the descriptor's limits, clamped to what they hold, and
// is always answered OK: through evaluate where the store has it (fixed windows on the reference's key),
// otherwise as a counter op with negative hits (memcache's decr); see refund().
import type { FailureMode, LimitMatch, LimitSpec, RateLimitRule } from '../config/index.js';
import type { WireDescriptorStatus, WireRateLimit } from '../../proto/index.js';
import type { StatsStore } from '../stats/index.js';
import { buildFixedWindowRefund, buildLimitCheck, taggedKeyBase } from '../counting/index.js';
import { cacheKey } from './cache-key.js';
import { VerdictStatuses } from './verdict-status.js';
import type { LocalOverLimitCache } from './local-cache.js';
import {
  DEFAULT_FAILURE_MODE,
  FailureModeStats,
  LocalFallbackCounter,
  localShare,
  type FailureModeSettings,
} from './failure-mode.js';
import {
  CacheError,
  storeCall,
  type CounterOp,
  type CounterStore,
  type LimitCheck,
  type LimitVerdict,
} from '../counting/index.js';

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
 * One decision between Limiter.start and its finish (or complete): the keys, what the local cache
 * answered, and the fixed-window ops once sent. Internal to the limiter and its caller.
 */
export interface LimitRun {
  readonly domain: string;
  readonly matches: readonly (LimitMatch | undefined)[];
  readonly hits: readonly number[];
  readonly now: number;
  readonly keys: readonly (string | undefined)[];
  readonly localOver: boolean[] | undefined;
  readonly anyLocalOver: boolean;
  readonly keyCount: number;
  readonly scripted: number[] | undefined;
  /** The descriptors whose hits are a refund (is_negative_hits), decided by refund(). */
  readonly refunds: number[] | undefined;
  ops: readonly CounterOp[];
  opIndex: readonly number[];
  /** The fixed-window ops are sent (or there are none): finish() may follow `counting`. */
  sent: boolean;
  /** The counts of `ops`, in op order; undefined when no op went to the store. */
  counting: Promise<(number | Error)[]> | undefined;
}

const NO_OPS: readonly CounterOp[] = [];
const NO_INDEX: readonly number[] = [];
const NO_COUNTS: readonly (number | Error)[] = [];

/**
 * How long a pod keeps a rule's key in the local over-limit cache once it has answered a refund on that
 * rule: refunds answered by other pods can bring the key back under its limit at any time.
 */
export const REFUNDED_LOCAL_CACHE_SECONDS = 1;

const OK_NO_LIMIT: WireDescriptorStatus = Object.freeze({
  code: 'OK',
  limitRemaining: 0,
}) as WireDescriptorStatus;

export class Limiter {
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
  private readonly failure: FailureModeSettings;
  private readonly failureStats: FailureModeStats;
  /** Rules this pod has answered a refund on (REFUNDED_LOCAL_CACHE_SECONDS). */
  private readonly refundedRules = new WeakSet<RateLimitRule>();
  /** `local` failure mode's counters. */
  readonly localCounter: LocalFallbackCounter;

  constructor(opts: LimiterOptions) {
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
    this.failure = opts.failureMode ?? DEFAULT_FAILURE_MODE;
    this.localCounter = new LocalFallbackCounter(Date.now, this.failure.localMaxBytes);
    this.failureStats = new FailureModeStats(opts.stats);
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
   * Which limit of the matched rule a status of doLimit reports (the one that rejected, or the one
   * with the least remaining); undefined without a limit. Named-limit outputs use it.
   */
  limitOf(m: LimitMatch, status: WireDescriptorStatus): LimitSpec | undefined {
    const w = status.currentLimit;
    if (!w) return undefined;
    const limits = m.rule.limits;
    if (limits.length <= 1) return limits[0];
    return this.verdicts.specOf(w) ?? limits[0];
  }

  /**
   * For a status of a rule the limit script decided: ms until the reported limit has more quota than
   * the status's remaining with no other hit (0: nothing to wait for). Undefined for other statuses
   * (a reference fixed window, a failure mode, the local over-limit cache).
   */
  moreQuotaMsOf(status: WireDescriptorStatus): number | undefined {
    return this.verdicts.moreMsOf(status);
  }

  /**
   * One status per entry of `matches`; undefined entries (no limit, unlimited or replaced) are
   * answered OK with no limit and never reach the store. A descriptor the store could not count is
   * decided by its failure mode, which is written to `decidedBy[i]` when given; in mode `error` (or
   * on an error that is not a cache error) the call rejects.
   *
   * The steps: the keys, and the local over-limit cache's answers (inline: one pass, no allocation on
   * the common path); stopIncrementProbe; count (fixed windows) beside evaluate (scripted rules); then
   * the statuses, with applyFailureModes and scriptedStatuses for what the store could not answer.
   * The same steps are open to a caller that awaits the store itself (start, then finish or complete).
   */
  async doLimit(
    domain: string,
    matches: readonly (LimitMatch | undefined)[],
    hits: readonly number[],
    decidedBy?: (FailureMode | undefined)[],
    negative?: readonly boolean[],
  ): Promise<WireDescriptorStatus[]> {
    const run = this.start(domain, matches, hits, negative);
    if (!run.sent) return this.complete(run, decidedBy);
    return this.finish(run, run.counting === undefined ? NO_COUNTS : await run.counting, decidedBy);
  }

  /**
   * doLimit's steps up to the store call. On the common path (no STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT
   * probe, no scripted rule) the fixed-window counts are sent too (`sent`; `counting` is their promise,
   * undefined when nothing goes to the store) and the caller hands what `counting` resolves to to
   * finish(); otherwise it calls complete(). The service awaits `counting` in its own async function,
   * so a decision suspends one frame, not two.
   */
  start(
    domain: string,
    matches: readonly (LimitMatch | undefined)[],
    hits: readonly number[],
    /** Per descriptor: its hits are a refund (is_negative_hits); undefined when none is. */
    negative?: readonly boolean[],
  ): LimitRun {
    const now = this.nowSeconds();
    const n = matches.length;
    const keys: (string | undefined)[] = new Array(n);
    // Allocated on the first descriptor the local over-limit cache answers (rare on the hot path).
    let localOver: boolean[] | undefined;
    let anyLocalOver = false;
    let keyCount = 0;
    let scripted: number[] | undefined;
    let refunds: number[] | undefined;

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
        (localOver ??= new Array<boolean>(n).fill(false))[i] = true;
        anyLocalOver = true;
      }
    }
    const run: LimitRun = {
      domain,
      matches,
      hits,
      now,
      keys,
      localOver,
      anyLocalOver,
      keyCount,
      scripted,
      refunds,
      ops: NO_OPS,
      opIndex: NO_INDEX,
      sent: false,
      counting: undefined,
    };
    if (!this.stopIncrementWhenOverlimit && scripted === undefined && refunds === undefined) {
      this.send(run, hits);
    }
    return run;
  }

  /** The rest of doLimit after start() when it did not send: the probe, the counts, the statuses. */
  async complete(run: LimitRun, decidedBy?: (FailureMode | undefined)[]): Promise<WireDescriptorStatus[]> {
    const { domain, matches, hits, scripted, refunds } = run;
    // Hits sent to the store per descriptor (STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT may zero some).
    const storeHits = this.stopIncrementWhenOverlimit
      ? await this.stopIncrementProbe(matches, run.keys, hits, run.anyLocalOver, run.keyCount)
      : hits;
    this.send(run, storeHits);
    // Settled into a value at once, so a failure of the counting above never leaves it unhandled.
    const verdicts = scripted
      ? this.evaluate(domain, matches, scripted, storeHits).then(
          (v) => v,
          (err: unknown) => (err instanceof Error ? err : new Error(String(err))),
        )
      : undefined;
    const refunding = refunds ? this.refund(run, refunds) : undefined;
    const counts = run.counting ? await run.counting : NO_COUNTS;
    const decided = verdicts ? await verdicts : undefined;
    const refunded = refunding ? await refunding : undefined;
    const statuses = this.finish(run, counts, decidedBy);
    if (scripted && decided !== undefined) {
      this.scriptedStatuses(statuses, domain, matches, scripted, decided, hits, run.now, decidedBy);
    }
    if (refunds && refunded !== undefined) this.refundStatuses(statuses, run, refunds, refunded, decidedBy);
    return statuses;
  }

  /** The fixed-window ops (all but the scripted ones and those the local cache answered), sent. */
  private send(run: LimitRun, storeHits: readonly number[]): void {
    const { matches, keys, localOver, keyCount } = run;
    const n = matches.length;
    // Sized once for the most ops there can be (an empty array's first push allocates room for 17),
    // then cut to the ops there are.
    const ops: CounterOp[] = new Array(keyCount);
    const opIndex: number[] = new Array(keyCount);
    let nOps = 0;
    for (let i = 0; i < n; i++) {
      const m = matches[i];
      if (!m || localOver?.[i] || m.rule.scripted || keys[i] === undefined) continue;
      let expire = m.rule.unitSeconds;
      if (this.jitterMax > 0) expire += Math.floor(this.random() * this.jitterMax);
      ops[nOps] = {
        key: keys[i]!,
        hits: storeHits[i],
        expireSeconds: expire,
        perSecond: m.rule.unit === 'SECOND',
      };
      opIndex[nOps++] = i;
    }
    if (nOps < keyCount) ops.length = opIndex.length = nOps;
    run.ops = ops;
    run.opIndex = opIndex;
    run.sent = true;
    run.counting = nOps > 0 ? this.count(ops) : undefined;
  }

  /**
   * The statuses of a run whose fixed-window counts are in (`counts`, in op order: what `counting`
   * resolved to); scripted descriptors are left to complete().
   */
  finish(
    run: LimitRun,
    counts: readonly (number | Error)[],
    decidedBy?: (FailureMode | undefined)[],
  ): WireDescriptorStatus[] {
    const { matches, keys, localOver, hits, now, ops, opIndex } = run;
    const n = matches.length;
    const statuses: WireDescriptorStatus[] = new Array(n);
    for (let i = 0; i < n; i++) if (!matches[i]) statuses[i] = { ...OK_NO_LIMIT };
    if (localOver !== undefined) {
      for (let i = 0; i < n; i++) {
        const m = matches[i];
        if (m && localOver[i]) statuses[i] = this.overLimitFromLocalCache(m, hits[i], now);
      }
    }
    for (let j = 0; j < opIndex.length; j++) {
      const i = opIndex[j];
      const c = counts[j];
      if (typeof c === 'number') statuses[i] = this.statusFromCount(matches[i]!, keys[i]!, c, hits[i], now);
    }
    this.applyFailureModes(statuses, matches, ops, opIndex, counts, hits, now, decidedBy);
    return statuses;
  }

  /**
   * The fixed-window counts the store failed: a cache failure is decided by the descriptor's failure
   * mode (`error` fails the request); any other failure (a key the store refuses) is the caller's error.
   */
  private applyFailureModes(
    statuses: WireDescriptorStatus[],
    matches: readonly (LimitMatch | undefined)[],
    ops: readonly CounterOp[],
    opIndex: readonly number[],
    counts: readonly (number | Error)[],
    hits: readonly number[],
    now: number,
    decidedBy: (FailureMode | undefined)[] | undefined,
  ): void {
    for (let j = 0; j < opIndex.length; j++) {
      const c = counts[j];
      if (typeof c === 'number') continue;
      const i = opIndex[j];
      const m = matches[i]!;
      // Not a cache failure (e.g. a key the store refuses): the caller's error, whatever the mode.
      if (!(c instanceof CacheError)) throw c;
      const mode = m.rule.failureMode ?? this.failure.mode;
      this.failureStats.byMode[mode].inc();
      if (mode === 'error') throw c;
      if (decidedBy) decidedBy[i] = mode;
      statuses[i] = this.failureModeStatus(mode, m, ops[j], hits[i], now);
    }
  }

  /** The scripted descriptors' statuses: the store's verdicts, or its failure through the failure modes. */
  private scriptedStatuses(
    statuses: WireDescriptorStatus[],
    domain: string,
    matches: readonly (LimitMatch | undefined)[],
    scripted: readonly number[],
    decided: LimitVerdict[] | Error,
    hits: readonly number[],
    now: number,
    decidedBy: (FailureMode | undefined)[] | undefined,
  ): void {
    if (decided instanceof Error) {
      // The store could not evaluate: the failure modes decide, as for fixed windows. `local` counts a
      // fixed window of the first limit's share in the pod (docs: degraded, not the algorithm).
      if (!(decided instanceof CacheError)) throw decided;
      for (const i of scripted) {
        const m = matches[i]!;
        const mode = m.rule.failureMode ?? this.failure.mode;
        this.failureStats.byMode[mode].inc();
        if (mode === 'error') throw decided;
        if (decidedBy) decidedBy[i] = mode;
        const op: CounterOp = {
          key: cacheKey(this.prefix, domain, m.keyEntries, m.rule.unitSeconds, now),
          hits: hits[i],
          expireSeconds: m.rule.unitSeconds,
          perSecond: m.rule.unit === 'SECOND',
        };
        statuses[i] = this.failureModeStatus(mode, m, op, hits[i], now);
      }
    } else {
      for (let j = 0; j < scripted.length; j++) {
        const i = scripted[j]!;
        statuses[i] = this.verdicts.status(matches[i]!, decided[j]!, hits[i]);
      }
    }
  }

  /**
   * STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT: the hits to send per descriptor. Once one descriptor is (or
   * is about to be, read with a zero-hit probe) over its limit, the others are not incremented (INCRBY 0).
   */
  private async stopIncrementProbe(
    matches: readonly (LimitMatch | undefined)[],
    keys: readonly (string | undefined)[],
    hits: readonly number[],
    anyLocalOver: boolean,
    keyCount: number,
  ): Promise<readonly number[]> {
    const n = matches.length;
    const changed = hits.slice();
    if (anyLocalOver) {
      for (let i = 0; i < n; i++) changed[i] = 0;
    } else if (keyCount > 1) {
      const probe: CounterOp[] = [];
      const probeIndex: number[] = [];
      for (let i = 0; i < n; i++) {
        const m = matches[i];
        if (!m || m.rule.scripted || keys[i] === undefined) continue;
        probe.push({ key: keys[i]!, hits: 0, expireSeconds: 0, perSecond: m.rule.unit === 'SECOND' });
        probeIndex.push(i);
      }
      let current: number[] = [];
      if (probe.length > 0) {
        try {
          current = await this.store.get(probe);
        } catch (err) {
          // Without the store the probe is skipped; the counts below fall to the failure modes.
          if (!(err instanceof CacheError) || this.anyModeError(matches)) throw err;
        }
      }
      for (let j = 0; j < probeIndex.length; j++) {
        const i = probeIndex[j];
        if (current.length > 0 && current[j] + hits[i] > matches[i]!.rule.requestsPerUnit) {
          for (let k = 0; k < n; k++) if (k !== i) changed[k] = 0;
          break;
        }
      }
    }
    return changed;
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

  /**
   * The refunds of a run, one store call for all of them: per refund its verdict (evaluate: scripted
   * rules, and fixed windows as a one-limit check on the reference's key), its count after the refund
   * (a store without evaluate, memcache: an op with negative hits), or its error.
   */
  private refund(run: LimitRun, refunds: readonly number[]): Promise<(LimitVerdict | number | Error)[]> {
    const { domain, matches, hits, now } = run;
    const store = this.store;
    if (store.evaluate !== undefined) {
      const nowMs = this.nowMs();
      const checks: LimitCheck[] = new Array(refunds.length);
      for (let j = 0; j < refunds.length; j++) {
        const i = refunds[j]!;
        const m = matches[i]!;
        const rule = m.rule;
        checks[j] = rule.scripted
          ? buildLimitCheck(taggedKeyBase(this.prefix, domain, m.keyEntries), rule, -hits[i]!, nowMs)
          : buildFixedWindowRefund(
              cacheKey(this.prefix, domain, m.keyEntries, rule.unitSeconds, now),
              rule.requestsPerUnit,
              rule.unitSeconds,
              rule.unit === 'SECOND',
              hits[i]!,
              nowMs,
            );
      }
      return storeCall(() => store.evaluate!(checks)).then(
        (v) => v,
        (err: unknown) => checks.map(() => (err instanceof Error ? err : new Error(String(err)))),
      );
    }
    const ops: CounterOp[] = new Array(refunds.length);
    for (let j = 0; j < refunds.length; j++) {
      const i = refunds[j]!;
      const m = matches[i]!;
      if (m.rule.scripted) {
        // The service refuses such configurations for this store at load.
        return Promise.resolve(
          refunds.map(() => new CacheError('the counter store cannot evaluate this rate limit algorithm')),
        );
      }
      ops[j] = {
        key: cacheKey(this.prefix, domain, m.keyEntries, m.rule.unitSeconds, now),
        hits: -hits[i]!,
        expireSeconds: m.rule.unitSeconds,
        perSecond: m.rule.unit === 'SECOND',
      };
    }
    return this.count(ops);
  }

  /**
   * The refunds' statuses: always OK, with what remains after the refund. A fixed-window key brought
   * back under its limit leaves this pod's local over-limit cache. A refund the store could not make is
   * decided by the failure mode: `error` fails the call, the others answer OK without counting.
   */
  private refundStatuses(
    statuses: WireDescriptorStatus[],
    run: LimitRun,
    refunds: readonly number[],
    results: readonly (LimitVerdict | number | Error)[],
    decidedBy: (FailureMode | undefined)[] | undefined,
  ): void {
    const { matches, now } = run;
    for (let j = 0; j < refunds.length; j++) {
      const i = refunds[j]!;
      const m = matches[i]!;
      const rule = m.rule;
      const r = results[j]!;
      if (r instanceof Error) {
        if (!(r instanceof CacheError)) throw r;
        const mode = rule.failureMode ?? this.failure.mode;
        this.failureStats.byMode[mode].inc();
        if (mode === 'error') throw r;
        if (decidedBy) decidedBy[i] = mode;
        statuses[i] = {
          code: 'OK',
          currentLimit: this.wireLimit(rule),
          limitRemaining: 0,
          durationUntilReset: { seconds: resetSeconds(rule.unitSeconds, now) },
        };
        continue;
      }
      if (rule.scripted) {
        statuses[i] = this.verdicts.refundStatus(m, r as LimitVerdict);
        continue;
      }
      const remaining =
        typeof r === 'number' ? Math.max(rule.requestsPerUnit - r, 0) : (r as LimitVerdict)[1]!;
      statuses[i] = {
        code: 'OK',
        currentLimit: this.wireLimit(rule),
        limitRemaining: remaining,
        durationUntilReset: { seconds: resetSeconds(rule.unitSeconds, now) },
      };
      if (this.localCache !== undefined) {
        this.refundedRules.add(rule);
        if (remaining > 0) {
          this.localCache.delete(cacheKey(this.prefix, run.domain, m.keyEntries, rule.unitSeconds, now));
        }
      }
    }
  }

  /** Counts per op, or the error of each op the store could not count. */
  private count(ops: readonly CounterOp[]): Promise<(number | Error)[]> {
    // Not async: the store's own promise is returned as is (one promise and two turns fewer per request).
    if (this.store.incrementEach) return this.store.incrementEach(ops);
    return storeCall(() => this.store.increment(ops)).then(undefined, (err: unknown) =>
      ops.map(() => err as Error),
    );
  }

  private anyModeError(matches: readonly (LimitMatch | undefined)[]): boolean {
    for (const m of matches) if (m && (m.rule.failureMode ?? this.failure.mode) === 'error') return true;
    return false;
  }

  /** The status of a descriptor its failure mode decides (allow, deny or local). */
  private failureModeStatus(
    mode: FailureMode,
    m: LimitMatch,
    op: CounterOp,
    hits: number,
    now: number,
  ): WireDescriptorStatus {
    const rule = m.rule;
    if (mode === 'local') {
      const after = this.localCounter.add(op.key, hits, op.expireSeconds);
      const share = localShare(rule.requestsPerUnit, this.failure.localPods);
      return this.statusFromCount(m, op.key, after, hits, now, share, false);
    }
    const rs = this.stats.ruleStats(m.statKey);
    const status: WireDescriptorStatus = {
      code: 'OK',
      currentLimit: this.wireLimit(rule),
      limitRemaining: 0,
      durationUntilReset: { seconds: resetSeconds(rule.unitSeconds, now) },
    };
    if (mode === 'allow') {
      // Nothing is known of the count: the whole limit is reported as remaining.
      status.limitRemaining = rule.requestsPerUnit;
      rs.withinLimit.inc(hits);
    } else {
      rs.overLimit.inc(hits);
      if (rule.shadowMode) rs.shadowMode.inc(hits);
      else status.code = 'OVER_LIMIT';
    }
    return status;
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
    overThreshold = m.rule.requestsPerUnit,
    remember = true,
  ): WireDescriptorStatus {
    const rule = m.rule;
    const rs = this.stats.ruleStats(m.statKey);
    const before = after - hits;
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
}

/** Seconds until the current window ends (the reference's CalculateReset). */
export function resetSeconds(unitSeconds: number, nowSeconds: number): number {
  return unitSeconds - (nowSeconds % unitSeconds);
}
