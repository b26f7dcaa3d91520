// A circuit breaker per shard of a counter store (a Redis deployment, or one cluster master), as a
// decorator of the CounterStore interface: it wraps any store method, so other counting schemes
// (scripts, algorithms) get the same protection. After `failureThreshold` consecutive failed calls
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
  type CounterOp,
  type CounterStore,
  type LimitCheck,
  type LimitVerdict,
  isShardFailure,
  storeCall,
} from './store.js';

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
  /** The shard holding an op's key ("REDIS", "REDIS_PERSECOND", "REDIS 127.0.0.1:7000"). */
  shardOf(op: CounterOp): string;
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
    if (inner.evaluate) this.evaluate = (checks) => this.evaluateChecks(inner, checks);
    if (inner.evaluate && inner.evaluateEach) {
      this.evaluateEach = (checks) => this.evaluateChecksEach(inner, checks);
    }
  }

  /** evaluate with each check settled on its own; absent when the inner store has no evaluateEach. */
  readonly evaluateEach?: (checks: readonly LimitCheck[]) => Promise<(LimitVerdict | Error)[]>;

  /** The other algorithms' atomic call (see evaluateChecks); absent when the inner store has none. */
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

  shardOf(op: CounterOp): string {
    return this.inner.shardOf(op);
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
    if (!this.settings.enabled) return this.inner.increment(ops);
    return this.incrementEach(ops).then((results) => {
      for (let i = 0; i < results.length; i++) {
        const r = results[i];
        if (r instanceof Error) throw r;
      }
      return results as number[];
    });
  }

  async incrementEach(ops: readonly CounterOp[]): Promise<(number | Error)[]> {
    if (!this.settings.enabled) return this.innerEach(ops);
    const n = ops.length;
    // Common case: every op on one shard whose circuit is closed: no splitting at all.
    const first = n > 0 ? this.inner.shardOf(ops[0]) : '';
    let oneShard = true;
    for (let i = 1; i < n; i++) {
      if (this.inner.shardOf(ops[i]) !== first) {
        oneShard = false;
        break;
      }
    }
    if (oneShard) {
      const c = this.circuit(first);
      if (c.state !== 'closed') {
        this.refused++;
        return new Array<Error>(n).fill(c.refusal);
      }
      // innerEach inlined: one async frame per call instead of two on the hot path.
      let results: (number | Error)[];
      try {
        const inner = this.inner;
        results = await (inner.incrementEach ? inner.incrementEach(ops) : inner.increment(ops));
      } catch (err) {
        results = ops.map(() => err as Error);
      }
      this.record(c, results);
      return results;
    }
    // Mixed shards: refuse the ops of open shards, send the rest, record per shard.
    const out = new Array<number | Error>(n);
    const sendIdx: number[] = [];
    for (let i = 0; i < n; i++) {
      const shard = this.inner.shardOf(ops[i]);
      const c = this.circuit(shard);
      if (c.state !== 'closed') {
        this.refused++;
        out[i] = c.refusal;
      } else sendIdx.push(i);
    }
    if (sendIdx.length === 0) return out;
    const sent = sendIdx.map((i) => ops[i]);
    const results = await this.innerEach(sent);
    // Per shard: its first failure, or null when it answered; a shard whose ops were all left unsent
    // (CacheBusyError) records nothing.
    const byShard = new Map<Circuit, Error | null>();
    for (let j = 0; j < sendIdx.length; j++) {
      out[sendIdx[j]] = results[j];
      const r = results[j];
      if (r instanceof CacheBusyError) continue;
      const c = this.circuit(this.inner.shardOf(sent[j]));
      const failed = r instanceof Error && isShardFailure(r) ? r : null;
      const seen = byShard.get(c);
      if (seen === undefined || (failed !== null && seen === null)) byShard.set(c, failed);
    }
    for (const [c, failed] of byShard) this.recordOne(c, failed === null, failed);
    return out;
  }

  /** Never rejects: a call that fails as a whole (e.g. REDIS_TIMEOUT) fails each of its ops. */
  private async innerEach(ops: readonly CounterOp[]): Promise<(number | Error)[]> {
    try {
      if (this.inner.incrementEach) return await this.inner.incrementEach(ops);
      return await this.inner.increment(ops);
    } catch (err) {
      return ops.map(() => err as Error);
    }
  }

  /** One call's outcome for its shard: failed, answered, or nothing when none of it was sent. */
  private record(c: Circuit, results: readonly (number | Error)[]): void {
    let failed: Error | undefined;
    let answered = false;
    for (let i = 0; i < results.length; i++) {
      const r = results[i];
      if (r instanceof Error) {
        if (isShardFailure(r)) {
          failed = r;
          break;
        }
        if (r instanceof CacheBusyError) continue;
      }
      answered = true;
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

  /**
   * The atomic per-descriptor call of the other algorithms, behind the same circuits: refused at once
   * while a check's shard is open, and each call's outcome recorded on the shards it reached (one call
   * fails as a whole, so each of its shards counts one failure).
   */
  private evaluateChecks(inner: ShardedStore, checks: readonly LimitCheck[]): Promise<LimitVerdict[]> {
    if (!this.settings.enabled) return inner.evaluate!(checks);
    // Usually one shard for every check (one Redis): a set only when they differ.
    let first: Circuit | undefined;
    let more: Set<Circuit> | undefined;
    const probe = this.shardProbe;
    for (let i = 0; i < checks.length; i++) {
      const c = checks[i]!;
      probe.key = c.keys[0]!;
      probe.perSecond = c.perSecond;
      const circuit = this.circuit(this.inner.shardOf(probe));
      if (circuit.state !== 'closed') {
        this.refused++;
        return Promise.reject(circuit.refusal);
      }
      if (first === undefined) first = circuit;
      else if (circuit !== first) (more ??= new Set([first])).add(circuit);
    }
    return storeCall(() => inner.evaluate!(checks)).then(
      (verdicts) => {
        if (more) for (const c of more) this.recordOne(c, true, undefined);
        else if (first) this.recordOne(first, true, undefined);
        return verdicts;
      },
      (err: unknown) => {
        // Not sent (too many waiting): nothing to record.
        if (err instanceof CacheBusyError) throw err;
        // A refusal of the checks' own data: the server answered.
        const ok = !isShardFailure(err);
        if (more) for (const c of more) this.recordOne(c, ok, err);
        else if (first) this.recordOne(first, ok, err);
        throw err;
      },
    );
  }

  /**
   * evaluateEach behind the circuits: a check whose shard is open gets the refusal, the others are sent;
   * each reached shard records one outcome, a failure only when one of its checks failed for the
   * shard's own reasons (never for a refusal of a check's data).
   */
  private async evaluateChecksEach(
    inner: ShardedStore,
    checks: readonly LimitCheck[],
  ): Promise<(LimitVerdict | Error)[]> {
    if (!this.settings.enabled) return inner.evaluateEach!(checks);
    const n = checks.length;
    const circuits = new Array<Circuit>(n);
    const probe = this.shardProbe;
    let open = 0;
    for (let i = 0; i < n; i++) {
      const c = checks[i]!;
      probe.key = c.keys[0]!;
      probe.perSecond = c.perSecond;
      const circuit = (circuits[i] = this.circuit(this.inner.shardOf(probe)));
      if (circuit.state !== 'closed') open++;
    }
    if (open > 0) this.refused++;
    const out = new Array<LimitVerdict | Error>(n);
    const sendIdx: number[] = [];
    for (let i = 0; i < n; i++) {
      if (circuits[i]!.state !== 'closed') out[i] = circuits[i]!.refusal;
      else sendIdx.push(i);
    }
    if (sendIdx.length === 0) return out;
    let results: (LimitVerdict | Error)[];
    try {
      results = await inner.evaluateEach!(open > 0 ? sendIdx.map((i) => checks[i]!) : checks);
    } catch (err) {
      results = sendIdx.map(() => err as Error);
    }
    const outcome = new Map<Circuit, Error | undefined>();
    for (let j = 0; j < sendIdx.length; j++) {
      const i = sendIdx[j]!;
      const r = results[j]!;
      out[i] = r;
      if (r instanceof CacheBusyError) continue;
      const c = circuits[i]!;
      const failed = r instanceof Error && isShardFailure(r) ? r : undefined;
      if (!outcome.has(c) || (failed && !outcome.get(c))) outcome.set(c, failed);
    }
    for (const [c, failed] of outcome) this.recordOne(c, failed === undefined, failed);
    return out;
  }

  /** The op shardOf is asked about for a check (its first key and routing); reused, never stored. */
  private readonly shardProbe = { key: '', hits: 0, expireSeconds: 0, perSecond: false };

  get(ops: readonly CounterOp[]): Promise<number[]> {
    if (this.settings.enabled) {
      for (let i = 0; i < ops.length; i++) {
        const shard = this.inner.shardOf(ops[i]);
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
