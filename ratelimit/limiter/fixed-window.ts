// The face of the fixed windows that the steps beside the fixed-window path use (failure modes,
// refunds, rules with another algorithm, the stop-increment probe). The fixed windows live with the
// decision in limiter.ts, so that a decision on the common path runs in that one file; the steps
// beside it are given this face instead of importing limiter.ts, which keeps them below it.
import type { LimitMatch, RateLimitRule } from '../config/index.js';
import type { WireDescriptorStatus } from '../../proto/index.js';
import type { CounterOp } from '../counting/index.js';

export interface FixedWindows {
  readonly prefix: string;
  /** The cache key of a descriptor's current window (cacheKey). */
  key(domain: string, m: LimitMatch, nowSeconds: number): string;
  /**
   * The status and rule statistics of `hits` that brought a window to `after`, against `overThreshold`
   * (the rule's limit unless given); an over-limit key goes to the local over-limit cache if `remember`.
   */
  fromCount(
    m: LimitMatch,
    key: string,
    after: number,
    hits: number,
    nowSeconds: number,
    overThreshold?: number,
    remember?: boolean,
  ): WireDescriptorStatus;
  /** An OK status reporting the rule's limit, `remaining` and the time to the window's end. */
  withLimit(rule: RateLimitRule, nowSeconds: number, remaining: number): WireDescriptorStatus;
  /**
   * A refund answered on a descriptor's fixed window: the rule's keys stay in the local over-limit
   * cache REFUNDED_LOCAL_CACHE_SECONDS at most, and this key leaves it when back under its limit.
   */
  refunded(domain: string, m: LimitMatch, nowSeconds: number, remaining: number): void;
  /** Counts per op, or the error of each op the store could not count. */
  count(ops: readonly CounterOp[]): Promise<(number | Error)[]>;
}
