// Fleet-wide demand: with several ratelimit pods, each Envoy talks to one of them, so no pod sees the
// whole demand of a bucket. Per bucket and per window of RLQS_REPORTING_INTERVAL on the wall clock
// (floor(now / window), so pods agree on windows without talking to each other), every pod serving the
// bucket adds its Envoys' demand to one counter, its guaranteed demand (allocator.ts guaranteedDemand) to
// a second and its subscribers to a third, and marks itself present (with or without a demand sample) in
// another, in the counter store (the same store, circuit breaker and connection the limiter
// counts in). Each pod then reads the window's totals and takes its part of the budget from them
// (allocator.ts podFraction): all pods read the same numbers, so their parts add up to at most the budget.
//
// Timing within a window of length W (the pass runs every W/4): a pod adds in the middle half
// [W/4, 3W/4) and reads the window in its last quarter, so every add lands at least a pass before any
// read, and the part read at the end of window k (demand as reported up to the middle of k) serves window
// k+1. A pod that missed its read reads the last complete window at its next pass; a pod new to a bucket
// reads at once (the last complete window, or the current one in its last quarter).
import { MAX_OP_HITS, type CounterOp, type CounterStore } from '../counting/index.js';
import type { FleetView } from './allocator.js';

/** Demand is stored as an integer: requests per second times this. */
export const DEMAND_SCALE = 1000;
/** The presence counter: a pod with a demand sample adds 1, one without adds this (1 + one unsampled). */
export const PRESENCE_UNSAMPLED = 1_000_001;
const PRESENCE_UNIT = 1_000_000;

/** What a pod knows of one bucket's fleet demand. */
export interface FleetState {
  /** Window this pod last added to, what it added (scaled demand) and whether it had a sample. */
  addedWindow: number;
  added: number;
  addedGuaranteed: number;
  addedSampled: boolean;
  /** The same for the window it added to before that. */
  previousWindow: number;
  previousAdded: number;
  previousGuaranteed: number;
  previousSampled: boolean;
  /** Last window read (-1: none). */
  readWindow: number;
  /** What that read showed; undefined: unknown (not read yet, the store failed, or the window was empty). */
  view: FleetView | undefined;
  /** An exchange of this bucket is in flight. */
  busy: boolean;
}

export function newFleetState(): FleetState {
  return {
    addedWindow: -1,
    added: 0,
    addedGuaranteed: 0,
    addedSampled: false,
    previousWindow: -1,
    previousAdded: 0,
    previousGuaranteed: 0,
    previousSampled: false,
    readWindow: -1,
    view: undefined,
    busy: false,
  };
}

export interface FleetBucket {
  /** Counter key (without the window) of the bucket, already prefixed. */
  readonly fleetKey: string;
  readonly fleet: FleetState;
  /** This pod's current demand (requests per second). */
  localDemand(): number;
  /** This pod's guaranteed demand (requests per second, allocator.ts guaranteedDemand). */
  guaranteed(): number;
  /** This pod's subscribers. */
  readonly subscribers: number;
  /** Whether any of this pod's subscribers has a demand sample. */
  sampled(): boolean;
}

/** The other pods' demand in the window read (requests per second), for the debug endpoint. */
export function othersDemand(f: FleetState): number | undefined {
  const v = f.view;
  if (v === undefined) return undefined;
  return Math.max(0, v.demand - (typeof v.mine === 'number' ? v.mine : 0));
}

export class FleetDemand {
  constructor(
    private readonly store: CounterStore,
    private readonly windowMs: number,
  ) {}

  windowOf(nowMs: number): number {
    return Math.floor(nowMs / this.windowMs);
  }

  /**
   * Adds this pod's demand and presence to the current window when due, and reads the window due (see
   * the top of the file), for each bucket not already being exchanged. Resolves to the buckets whose
   * view was read (their parts may have moved) and whether the store answered (on a failure their view
   * is unknown and the read is retried at the next pass).
   */
  async exchange(
    buckets: readonly FleetBucket[],
    nowMs: number,
  ): Promise<{ ok: boolean; read: FleetBucket[] }> {
    const w = this.windowOf(nowMs);
    const phase = nowMs - w * this.windowMs;
    const addable = phase >= this.windowMs / 4 && phase < (3 * this.windowMs) / 4;
    const readTarget = phase >= (3 * this.windowMs) / 4 ? w : w - 1;
    const expireSeconds = Math.max(1, Math.ceil((3 * this.windowMs) / 1000));
    const adds: CounterOp[] = [];
    const reads: CounterOp[] = [];
    const readers: FleetBucket[] = [];
    const involved: FleetBucket[] = [];
    for (const b of buckets) {
      const f = b.fleet;
      if (f.busy) continue;
      const add = addable && f.addedWindow !== w;
      const read = f.readWindow < readTarget;
      if (!add && !read) continue;
      f.busy = true;
      involved.push(b);
      if (add) {
        const sampled = b.sampled();
        const v = sampled ? Math.min(MAX_OP_HITS, Math.round(b.localDemand() * DEMAND_SCALE)) : 0;
        const g = sampled ? Math.min(v, Math.round(b.guaranteed() * DEMAND_SCALE)) : 0;
        // hits 0 would only read: a pod without demand adds none (the key may not exist; it reads 0).
        if (v > 0) adds.push({ key: `${b.fleetKey}_${w}`, hits: v, expireSeconds, perSecond: false });
        if (g > 0) adds.push({ key: `${b.fleetKey}_g_${w}`, hits: g, expireSeconds, perSecond: false });
        if (b.subscribers > 0) {
          const n = Math.min(MAX_OP_HITS, b.subscribers);
          adds.push({ key: `${b.fleetKey}_n_${w}`, hits: n, expireSeconds, perSecond: false });
        }
        adds.push({
          key: `${b.fleetKey}_p_${w}`,
          hits: sampled ? 1 : PRESENCE_UNSAMPLED,
          expireSeconds,
          perSecond: false,
        });
        f.previousWindow = f.addedWindow;
        f.previousAdded = f.added;
        f.previousGuaranteed = f.addedGuaranteed;
        f.previousSampled = f.addedSampled;
        f.addedWindow = w;
        f.added = v;
        f.addedGuaranteed = g;
        f.addedSampled = sampled;
      }
      if (read) {
        readers.push(b);
        reads.push({ key: `${b.fleetKey}_${readTarget}`, hits: 0, expireSeconds, perSecond: false });
        reads.push({ key: `${b.fleetKey}_p_${readTarget}`, hits: 0, expireSeconds, perSecond: false });
        reads.push({ key: `${b.fleetKey}_g_${readTarget}`, hits: 0, expireSeconds, perSecond: false });
        reads.push({ key: `${b.fleetKey}_n_${readTarget}`, hits: 0, expireSeconds, perSecond: false });
      }
    }
    if (involved.length === 0) return { ok: true, read: [] };
    try {
      // Adds before reads: a pod adding and reading the same window in one pass (never, by the timing
      // above, but cheap to keep right) sees its own addition.
      if (adds.length > 0) await this.store.increment(adds);
      const totals = reads.length > 0 ? await this.store.get(reads) : [];
      for (let i = 0; i < readers.length; i++) {
        const f = readers[i]!.fleet;
        const presence = totals[4 * i + 1] ?? 0;
        const pods = presence % PRESENCE_UNIT;
        f.readWindow = readTarget;
        if (pods <= 0) {
          // An empty window (the fleet just started, or the store lost it) says nothing of the others.
          f.view = undefined;
          continue;
        }
        const mine =
          f.addedWindow === readTarget
            ? { v: f.added, g: f.addedGuaranteed, s: f.addedSampled }
            : f.previousWindow === readTarget
              ? { v: f.previousAdded, g: f.previousGuaranteed, s: f.previousSampled }
              : undefined;
        // A pod that served the bucket before but missed adding to this window (a late pass) keeps what
        // it read last: the others' parts do not count it, but denying its Envoys for a window of our own
        // lateness would be worse; one new to the bucket waits for the window it is counted in.
        if (mine === undefined && f.view !== undefined && f.view.mine !== 'absent') continue;
        f.view = {
          demand: (totals[4 * i] ?? 0) / DEMAND_SCALE,
          guaranteed: (totals[4 * i + 2] ?? 0) / DEMAND_SCALE,
          subscribers: totals[4 * i + 3] ?? 0,
          pods,
          unsampled: Math.floor(presence / PRESENCE_UNIT),
          mine: mine === undefined ? 'absent' : mine.s ? mine.v / DEMAND_SCALE : 'unsampled',
          mineGuaranteed: mine?.s ? mine.g / DEMAND_SCALE : 0,
        };
      }
      return { ok: true, read: readers };
    } catch {
      // Unknown until a read succeeds (retried at the next pass; an addition is not repeated, it may
      // have landed).
      for (const b of readers) b.fleet.view = undefined;
      return { ok: false, read: readers };
    } finally {
      for (const b of involved) b.fleet.busy = false;
    }
  }
}
