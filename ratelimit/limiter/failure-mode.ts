// What a decision does when its counter could not be counted (the store failed, timed out, or its
// circuit is open): the failure mode, global (CACHE_FAILURE_MODE) or per descriptor (`failure_mode`).
// The limiter only sees that a count is missing, never why.
//   error  the call fails as a cache error (UNAVAILABLE / 500): the reference's behaviour, the default
//   allow  OK
//   deny   OVER_LIMIT
//   local  counted in this process, against the limit divided by the pods serving the domain
import type { FailureMode, LimitMatch } from '../config/index.js';
import type { WireDescriptorStatus } from '../../proto/index.js';
import type { StatsStore, Counter } from '../stats/index.js';
import { DEFAULT_LOCAL_MAX_BYTES } from '../settings/index.js';
import { CacheError, keyBytes, type CounterOp } from '../counting/index.js';
import type { FixedWindows } from './fixed-window.js';

export interface FailureModeSettings {
  /** CACHE_FAILURE_MODE: for descriptors without their own `failure_mode`. */
  mode: FailureMode;
  /** CACHE_FAILURE_MODE_LOCAL_PODS: pods sharing a domain's traffic; each admits ceil(limit / pods). */
  localPods: number;
  /** CACHE_FAILURE_MODE_LOCAL_MAX_BYTES: budget of `local` mode's counters (default DEFAULT_LOCAL_MAX_BYTES). */
  localMaxBytes?: number;
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

/** Where a decision notes the failure mode that decided each descriptor the store could not count. */
export interface FailureNotes {
  /** By descriptor index; allocated with the first descriptor a failure mode decides. */
  decidedBy?: (FailureMode | undefined)[];
}

/**
 * The failure modes at work: for a descriptor whose count (or verdict, or refund) failed, the mode of
 * its rule or the global one decides, and is counted and noted in `notes.decidedBy[i]` when notes are given. Mode
 * `error`, and any failure that is not a cache failure (a key the store refuses: the caller's error),
 * throw the failure instead.
 */
export class FailureModes {
  private readonly byMode: Readonly<Record<FailureMode, Counter>>;
  /** `local` mode's counters. */
  private readonly local: LocalFallbackCounter;

  constructor(
    private readonly settings: FailureModeSettings,
    private readonly stats: StatsStore,
    private readonly windows: FixedWindows,
  ) {
    this.byMode = new FailureModeStats(stats).byMode;
    this.local = new LocalFallbackCounter(Date.now, settings.localMaxBytes);
  }

  /** A descriptor's status when its op could not be counted: allowed, denied, or counted in this pod. */
  decide(
    err: Error,
    m: LimitMatch,
    op: CounterOp,
    hits: number,
    now: number,
    i: number,
    notes: FailureNotes | undefined,
  ): WireDescriptorStatus {
    const mode = this.modeOf(err, m, i, notes);
    const rule = m.rule;
    if (mode === 'local') {
      const after = this.local.add(op.key, hits, op.expireSeconds);
      const share = localShare(rule.requestsPerUnit, this.settings.localPods);
      return this.windows.fromCount(m, op.key, after, hits, now, share, false);
    }
    const rs = this.stats.ruleStats(m.statKey);
    if (mode === 'allow') {
      // Nothing is known of the count: the whole limit is reported as remaining.
      rs.withinLimit.inc(hits);
      return this.windows.withLimit(rule, now, rule.requestsPerUnit);
    }
    const status = this.windows.withLimit(rule, now, 0);
    rs.overLimit.inc(hits);
    if (rule.shadowMode) rs.shadowMode.inc(hits);
    else status.code = 'OVER_LIMIT';
    return status;
  }

  /** A refund the store could not make: OK without counting (whatever the mode, `error` aside). */
  decideRefund(
    err: Error,
    m: LimitMatch,
    now: number,
    i: number,
    notes: FailureNotes | undefined,
  ): WireDescriptorStatus {
    this.modeOf(err, m, i, notes);
    return this.windows.withLimit(m.rule, now, 0);
  }

  /** Whether any of the descriptors fails the call when its count fails (mode `error`). */
  anyError(matches: readonly (LimitMatch | undefined)[]): boolean {
    for (const m of matches) if (m && (m.rule.failureMode ?? this.settings.mode) === 'error') return true;
    return false;
  }

  private modeOf(
    err: Error,
    m: LimitMatch,
    i: number,
    notes: FailureNotes | undefined,
  ): Exclude<FailureMode, 'error'> {
    // Not a cache failure (e.g. a key the store refuses): the caller's error, whatever the mode.
    if (!(err instanceof CacheError)) throw err;
    const mode = m.rule.failureMode ?? this.settings.mode;
    this.byMode[mode].inc();
    if (mode === 'error') throw err;
    if (notes) (notes.decidedBy ??= [])[i] = mode;
    return mode;
  }
}

/** The pod's share of a limit in `local` mode: ceil, so a small limit is never rounded to zero. */
export function localShare(requestsPerUnit: number, pods: number): number {
  return pods <= 1 ? requestsPerUnit : Math.ceil(requestsPerUnit / pods);
}

interface Slot {
  count: number;
  expiresAtMs: number;
  /** Bytes accounted for this entry (LocalFallbackCounter.entryBytes). */
  bytes: number;
}

/**
 * Heap bytes of one entry besides its key's characters: the Map's entry and hash table share, the Slot
 * object, the key string's header (and the cons string it was flattened from). Measured in
 * failure-mode.test.ts (heap used per entry stays below what is accounted).
 */
const ENTRY_OVERHEAD_BYTES = 160;

/**
 * The in-memory counters of `local` mode: the same keys and windows as the store, so a key counted
 * here during an outage is the same window the store counts once it is back (the two are not merged).
 *
 * Keys are built from request values, so the table is bounded in bytes (maxBytes: each entry costs
 * its key's characters, 1 byte each for Latin-1 keys and 2 otherwise, plus ENTRY_OVERHEAD_BYTES).
 * Expired windows are dropped first (a sweep every 4096 new keys, and at most once a second when the
 * budget is full); when a new key still does not fit, the oldest keys (by the time their window
 * started here) are evicted until it does. An evicted key that comes back starts from 0 in this pod,
 * so under pressure a pod may admit more than its share for the keys evicted, never fewer. A key larger than the whole budget is not kept: its count is the
 * hits of the request alone.
 */
export class LocalFallbackCounter {
  private readonly slots = new Map<string, Slot>();
  private sinceSweep = 0;
  private lastSweepMs = -Infinity;
  private usedBytes = 0;

  constructor(
    private readonly nowMs: () => number = Date.now,
    readonly maxBytes: number = DEFAULT_LOCAL_MAX_BYTES,
  ) {}

  get size(): number {
    return this.slots.size;
  }

  /** Bytes accounted for the entries held, never above maxBytes. */
  get bytes(): number {
    return this.usedBytes;
  }

  add(key: string, hits: number, expireSeconds: number): number {
    const now = this.nowMs();
    let s = this.slots.get(key);
    if (s === undefined || s.expiresAtMs <= now) {
      if (s !== undefined) this.remove(key, s);
      if (++this.sinceSweep >= 4096) this.sweep(now);
      const bytes = entryBytes(key);
      if (bytes > this.maxBytes) return hits;
      if (this.usedBytes + bytes > this.maxBytes) {
        // A full sweep costs one pass over the table: at most once a second under pressure.
        if (now - this.lastSweepMs >= 1000) this.sweep(now);
        for (const [k, old] of this.slots) {
          if (this.usedBytes + bytes <= this.maxBytes) break;
          this.remove(k, old);
        }
      }
      s = { count: 0, expiresAtMs: now + expireSeconds * 1000, bytes };
      this.slots.set(key, s);
      this.usedBytes += bytes;
    }
    s.count += hits;
    return s.count;
  }

  private remove(key: string, s: Slot): void {
    this.slots.delete(key);
    this.usedBytes -= s.bytes;
  }

  private sweep(now: number): void {
    this.sinceSweep = 0;
    this.lastSweepMs = now;
    for (const [k, s] of this.slots) if (s.expiresAtMs <= now) this.remove(k, s);
  }
}

/** Accounted bytes of one entry: see LocalFallbackCounter. */
function entryBytes(key: string): number {
  return ENTRY_OVERHEAD_BYTES + keyBytes(key);
}
