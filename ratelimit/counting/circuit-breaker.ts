// A circuit breaker per shard of a counter store (a Redis deployment, or one cluster master), as a
// decorator of the CounterStore interface. The batcher (coalescing.ts) hands it one shard's batch with
// the shard named (send); calls from elsewhere are split per shard first, so every call is one shard's. After `failureThreshold` consecutive failed calls
// to a shard (errors or REDIS_TIMEOUT expiries) the shard's circuit opens: calls for its keys fail at
// once with CircuitOpenError, without waiting on the store, and the limiter answers them from the
// failure mode. While open, one probe at a time (the store's PING for that shard, every
// `probeIntervalMs`) tests recovery; the first answer closes the circuit.
// Only the shard's own failures count: a timeout, a lost connection, or an error reply about the server's
// state (READONLY, LOADING, MASTERDOWN...). An error reply caused by one op's key or data
// (CounterRefusedError, reply-errors.ts) fails that op only: the server answered, so the call counts as
// a success, and one caller's data can never open the circuit for everyone else's keys. A call the
// store did not send because its connection already has its bound of commands waiting
// (CacheBusyError) counts as neither: the calls that are waiting settle the circuit when they fail.
//
// Hand-written: the npm breakers (opossum, cockatiel) wrap one function with per-call closures and
// timers and count failures as rates over time windows; here a shard is chosen per key, the probe is
// a PING rather than a real decision, and the closed path must cost no allocation.
import type { Logger } from '../../common/index.js';
import {
  CacheBusyError,
  CacheError,
  allOrFirstError,
  failedBatch,
  isShardFailure,
  storeCall,
  type BatchResults,
  type CounterOp,
  type CounterStore,
  type LimitCheck,
  type LimitVerdict,
  type ShardBatch,
} from './store.js';

const NO_OPS: readonly CounterOp[] = Object.freeze([]);
const NO_CHECKS: readonly LimitCheck[] = Object.freeze([]);

export type CircuitState = 'closed' | 'open' | 'half_open';
/** Gauge values of the circuit state statistic. */
export const CIRCUIT_STATE_VALUE: Readonly<Record<CircuitState, number>> = {
  closed: 0,
  half_open: 1,
  open: 2,
};

/** A call refused because its shard's circuit is open: a CacheError, answered by the failure mode. */
export class CircuitOpenError extends CacheError {
  constructor(readonly shard: string) {
    super(`circuit open for ${shard}: not sent to the cache`);
    this.name = 'CircuitOpenError';
  }
}

export interface CircuitBreakerSettings {
  enabled: boolean;
  /** Consecutive failed calls to a shard that open its circuit. */
  failureThreshold: number;
  /** Time between recovery probes while a circuit is open. */
  probeIntervalMs: number;
}

/** How a store is split into shards with their own circuits, and how one is probed. */
export interface ShardedStore extends CounterStore {
  /** The shard holding a key ("REDIS", "REDIS_PERSECOND", "REDIS 127.0.0.1:7000"). */
  shardOf(key: string, perSecond: boolean): string;
  /** Sends one shard's batch, each item settled on its own; never rejects. */
  send(batch: ShardBatch): Promise<BatchResults>;
  /** Resolves when the shard answers a trivial command (PING); rejects otherwise. */
  probe(shard: string): Promise<void>;
  /** Connects, waiting up to the deadline; rejects when a shard could not be reached. */
  start(deadlineMs?: number): Promise<void>;
  /** Shards never reached since start. */
  unreachableShards(): string[];
  /** Keeps connecting in the background what start() could not reach. */
  keepConnecting(): void;
  /** Every shard has answered at least once since start. */
  hasConnected(): boolean;
}

/** Receives state changes (statistics); called once per transition. */
export interface CircuitObserver {
  onState(shard: string, state: CircuitState, from: CircuitState | undefined): void;
}

class Circuit {
  state: CircuitState = 'closed';
  failures = 0;
  probing = false;
  timer: NodeJS.Timeout | undefined;
  /** One error object for every refused call: no stack captured per decision while open. */
  readonly refusal: CircuitOpenError;
  constructor(readonly shard: string) {
    this.refusal = new CircuitOpenError(shard);
  }
}

export class CircuitBreakerStore implements CounterStore {
  private readonly circuits = new Map<string, Circuit>();
  private closed = false;
  /** Calls refused without reaching the store (for tests and figures). */
  refused = 0;

  constructor(
    private readonly inner: ShardedStore,
    private readonly settings: CircuitBreakerSettings,
    private readonly observer?: CircuitObserver,
    private readonly logger?: Logger,
    private readonly startupWaitMs = 60_000,
  ) {
    // Only when the inner store has it: a store without evaluate makes the service refuse such configs.
    if (inner.evaluate) {
      this.evaluate = (checks) => this.split(NO_OPS, checks).then((r) => allOrFirstError(r.verdicts));
      this.evaluateEach = (checks) => this.split(NO_OPS, checks).then((r) => r.verdicts);
    }
  }

  /** evaluate with each check settled on its own. */
  readonly evaluateEach?: (checks: readonly LimitCheck[]) => Promise<(LimitVerdict | Error)[]>;

  /** The other algorithms' atomic call per check; absent when the inner store has none. */
  readonly evaluate?: (checks: readonly LimitCheck[]) => Promise<LimitVerdict[]>;

  private circuit(shard: string): Circuit {
    let c = this.circuits.get(shard);
    if (c === undefined) {
      c = new Circuit(shard);
      this.circuits.set(shard, c);
      this.observer?.onState(shard, 'closed', undefined);
    }
    return c;
  }

  shardOf(key: string, perSecond: boolean): string {
    return this.inner.shardOf(key, perSecond);
  }

  /** The state of every shard seen so far. */
  states(): Record<string, CircuitState> {
    const out: Record<string, CircuitState> = {};
    for (const [k, c] of this.circuits) out[k] = c.state;
    return out;
  }

  /** True when no circuit is open (every shard was answering at its last call). */
  allClosed(): boolean {
    for (const c of this.circuits.values()) if (c.state !== 'closed') return false;
    return true;
  }

  /**
   * Marks a shard open without a failed call: at startup, when the store could not be reached, so the
   * first decisions do not each wait for a connect timeout.
   */
  trip(shard: string, why: string): void {
    const c = this.circuit(shard);
    if (c.state === 'closed') this.open(c, why);
  }

  increment(ops: readonly CounterOp[]): Promise<number[]> {
    return this.split(ops, NO_CHECKS).then((r) => allOrFirstError(r.counts));
  }

  incrementEach(ops: readonly CounterOp[]): Promise<(number | Error)[]> {
    return this.split(ops, NO_CHECKS).then((r) => r.counts);
  }

  /**
   * One shard's batch (the batcher's flush, the shard named): refused at once while the shard's circuit
   * is open, else sent and its outcome recorded on the shard. Never rejects.
   */
  send(batch: ShardBatch): Promise<BatchResults> {
    const inner = this.inner;
    if (!this.settings.enabled) return inner.send(batch);
    const c = this.circuit(batch.shard);
    if (c.state !== 'closed') {
      this.refused++;
      return Promise.resolve(failedBatch(batch, c.refusal));
    }
    return storeCall(() => inner.send(batch))
      .catch((err: unknown) => failedBatch(batch, err as Error))
      .then((r) => {
        this.record(c, r);
        return r;
      });
  }

  /** Ops and checks not split by the batcher: one send per shard, the results back in order. */
  private split(ops: readonly CounterOp[], checks: readonly LimitCheck[]): Promise<BatchResults> {
    const inner = this.inner;
    const opShards = ops.map((o) => inner.shardOf(o.key, o.perSecond));
    const checkShards = checks.map((c) => inner.shardOf(c.keys[0]!, c.perSecond));
    const first = opShards[0] ?? checkShards[0] ?? '';
    if (opShards.every((s) => s === first) && checkShards.every((s) => s === first)) {
      return this.send({ shard: first, ops, checks });
    }
    const groups = new Map<string, { ops: number[]; checks: number[] }>();
    const group = (shard: string) => {
      let g = groups.get(shard);
      if (g === undefined) groups.set(shard, (g = { ops: [], checks: [] }));
      return g;
    };
    opShards.forEach((s, i) => group(s).ops.push(i));
    checkShards.forEach((s, i) => group(s).checks.push(i));
    const counts = new Array<number | Error>(ops.length);
    const verdicts = new Array<LimitVerdict | Error>(checks.length);
    return Promise.all(
      [...groups].map(([shard, g]) =>
        this.send({ shard, ops: g.ops.map((i) => ops[i]!), checks: g.checks.map((i) => checks[i]!) }).then(
          (r) => {
            g.ops.forEach((i, j) => (counts[i] = r.counts[j]!));
            g.checks.forEach((i, j) => (verdicts[i] = r.verdicts[j]!));
          },
        ),
      ),
    ).then(() => ({ counts, verdicts }));
  }

  /**
   * One call's outcome for its shard: failed when an item failed for the shard's own reasons, answered
   * when any item was, nothing when none of it was sent (CacheBusyError).
   */
  private record(c: Circuit, r: BatchResults): void {
    let failed: Error | undefined;
    let answered = false;
    for (const results of [r.counts, r.verdicts] as unknown[][]) {
      for (let i = 0; i < results.length; i++) {
        const x = results[i];
        if (x instanceof Error) {
          if (isShardFailure(x)) {
            failed = x;
            break;
          }
          if (x instanceof CacheBusyError) continue;
        }
        answered = true;
      }
      if (failed !== undefined) break;
    }
    if (failed !== undefined) this.recordOne(c, false, failed);
    else if (answered) this.recordOne(c, true, undefined);
  }

  private recordOne(c: Circuit, ok: boolean, err: unknown): void {
    if (ok) {
      c.failures = 0;
      return;
    }
    if (c.state !== 'closed') return;
    if (++c.failures >= this.settings.failureThreshold) {
      this.open(
        c,
        `${c.failures} consecutive failures, the last: ${(err as Error | undefined)?.message ?? '?'}`,
      );
    }
  }

  private open(c: Circuit, why: string): void {
    c.state = 'open';
    this.observer?.onState(c.shard, 'open', 'closed');
    this.logger?.error(
      `circuit opened for ${c.shard} (${why}): decisions for its keys come from the failure mode; probing every ${this.settings.probeIntervalMs} ms`,
    );
    this.scheduleProbe(c);
  }

  private scheduleProbe(c: Circuit): void {
    if (this.closed || c.timer !== undefined) return;
    c.timer = setTimeout(() => {
      c.timer = undefined;
      void this.runProbe(c);
    }, this.settings.probeIntervalMs);
    c.timer.unref();
  }

  private async runProbe(c: Circuit): Promise<void> {
    if (this.closed || c.probing || c.state === 'closed') return;
    c.probing = true;
    if (c.state !== 'half_open') {
      c.state = 'half_open';
      this.observer?.onState(c.shard, 'half_open', 'open');
    }
    try {
      await this.inner.probe(c.shard);
      c.failures = 0;
      c.state = 'closed';
      this.observer?.onState(c.shard, 'closed', 'half_open');
      this.logger?.warn(`circuit closed for ${c.shard}: the cache answers again`);
    } catch (err) {
      // Back to open without another log line: the opening was logged, and a line per probe would
      // repeat every interval for the whole outage.
      c.state = 'open';
      this.observer?.onState(c.shard, 'open', 'half_open');
      this.logger?.debug(`probe of ${c.shard} failed: ${(err as Error).message}`);
      this.scheduleProbe(c);
    } finally {
      c.probing = false;
    }
  }

  get(ops: readonly CounterOp[]): Promise<number[]> {
    if (this.settings.enabled) {
      for (let i = 0; i < ops.length; i++) {
        const shard = this.inner.shardOf(ops[i]!.key, ops[i]!.perSecond);
        const c = this.circuit(shard);
        if (c.state !== 'closed') {
          this.refused++;
          return Promise.reject(c.refusal);
        }
      }
    }
    return this.inner.get(ops);
  }

  /**
   * Waits up to `startupWaitMs` for the store, then goes on without what did not answer: those shards'
   * circuits start open (decisions from the failure mode, no wait), the store keeps connecting in the
   * background and the probes close the circuits once it answers. Never rejects: a missing cache
   * must not become a crash loop.
   */
  async start(startupWaitMs = this.startupWaitMs): Promise<void> {
    try {
      await this.inner.start(startupWaitMs);
    } catch (err) {
      const unreachable = this.inner.unreachableShards();
      this.logger?.error(
        `starting without the cache (${(err as Error).message}); still connecting in the background; /healthcheck reports the cache not ready until it answers`,
      );
      for (const shard of unreachable) this.trip(shard, 'not reachable at startup');
      this.inner.keepConnecting();
    }
  }

  isHealthy(): boolean {
    return this.inner.isHealthy();
  }

  hasConnected(): boolean {
    return this.inner.hasConnected();
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const c of this.circuits.values()) clearTimeout(c.timer);
    await this.inner.close();
  }
}
