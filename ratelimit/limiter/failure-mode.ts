// What a decision does when its counter could not be counted (the store failed, timed out, or its
// circuit is open): the failure mode, global (CACHE_FAILURE_MODE) or per descriptor (`failure_mode`).
// The limiter only sees that a count is missing, never why.
//   error  the call fails as a cache error (UNAVAILABLE / 500): the reference's behaviour, the default
//   allow  OK
//   deny   OVER_LIMIT
//   local  counted in this process, against the limit divided by the pods serving the domain
import type { FailureMode } from '../config/index.js';
import type { StatsStore, Counter } from '../stats/index.js';

export interface FailureModeSettings {
  /** CACHE_FAILURE_MODE: for descriptors without their own `failure_mode`. */
  mode: FailureMode;
  /** CACHE_FAILURE_MODE_LOCAL_PODS: pods sharing a domain's traffic; each admits ceil(limit / pods). */
  localPods: number;
}

export const DEFAULT_FAILURE_MODE: FailureModeSettings = Object.freeze({ mode: 'error', localPods: 1 });

/** ratelimit.service.failure_mode.<mode>: descriptors decided by each failure mode. */
export class FailureModeStats {
  readonly byMode: Readonly<Record<FailureMode, Counter>>;
  constructor(stats: StatsStore) {
    const p = 'ratelimit.service.failure_mode.';
    this.byMode = {
      error: stats.counter(p + 'error'),
      allow: stats.counter(p + 'allow'),
      deny: stats.counter(p + 'deny'),
      local: stats.counter(p + 'local'),
    };
  }
}

/** The pod's share of a limit in `local` mode: ceil, so a small limit is never rounded to zero. */
export function localShare(requestsPerUnit: number, pods: number): number {
  return pods <= 1 ? requestsPerUnit : Math.ceil(requestsPerUnit / pods);
}

interface Slot {
  count: number;
  expiresAtMs: number;
}

/** Most keys kept in memory by `local` mode; the oldest are dropped past it (their windows restart). */
const MAX_LOCAL_KEYS = 1_000_000;

/**
 * The in-memory counters of `local` mode: the same keys and windows as the store, so a key counted
 * here during an outage is the same window the store counts once it is back (the two are not merged).
 */
export class LocalFallbackCounter {
  private readonly slots = new Map<string, Slot>();
  private sinceSweep = 0;

  constructor(private readonly nowMs: () => number = Date.now) {}

  get size(): number {
    return this.slots.size;
  }

  add(key: string, hits: number, expireSeconds: number): number {
    const now = this.nowMs();
    let s = this.slots.get(key);
    if (s === undefined || s.expiresAtMs <= now) {
      if (++this.sinceSweep >= 4096) this.sweep(now);
      if (this.slots.size >= MAX_LOCAL_KEYS) this.slots.delete(this.slots.keys().next().value as string);
      s = { count: 0, expiresAtMs: now + expireSeconds * 1000 };
      this.slots.delete(key);
      this.slots.set(key, s);
    }
    s.count += hits;
    return s.count;
  }

  private sweep(now: number): void {
    this.sinceSweep = 0;
    for (const [k, s] of this.slots) if (s.expiresAtMs <= now) this.slots.delete(k);
  }
}
