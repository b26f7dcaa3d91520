// The counter-store contract between the limiter and a backend (Redis, memcache, memory): fixed-window
// counters incremented by key (increment), and the other algorithms decided atomically per descriptor
// (evaluate, algorithms.ts). The layers of counting/ implement it over a backend; counter-stack.ts
// stacks them.

/** The limits of one descriptor for one request, as sent to the store (and to the script). */
export interface LimitCheck {
  /** Per limit in order: fixed_window 1 key, sliding_window 2 (current, previous), token_bucket 1. */
  readonly keys: string[];
  /** [nowMs, hits, then per limit: algorithm code, requests per unit, period ms, burst]. */
  readonly args: number[];
  /** Every limit is SECOND: routed to the per-second deployment when one is configured. */
  readonly perSecond: boolean;
}

/**
 * The store's answer for one LimitCheck, flat as the script returns it:
 * [rejectedBy, then per limit: remaining, ms until fully replenished, then per limit: ms until more than
 * that remaining is available with no other hit (0: nothing to wait for, the limit holds nothing or is
 * 0)]. rejectedBy is 0 when the hit was admitted (and counted), else 1 + the index of the first limit
 * that rejected it (nothing counted). Remaining values are after counting when admitted, before
 * otherwise. Limit i's numbers are at 1 + 2i, 2 + 2i and 1 + 2n + i (moreMsAt).
 */
export type LimitVerdict = number[];

/** Where a verdict of n limits holds limit i's ms until more quota is available. */
export function moreMsAt(n: number, i: number): number {
  return 1 + 2 * n + i;
}

export interface CounterOp {
  /** Full cache key, byte-compatible with the reference service. */
  readonly key: string;
  /** Hits to add (0 reads the current value without counting). */
  readonly hits: number;
  /** Expiry in seconds, set on every increment as the reference does. */
  readonly expireSeconds: number;
  /** True for SECOND-unit limits: routed to the per-second store when one is configured. */
  readonly perSecond: boolean;
}

/** One shard's share of a flush: its counter ops and its checks, with the shard they live on. */
export interface ShardBatch {
  /** shardOf of every op and check in it ('' for a store without shards). */
  readonly shard: string;
  readonly ops: readonly CounterOp[];
  readonly checks: readonly LimitCheck[];
}

/** Per op its count and per check its verdict, in order, or that item's own error. */
export interface BatchResults {
  readonly counts: (number | Error)[];
  readonly verdicts: (LimitVerdict | Error)[];
}

export interface CounterStore {
  /** Adds each op's hits and returns the counts after the increment, in op order. */
  increment(ops: readonly CounterOp[]): Promise<number[]>;
  /**
   * Optional: like increment, but settles each op on its own (a count, or the error of the part that
   * failed), so one failing shard (a cluster master in failover) fails only the callers whose keys live
   * there. The coalescing layer uses it to keep a merged batch's blast radius per key.
   */
  incrementEach?(ops: readonly CounterOp[]): Promise<(number | Error)[]>;
  /**
   * Optional: decides each descriptor's limits atomically (algorithms.ts: sliding window, token
   * bucket, several limits), one verdict per check in order. A store without it cannot enforce those
   * configurations, and the service refuses them at load. A decorator forwards it only when its inner
   * store has it.
   */
  evaluate?(checks: readonly LimitCheck[]): Promise<LimitVerdict[]>;
  /**
   * Optional: like evaluate, but settles each check on its own (its verdict, or the error of that check
   * alone), so the checks of several requests sent together (coalescing.ts) fail only their own request
   * when Redis refuses one of them. Present only where evaluate is.
   */
  evaluateEach?(checks: readonly LimitCheck[]): Promise<(LimitVerdict | Error)[]>;
  /**
   * Optional: names the shard (deployment, cluster master) holding a key. The batcher (coalescing.ts)
   * asks once per op and check, sends each shard its own batch, and hands the name down with it, so a
   * slow or dead shard never delays another shard's decisions.
   */
  shardOf?(key: string, perSecond: boolean): string;
  /**
   * Optional: sends one shard's batch (the batcher's flush) and settles each op and check on its own:
   * never rejects, a failure of the whole call is every item's error.
   */
  send?(batch: ShardBatch): Promise<BatchResults>;
  /** Current counts (0 when absent), without counting. */
  get(ops: readonly CounterOp[]): Promise<number[]>;
  /**
   * Optional: connects, waiting (and logging what for) until the cache answers; the service opens no
   * port before it resolves. Stores without a connection (memory) leave it out.
   */
  start?(): Promise<void>;
  /** False while the store has no usable connection. */
  isHealthy(): boolean;
  close(): Promise<void>;
}

/**
 * A key the backend cannot store (memcached's key rules): the caller's descriptor is at fault, not the
 * store, so the service answers it as an invalid request and no failure mode applies.
 */
export class KeyRejectedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'KeyRejectedError';
  }
}

/** A counter store failure: answered as an error and counted as should_rate_limit.redis_error. */
export class CacheError extends Error {
  constructor(
    message: string,
    override readonly cause?: unknown,
  ) {
    super(message);
    this.name = 'CacheError';
  }
}

/**
 * The most hits one counter op adds: an op's hits (and the hits the coalescing layer merges into one op)
 * saturate here. It is above the largest requests_per_unit (2^32 - 1), so a saturated op decides exactly
 * as the unsaturated one would (over limit), and a counter grows by at most this much per increment: a
 * key would need 2^31 saturated increments in one window to reach Redis's 64-bit integer range, and
 * counts stay exact as JS numbers (below 2^53) for 2^21 of them.
 */
export const MAX_OP_HITS = 2 ** 32;

/**
 * The count handed back for a counter the store refused to increment any further (Redis's "increment or
 * decrement would overflow"): that key is far past any limit, so it is over limit, for that key only.
 */
export const SATURATED_COUNT = Number.MAX_SAFE_INTEGER;

/**
 * The store refused one op because of its own key or data (a Redis error reply such as WRONGTYPE or
 * `ERR ...`), not because the store is unreachable: it fails that op only, and never counts against its
 * shard's circuit breaker. Still a CacheError, so the op's failure mode answers it.
 */
export class CounterRefusedError extends CacheError {
  constructor(message: string, cause?: unknown) {
    super(message, cause);
    this.name = 'CounterRefusedError';
  }
}

/**
 * The store did not send the call: the connection it would go on already has its bound of commands
 * waiting for an answer (REDIS_MAX_OUTSTANDING_COMMANDS). Answered by the failure mode at once. Not the
 * shard's failure and not its answer: the circuit breaker counts it as neither (the calls waiting on
 * the shard settle its circuit when they time out or are answered).
 */
export class CacheBusyError extends CacheError {
  constructor(message: string) {
    super(message);
    this.name = 'CacheBusyError';
  }
}

/**
 * Whether a failed op counts against its shard's circuit: everything but a refusal of the op's own
 * data and a call not sent because too many wait (CacheBusyError, which counts as nothing).
 */
export function isShardFailure(err: unknown): boolean {
  return !(err instanceof CounterRefusedError || err instanceof CacheBusyError);
}

/**
 * A store call's promise, also when the store throws instead of rejecting: the layers and the limiter
 * that call a store handle one failure path, and a throw never escapes the callback that made the call
 * (where it would leave that call's callers waiting).
 */
export function storeCall<T>(call: () => Promise<T>): Promise<T> {
  try {
    return call();
  } catch (err) {
    return Promise.reject(err);
  }
}

/** The values, or the first item's error as the whole call's (increment's and evaluate's contract). */
export function allOrFirstError<T>(results: (T | Error)[]): T[] {
  for (let i = 0; i < results.length; i++) {
    const r = results[i];
    if (r instanceof Error) throw r;
  }
  return results as T[];
}

/** Every item of a batch failed with one error. */
export function failedBatch(batch: ShardBatch, err: Error, checkErr: Error = err): BatchResults {
  return {
    counts: new Array<Error>(batch.ops.length).fill(err),
    verdicts: new Array<Error>(batch.checks.length).fill(checkErr),
  };
}
