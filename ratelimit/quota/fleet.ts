// Fleet-wide demand: with several ratelimit pods, each Envoy talks to one of them, so no pod sees the
// whole demand of a bucket. Every pod adds its Envoys' demand into a per-window counter in the counter
// store (the same store, circuit breaker and connection the limiter counts in), once per window, and
// reads the previous window's total: the others' demand is that total minus what this pod added, and a
// pod's part of the budget is what it added over that total (allocator.ts), so the parts add up. Windows
// are wall-clock (floor(now / window)), so pods agree on them without talking to each other.
//
// A pod adds a window's value within its first quarter (the tick runs every quarter window), so by the
// time any pod reads window k-1 (at its first tick of window k) every live pod has added to it.
// While the store fails, and while the last window holds no demand at all (no pod had a sample yet),
// `othersDemand` is undefined, and the allocator gives the pod budget / RLQS_EXPECTED_PODS.
import { MAX_OP_HITS, type CounterOp, type CounterStore } from '../counting/index.js';

/** Demand is stored as an integer: requests per second times this. */
export const DEMAND_SCALE = 1000;

/** What a pod knows of one bucket's fleet demand. */
export interface FleetState {
  /** Window this pod last added to, and how much (scaled). */
  addedWindow: number;
  added: number;
  /** What it added to the window before that (scaled): its own part of the total it read. */
  previousAdded: number;
  /** Requests per second of the other pods in the last complete window; undefined: unknown. */
  othersDemand: number | undefined;
  /** Requests per second this pod added to that same window (0: none). */
  ownDemand: number;
}

export function newFleetState(): FleetState {
  return { addedWindow: -1, added: 0, previousAdded: 0, othersDemand: undefined, ownDemand: 0 };
}

export interface FleetBucket {
  /** Counter key (without the window) of the bucket, already prefixed. */
  readonly fleetKey: string;
  readonly fleet: FleetState;
  /** This pod's current demand (requests per second). */
  localDemand(): number;
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
   * Once per window per bucket: adds this pod's demand to the window's counter and reads the previous
   * window's total. Resolves true when the store answered, false when it failed (state left unknown).
   */
  async exchange(buckets: readonly FleetBucket[], nowMs: number): Promise<boolean> {
    const window = this.windowOf(nowMs);
    const due = buckets.filter((b) => b.fleet.addedWindow !== window);
    if (due.length === 0) return true;
    const expireSeconds = Math.max(1, Math.ceil((3 * this.windowMs) / 1000));
    const adds: CounterOp[] = [];
    const reads: CounterOp[] = [];
    const values: number[] = [];
    for (const b of due) {
      const v = Math.min(MAX_OP_HITS, Math.round(b.localDemand() * DEMAND_SCALE));
      values.push(v);
      // hits 0 would only read: a pod without demand adds nothing (the key may not exist; it reads 0).
      adds.push({ key: `${b.fleetKey}_${window}`, hits: Math.max(v, 0), expireSeconds, perSecond: false });
      reads.push({ key: `${b.fleetKey}_${window - 1}`, hits: 0, expireSeconds, perSecond: false });
    }
    for (let i = 0; i < due.length; i++) {
      const f = due[i]!.fleet;
      f.previousAdded = f.addedWindow === window - 1 ? f.added : 0;
      f.addedWindow = window;
      f.added = values[i]!;
    }
    try {
      const toAdd = adds.filter((op) => op.hits > 0);
      const [, totals] = await Promise.all([
        toAdd.length > 0 ? this.store.increment(toAdd) : Promise.resolve([]),
        this.store.get(reads),
      ]);
      for (let i = 0; i < due.length; i++) {
        const f = due[i]!.fleet;
        const total = totals[i] ?? 0;
        // An empty window (no pod had a demand sample: the fleet just started) says nothing of the
        // others; read as 0, every pod would take the whole budget for a window.
        f.othersDemand = total > 0 ? Math.max(0, total - f.previousAdded) / DEMAND_SCALE : undefined;
        f.ownDemand = f.previousAdded / DEMAND_SCALE;
      }
      return true;
    } catch {
      for (const b of due) b.fleet.othersDemand = undefined;
      return false;
    }
  }
}
