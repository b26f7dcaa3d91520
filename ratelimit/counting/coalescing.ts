// Coalesces concurrent increments of one key into a single INCRBY: increments requested together are
// merged per key and all keys go to the store in one call (one pipeline). "Together" depends on load
// (turn.ts): the current callback's increments when no store call of ours is in flight, the whole
// event-loop turn's while one is, which is where merging pays.
// Each caller still gets its own exact count: n hits on a key that reaches total T are handed
// T-n+1 ... T in arrival order, so decisions are identical to counting one request at a time.
// A hot key then costs one INCRBY + EXPIRE per turn instead of per request.
// The merged hits saturate at MAX_OP_HITS (store.ts): more than any limit, so every caller past it is over
// limit as it would be unmerged, and no sum of callers' hits reaches Redis's integer range or loses
// precision as a JS number. One caller's huge hits thus cannot make the turn's INCRBY fail for the others.
// A refund (an op with negative hits) is never merged: the store floors it at 0, so a refund merged with
// increments would return less (or more) than it asked. It goes out in the same flush, as its own op.
import { CheckBatcher } from './check-batcher.js';
import { scheduleTurnFlush } from './turn.js';
import {
  MAX_OP_HITS,
  storeCall,
  type CounterOp,
  type CounterStore,
  type LimitCheck,
  type LimitVerdict,
} from './store.js';

interface Waiter {
  readonly index: number;
  /** Hits of this batch up to and including this op (its count is base + upto). */
  readonly upto: number;
  readonly request: PendingRequest;
}

interface PendingRequest {
  results: (number | Error)[];
  remaining: number;
  /** incrementEach: a failed key settles its own op with the error instead of rejecting the request. */
  each: boolean;
  resolve: (counts: (number | Error)[]) => void;
  reject: (err: unknown) => void;
  settled: boolean;
}

interface Batch {
  key: string;
  hits: number;
  expireSeconds: number;
  perSecond: boolean;
  waiters: Waiter[];
}

export class CoalescingCounterStore implements CounterStore {
  private pending = new Map<string, Batch>();
  /** Refunds (negative hits) of this turn, each its own op. */
  private refunds: Batch[] = [];
  private scheduled = false;
  /** Store calls sent and not yet settled. */
  private inFlight = 0;
  /** Store calls made and increments merged into them (for tests and the benchmark). */
  readonly counters = { flushes: 0, opsIn: 0, opsOut: 0 };
  /** The turn's flush, bound once (not a new closure per turn). */
  private readonly flushBound = (): void => this.flush();

  /**
   * Scripted limits are not coalesced: admission is all or nothing per hit, so k merged hits of which
   * only some fit cannot become one call with one count. They are batched per turn (check-batcher.ts).
   */
  readonly evaluate?: (checks: readonly LimitCheck[]) => Promise<LimitVerdict[]>;

  constructor(private readonly inner: CounterStore) {
    if (inner.evaluate) {
      const batcher = new CheckBatcher(inner);
      this.evaluate = (checks) => batcher.evaluate(checks);
    }
    // Per-check settlement is used inside (the batcher); callers above get one answer per request.
  }

  increment(ops: readonly CounterOp[]): Promise<number[]> {
    return this.enqueue(ops, false) as Promise<number[]>;
  }

  /** Per-op settlement: a key whose store call failed yields its error, the others their counts. */
  incrementEach(ops: readonly CounterOp[]): Promise<(number | Error)[]> {
    return this.enqueue(ops, true);
  }

  private enqueue(ops: readonly CounterOp[], each: boolean): Promise<(number | Error)[]> {
    if (ops.length === 0) return Promise.resolve([]);
    return new Promise<(number | Error)[]>((resolve, reject) => {
      const request: PendingRequest = {
        results: new Array<number>(ops.length),
        remaining: ops.length,
        each,
        resolve,
        reject,
        settled: false,
      };
      for (let i = 0; i < ops.length; i++) {
        const op = ops[i];
        if (op.hits < 0) {
          const waiter: Waiter = { index: i, upto: op.hits, request };
          this.refunds.push({ ...op, waiters: [waiter] });
          continue;
        }
        const b = this.pending.get(op.key);
        if (b === undefined) {
          const hits = op.hits < MAX_OP_HITS ? op.hits : MAX_OP_HITS;
          // The first waiter in an array literal: sized for one (a push onto [] makes room for 17).
          const first: Waiter = { index: i, upto: hits, request };
          this.pending.set(op.key, {
            key: op.key,
            hits,
            expireSeconds: op.expireSeconds,
            perSecond: op.perSecond,
            waiters: [first],
          });
          continue;
        }
        if (op.expireSeconds > b.expireSeconds) b.expireSeconds = op.expireSeconds;
        const sum = b.hits + op.hits;
        b.hits = sum < MAX_OP_HITS ? sum : MAX_OP_HITS;
        b.waiters.push({ index: i, upto: b.hits, request });
      }
      this.counters.opsIn += ops.length;
      if (!this.scheduled) {
        this.scheduled = true;
        scheduleTurnFlush(this.flushBound, this.inFlight);
      }
    });
  }

  private flush(): void {
    this.scheduled = false;
    const batches: Batch[] = new Array(this.pending.size + this.refunds.length);
    let k = 0;
    for (const b of this.pending.values()) batches[k++] = b;
    for (const b of this.refunds) batches[k++] = b;
    this.pending = new Map();
    if (this.refunds.length > 0) this.refunds = [];
    // The store sees plain ops (not the batches: it must not hold on to their waiters).
    const ops: CounterOp[] = new Array(batches.length);
    for (let j = 0; j < batches.length; j++) {
      const b = batches[j];
      ops[j] = { key: b.key, hits: b.hits, expireSeconds: b.expireSeconds, perSecond: b.perSecond };
    }
    this.counters.flushes++;
    this.counters.opsOut += ops.length;
    const settle = (j: number, result: number | Error | unknown, failed: boolean): void => {
      const b = batches[j];
      const base = failed ? 0 : (result as number) - b.hits;
      for (const w of b.waiters) {
        const r = w.request;
        if (r.settled) continue;
        if (failed && !r.each) {
          r.settled = true;
          r.reject(result);
          continue;
        }
        if (failed) r.results[w.index] = result as Error;
        else r.results[w.index] = base + w.upto;
        if (--r.remaining === 0) {
          r.settled = true;
          r.resolve(r.results);
        }
      }
    };
    const failAll = (err: unknown): void => {
      this.inFlight--;
      for (let j = 0; j < batches.length; j++) settle(j, err, true);
    };
    const inner = this.inner;
    if (inner.incrementEach && inner.shardOf && ops.length > 1) {
      // One call per shard, each settled on its own: a hung shard delays only its own keys.
      const groups = new Map<string, number[]>();
      for (let j = 0; j < ops.length; j++) {
        const shard = inner.shardOf(ops[j]);
        const g = groups.get(shard);
        if (g) g.push(j);
        else groups.set(shard, [j]);
      }
      if (groups.size > 1) {
        this.counters.flushes += groups.size - 1;
        for (const idx of groups.values()) {
          this.inFlight++;
          storeCall(() => inner.incrementEach!(idx.map((j) => ops[j]))).then(
            (results) => {
              this.inFlight--;
              for (let k = 0; k < idx.length; k++) settle(idx[k], results[k], results[k] instanceof Error);
            },
            (err: unknown) => {
              this.inFlight--;
              for (const j of idx) settle(j, err, true);
            },
          );
        }
        return;
      }
    }
    this.inFlight++;
    if (inner.incrementEach) {
      // Per-key settlement: a key whose shard failed fails only its own callers.
      storeCall(() => inner.incrementEach!(ops)).then((results) => {
        this.inFlight--;
        for (let j = 0; j < batches.length; j++) {
          const r = results[j];
          settle(j, r, r instanceof Error);
        }
      }, failAll);
    } else {
      storeCall(() => inner.increment(ops)).then((counts) => {
        this.inFlight--;
        for (let j = 0; j < batches.length; j++) settle(j, counts[j], false);
      }, failAll);
    }
  }

  get(ops: readonly CounterOp[]): Promise<number[]> {
    return this.inner.get(ops);
  }

  start(): Promise<void> {
    return this.inner.start?.() ?? Promise.resolve();
  }

  isHealthy(): boolean {
    return this.inner.isHealthy();
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}
