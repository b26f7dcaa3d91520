// The one batcher between the limiter and a backend: the counter increments and the scripted checks of
// the requests decided together are queued, and go to the store in one flush, one batch per shard
// (shardOf, asked once per op and check and handed down with the batch), so the layers under it
// (circuit breaker, deadline, connection) cost once per flush and a slow shard delays only its own keys.
//
// When a flush goes (FlushPolicy): by default at the end of the turn (scheduleTurnFlush: the current callback's
// calls when no store call of ours is in flight, the whole event-loop turn's while one is, which is
// where merging pays); with a pipeline window (REDIS_PIPELINE_WINDOW, REDIS_PIPELINE_LIMIT, and the
// REDIS_PERSECOND_ ones for SECOND-unit items) when the window elapses or the queue holds the limit's
// commands (2 per counter, 1 per check). Per-second items queue apart when their policy differs.
//
// Increments of one key are merged into one op (COALESCE_INCREMENTS, on by default). Each caller still
// gets its own exact count: n hits on a key that reaches total T are handed T-n+1 ... T in arrival
// order, so decisions are identical to counting one request at a time. The merged hits saturate at
// MAX_OP_HITS (store.ts): more than any limit, so every caller past it is over limit as it would be
// unmerged, and no sum of callers' hits reaches Redis's integer range or loses precision as a JS number.
// A refund (negative hits) is never merged: the store floors it at 0, so a refund merged with
// increments would return less (or more) than it asked; it goes out in the same flush, as its own op.
// Checks are never merged (admission is all or nothing per check); each keeps its own verdict.
//
// Settlement: each op and check of a batch settles on its own; a request of increment or evaluate fails
// whole with its first failed item, a request of incrementEach gets per op its count or its error.
import {
  MAX_OP_HITS,
  failedBatch,
  storeCall,
  type BatchResults,
  type CounterOp,
  type CounterStore,
  type LimitCheck,
  type LimitVerdict,
  type ShardBatch,
} from './store.js';

/** When a lane's queued calls go to the store. */
export interface FlushPolicy {
  /** How long calls wait for more, in ms (REDIS_PIPELINE_WINDOW); 0: the end of the turn (scheduleTurnFlush). */
  readonly windowMs: number;
  /** Commands queued (2 per counter op, 1 per check) that flush at once (REDIS_PIPELINE_LIMIT); 0: none. */
  readonly limit: number;
}

export interface BatcherOptions {
  /** COALESCE_INCREMENTS: merge the flush's hits on one key into one op (default true). */
  readonly merge?: boolean;
  /** The flush policy of the items on the main store (default: the end of the turn). */
  readonly flush?: FlushPolicy;
  /** The flush policy of SECOND-unit items (REDIS_PERSECOND_*); the main one when absent. */
  readonly perSecondFlush?: FlushPolicy;
}

const TURN: FlushPolicy = { windowMs: 0, limit: 0 };

interface Request {
  readonly results: unknown[];
  remaining: number;
  /** incrementEach: a failed op settles with its error instead of rejecting the request. */
  readonly each: boolean;
  settled: boolean;
  resolve(results: unknown[]): void;
  reject(err: unknown): void;
}

interface Waiter {
  readonly index: number;
  /** Hits of this op up to and including this caller's (its count is base + upto). */
  readonly upto: number;
  readonly request: Request;
}

/** One op as sent: a key's merged hits, or one refund, and the callers waiting on its count. */
interface Counter {
  readonly key: string;
  hits: number;
  expireSeconds: number;
  readonly perSecond: boolean;
  readonly waiters: Waiter[];
}

interface QueuedCheck {
  readonly check: LimitCheck;
  readonly index: number;
  readonly request: Request;
}

/** The calls queued for one flush policy. */
class Lane {
  merged = new Map<string, Counter>();
  /** Refunds, and every op when merging is off: each its own op. */
  single: Counter[] = [];
  checks: QueuedCheck[] = [];
  commands = 0;
  scheduled = false;
  timer: NodeJS.Timeout | undefined;
  constructor(
    readonly policy: FlushPolicy,
    readonly flushNow: () => void,
  ) {}
}

/** Hands a request its item's value; a failed item fails the whole request unless it settles each. */
function settle(r: Request, index: number, value: unknown): void {
  if (r.settled) return;
  if (value instanceof Error && !r.each) {
    r.settled = true;
    r.reject(value);
    return;
  }
  r.results[index] = value;
  if (--r.remaining === 0) {
    r.settled = true;
    r.resolve(r.results);
  }
}

function settleCounter(c: Counter, result: number | Error): void {
  const base = result instanceof Error ? 0 : result - c.hits;
  for (const w of c.waiters) settle(w.request, w.index, result instanceof Error ? result : base + w.upto);
}

const NONE: readonly never[] = Object.freeze([]);

/**
 * A batch through a store without send (memory, memcache): its increment (per op when it settles each)
 * and its evaluate, each settled on its own; never rejects.
 */
function sendThrough(inner: CounterStore, batch: ShardBatch): Promise<BatchResults> {
  const { ops, checks } = batch;
  const counts: Promise<(number | Error)[]> =
    ops.length === 0
      ? Promise.resolve([])
      : storeCall(() => (inner.incrementEach ? inner.incrementEach(ops) : inner.increment(ops)));
  const verdicts: Promise<(LimitVerdict | Error)[]> =
    checks.length === 0
      ? Promise.resolve([])
      : storeCall(() => (inner.evaluateEach ? inner.evaluateEach(checks) : inner.evaluate!(checks)));
  const failed = (n: number) => (err: unknown) =>
    new Array<Error>(n).fill(err instanceof Error ? err : new Error(String(err)));
  return Promise.all([counts.catch(failed(ops.length)), verdicts.catch(failed(checks.length))]).then(
    ([c, v]) => ({ counts: c, verdicts: v }),
  );
}

export class CoalescingCounterStore implements CounterStore {
  private readonly merge: boolean;
  private readonly lanes: Lane[];
  /** Store calls sent and not yet settled. */
  private inFlight = 0;
  /** Store calls made and increments merged into them (for tests and the benchmark). */
  readonly counters = { flushes: 0, opsIn: 0, opsOut: 0 };

  /** Only when the inner store has it: a store without evaluate makes the service refuse such configs. */
  readonly evaluate?: (checks: readonly LimitCheck[]) => Promise<LimitVerdict[]>;

  constructor(
    private readonly inner: CounterStore,
    options: BatcherOptions = {},
  ) {
    this.merge = options.merge ?? true;
    const main = options.flush ?? TURN;
    const second = options.perSecondFlush ?? main;
    const lane = (p: FlushPolicy): Lane => {
      const l: Lane = new Lane(p, () => this.flush(l));
      return l;
    };
    this.lanes = [lane(main)];
    if (second.windowMs !== main.windowMs || second.limit !== main.limit) this.lanes.push(lane(second));
    if (inner.evaluate)
      this.evaluate = (checks) => this.enqueue(NONE, checks, false) as Promise<LimitVerdict[]>;
  }

  increment(ops: readonly CounterOp[]): Promise<number[]> {
    return this.enqueue(ops, NONE, false) as Promise<number[]>;
  }

  /** Per-op settlement: a key whose store call failed yields its error, the others their counts. */
  incrementEach(ops: readonly CounterOp[]): Promise<(number | Error)[]> {
    return this.enqueue(ops, NONE, true) as Promise<(number | Error)[]>;
  }

  private lane(perSecond: boolean): Lane {
    return perSecond && this.lanes.length > 1 ? this.lanes[1]! : this.lanes[0]!;
  }

  private enqueue(
    ops: readonly CounterOp[],
    checks: readonly LimitCheck[],
    each: boolean,
  ): Promise<unknown[]> {
    const n = ops.length + checks.length;
    if (n === 0) return Promise.resolve([]);
    return new Promise<unknown[]>((resolve, reject) => {
      const request: Request = { results: new Array(n), remaining: n, each, settled: false, resolve, reject };
      for (let i = 0; i < ops.length; i++) this.queueOp(ops[i]!, i, request);
      for (let i = 0; i < checks.length; i++) {
        const lane = this.lane(checks[i]!.perSecond);
        lane.checks.push({ check: checks[i]!, index: i, request });
        this.queued(lane, 1);
      }
      this.counters.opsIn += ops.length;
    });
  }

  private queueOp(op: CounterOp, index: number, request: Request): void {
    const lane = this.lane(op.perSecond);
    const hits = op.hits < MAX_OP_HITS ? op.hits : MAX_OP_HITS;
    const c = this.merge && hits >= 0 ? lane.merged.get(op.key) : undefined;
    if (c === undefined) {
      // The first waiter in an array literal: sized for one (a push onto [] makes room for 17).
      const first: Waiter = { index, upto: hits, request };
      const counter: Counter = {
        key: op.key,
        hits,
        expireSeconds: op.expireSeconds,
        perSecond: op.perSecond,
        waiters: [first],
      };
      if (this.merge && hits >= 0) lane.merged.set(op.key, counter);
      else lane.single.push(counter);
      this.queued(lane, 2);
      return;
    }
    if (op.expireSeconds > c.expireSeconds) c.expireSeconds = op.expireSeconds;
    const sum = c.hits + hits;
    c.hits = sum < MAX_OP_HITS ? sum : MAX_OP_HITS;
    c.waiters.push({ index, upto: c.hits, request });
  }

  /** Counts a lane's queued commands and schedules its flush (or flushes it at its limit). */
  private queued(lane: Lane, commands: number): void {
    lane.commands += commands;
    const p = lane.policy;
    if (p.limit > 0 && lane.commands >= p.limit) {
      this.flush(lane);
      return;
    }
    if (lane.scheduled) return;
    lane.scheduled = true;
    if (p.windowMs <= 0) scheduleTurnFlush(lane.flushNow, this.inFlight);
    // Node timers have millisecond resolution: a sub-millisecond window (radix's typical 150µs)
    // flushes after the current I/O phase, which still batches requests that arrived together.
    else if (p.windowMs < 1) setImmediate(lane.flushNow);
    else lane.timer = setTimeout(lane.flushNow, p.windowMs);
  }

  private flush(lane: Lane): void {
    if (lane.timer !== undefined) clearTimeout(lane.timer);
    lane.timer = undefined;
    lane.scheduled = false;
    lane.commands = 0;
    let counters: Counter[] = lane.single;
    if (lane.merged.size > 0) {
      // The merged ops first, then the refunds and unmerged ops in arrival order.
      counters = [...lane.merged.values(), ...lane.single];
      lane.merged = new Map();
    }
    const checks = lane.checks;
    lane.single = [];
    lane.checks = [];
    if (counters.length === 0 && checks.length === 0) return;
    const inner = this.inner;
    if (!inner.shardOf) {
      this.sendShard('', counters, checks);
      return;
    }
    // The shard of each item, asked once; usually every item is on one shard and nothing is split.
    const cShards = new Array<string>(counters.length);
    const qShards = new Array<string>(checks.length);
    for (let i = 0; i < counters.length; i++)
      cShards[i] = inner.shardOf(counters[i]!.key, counters[i]!.perSecond);
    for (let i = 0; i < checks.length; i++) {
      const c = checks[i]!.check;
      qShards[i] = inner.shardOf(c.keys[0]!, c.perSecond);
    }
    const first = counters.length > 0 ? cShards[0]! : qShards[0]!;
    let oneShard = true;
    for (let i = 0; oneShard && i < cShards.length; i++) oneShard = cShards[i] === first;
    for (let i = 0; oneShard && i < qShards.length; i++) oneShard = qShards[i] === first;
    if (oneShard) {
      this.sendShard(first, counters, checks);
      return;
    }
    const groups = new Map<string, { counters: Counter[]; checks: QueuedCheck[] }>();
    const group = (shard: string) => {
      let g = groups.get(shard);
      if (g === undefined) groups.set(shard, (g = { counters: [], checks: [] }));
      return g;
    };
    for (let i = 0; i < counters.length; i++) group(cShards[i]!).counters.push(counters[i]!);
    for (let i = 0; i < checks.length; i++) group(qShards[i]!).checks.push(checks[i]!);
    for (const [shard, g] of groups) this.sendShard(shard, g.counters, g.checks);
  }

  /** One store call for one shard's share of the flush; each op and check settles on its own. */
  private sendShard(shard: string, counters: Counter[], checks: QueuedCheck[]): void {
    // The store sees plain ops and checks (not the counters: it must not hold on to their waiters).
    const ops: CounterOp[] = new Array(counters.length);
    for (let j = 0; j < counters.length; j++) {
      const c = counters[j]!;
      ops[j] = { key: c.key, hits: c.hits, expireSeconds: c.expireSeconds, perSecond: c.perSecond };
    }
    const sent: LimitCheck[] = new Array(checks.length);
    for (let j = 0; j < checks.length; j++) sent[j] = checks[j]!.check;
    this.counters.flushes++;
    this.counters.opsOut += ops.length;
    this.inFlight++;
    const inner = this.inner;
    const batch: ShardBatch = { shard, ops, checks: sent };
    const call = inner.send ? storeCall(() => inner.send!(batch)) : sendThrough(inner, batch);
    call
      .catch((err: unknown) => failedBatch(batch, err instanceof Error ? err : new Error(String(err))))
      .then((r) => {
        this.inFlight--;
        for (let j = 0; j < counters.length; j++) settleCounter(counters[j]!, r.counts[j]!);
        for (let j = 0; j < checks.length; j++) {
          const q = checks[j]!;
          settle(q.request, q.index, r.verdicts[j]!);
        }
      });
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

  /** Sends what is queued, then closes the store. */
  close(): Promise<void> {
    for (const lane of this.lanes) if (lane.scheduled) this.flush(lane);
    return this.inner.close();
  }
}

// When the batcher's turn flush goes (coalescing.ts, without a pipeline window): with none of its store
// calls in flight, at the end of the current callback (process.nextTick), so a lone call does not wait
// for the rest of the turn (a wait that shows in p99, docs/decisions/007-hot-path-shapes.md); with one in
// flight, at the end of the turn (setImmediate), so the turn's calls leave together, which is where
// batching pays.
export function scheduleTurnFlush(flush: () => void, inFlight: number): void {
  if (inFlight === 0) process.nextTick(flush);
  else setImmediate(flush);
}
