// One Redis deployment (the REDIS_* one, or the REDIS_PERSECOND_* one): its ioredis client, how the
// reference's commands are sent (per counter `INCRBY key hits` + `EXPIRE key seconds`), the optional
// implicit pipeline that batches the commands of concurrent requests, health, and the startup wait.
import type { Cluster, Redis } from 'ioredis';
import type { Logger } from '../../common/index.js';
import {
  CacheBusyError,
  CacheError,
  MAX_OP_HITS,
  type CounterOp,
  type LimitCheck,
  type LimitVerdict,
} from '../counting/index.js';
import type { RedisSettings, TlsFiles } from '../settings/index.js';
import {
  createRedisClient,
  describeTarget,
  reconnectDelayMs,
  startupDelayMs,
  type RedisClient,
  type StartupBackoff,
} from './client-options.js';
import { RequestDeadlines } from './deadlines.js';
import { clusterSlot } from './cluster-slot.js';
import { DirectCounter, ResendThroughIoredis } from './direct-counter.js';
import { LIMIT_SCRIPT, defineLimitScript, runLimitScripts } from './limit-script.js';
import { incrbyErrorResult, isReplyError, replyError } from './reply-errors.js';
import { countOf, storedCountOf, verdictOf, verdictsOf } from './reply-shapes.js';

type ExecResult = [Error | null, unknown][] | null;

/** Replies by which a cluster refuses a command without running it: it is to be sent elsewhere or again. */
const REDIRECTED = /^(MOVED|ASK|TRYAGAIN|CLUSTERDOWN) /;

/** A request waiting in the implicit pipeline. */
interface Pending {
  readonly ops: readonly CounterOp[];
  resolve(counts: (number | Error)[]): void;
  reject(err: unknown): void;
}

function cacheError(what: string, err: unknown): CacheError {
  return err instanceof CacheError ? err : new CacheError(`${what}: ${(err as Error).message}`, err);
}

/** An op's hits as sent: saturated at MAX_OP_HITS (store.ts), so no op can overflow a counter alone. */
function sentHits(hits: number): number {
  return hits < MAX_OP_HITS ? hits : MAX_OP_HITS;
}

/** An INCRBY's failure as its op's result: an error reply settles that op only (reply-errors.ts). */
function incrbyFailure(err: unknown): number | Error {
  if (isReplyError(err)) return incrbyErrorResult(err.message, err);
  return cacheError('redis INCRBY/EXPIRE failed', err);
}

/**
 * Per op its count, or the error of its own INCRBY, from an exec result holding INCRBY/EXPIRE pairs,
 * starting at pair `from`. An EXPIRE refused after its INCRBY ran keeps the count (it was counted).
 */
function countsFrom(res: ExecResult, from: number, n: number): (number | Error)[] {
  if (!res) {
    const err = new CacheError('redis pipeline returned no result');
    return new Array<Error>(n).fill(err);
  }
  const out = new Array<number | Error>(n);
  for (let i = 0; i < n; i++) {
    const [err, value] = res[(from + i) * 2];
    out[i] = err ? incrbyFailure(err) : countOf(value);
  }
  return out;
}

/** The counts, or the first op's error as the whole call's (increment's contract). */
function allCounted(results: (number | Error)[]): number[] {
  for (let i = 0; i < results.length; i++) {
    const r = results[i];
    if (r instanceof Error) throw r;
  }
  return results as number[];
}

export class RedisDeployment {
  readonly client: RedisClient;
  readonly isCluster: boolean;
  /** REDIS or REDIS_PERSECOND: names the variables in log lines and errors. */
  readonly name: string;
  private readonly settings: RedisSettings;
  private readonly logger?: Logger;
  private readonly windowMs: number;
  private readonly limit: number;
  private queue: Pending[] = [];
  private queuedCommands = 0;
  private flushScheduled = false;
  private timer: NodeJS.Timeout | undefined;
  private readonly flushNow = (): void => this.flush();
  private lastConnectionError = '';
  private readonly deadlines: RequestDeadlines;
  /** <name>_MAX_OUTSTANDING_COMMANDS: commands one connection may have unanswered. */
  private readonly maxOutstanding: number;
  /** One error for every call refused by the bound: no stack captured per refusal. */
  private readonly busy: CacheBusyError;
  /** INCRBY + EXPIRE on a connection of our own while ioredis is connected (direct-counter.ts). */
  private readonly direct: DirectCounter | undefined;
  private closing = false;
  /** True once the deployment has answered a PING (health: ready for the cache). */
  everConnected = false;
  /**
   * A `single` Redis answering READONLY: it was made a replica (REPLICAOF) and cannot count. Cleared
   * when ROLE says master again (checked every ROLE_CHECK_MS meanwhile, and by the breaker's probes).
   */
  demoted = false;
  private roleTimer: NodeJS.Timeout | undefined;
  /** When REDIS_CLOSE_CONNECTION_ON_READONLY_ERROR last dropped the connection (performance.now()). */
  private lastReconnectAt = -Infinity;

  constructor(
    name: string,
    settings: RedisSettings,
    tlsFiles: TlsFiles,
    logger?: Logger,
    /** Told when a `single` Redis becomes a replica (true) or a master again (false); for statistics. */
    private readonly onRole?: (deployment: string, replica: boolean) => void,
  ) {
    this.name = name;
    this.settings = settings;
    this.logger = logger;
    this.client = createRedisClient(
      settings,
      tlsFiles,
      name,
      settings.type === 'single' ? this.sawReadOnly : undefined,
    );
    this.isCluster = settings.type === 'cluster';
    this.deadlines = new RequestDeadlines(settings.timeoutMs, `redis request (${name}_TIMEOUT)`);
    this.maxOutstanding = settings.maxOutstandingCommands;
    this.busy = new CacheBusyError(
      `${name}_MAX_OUTSTANDING_COMMANDS (${this.maxOutstanding}) commands wait on the redis connection: not sent`,
    );
    // As radix's PoolPipelineWindow: a zero window disables implicit pipelining, a zero limit leaves
    // the window as the only bound.
    this.windowMs = settings.pipelineWindowMs;
    this.limit = settings.pipelineLimit;
    defineLimitScript(this.client);
    this.direct = DirectCounter.supports(settings)
      ? new DirectCounter(
          this.client as Redis,
          settings,
          tlsFiles,
          name,
          logger,
          settings.type === 'single' ? this.sawReadOnly : undefined,
        )
      : undefined;
    // ioredis reconnects by itself; without a listener an 'error' event would crash the process.
    this.client.on('error', (err: Error) => {
      this.lastConnectionError = err.message;
      this.logger?.debug({ err: err.message }, `${name}: redis connection error`);
    });
  }

  /**
   * Whether `commands` more for `key` would pass the bound on the ioredis connection they go on (the
   * one connection, or on a cluster the connection to the master serving the key's slot): its
   * commands written and not answered, a timed-out one included until its reply arrives or the
   * connection drops. A call larger than the bound on its own is sent only when nothing waits.
   */
  private full(commands: number, key: string): boolean {
    const conn = this.isCluster ? this.clusterMaster(key) : (this.client as Redis);
    if (conn === undefined) return false;
    const waiting = conn.commandQueue.length;
    return waiting > 0 && waiting + commands > this.maxOutstanding;
  }

  /** The connection to the master serving a key's slot, when the slot map names one. */
  private clusterMaster(key: string): Redis | undefined {
    const c = this.client as Cluster;
    const nodeKey = c.slots[clusterSlot(key)]?.[0];
    if (nodeKey === undefined) return undefined;
    for (const n of c.nodes('master')) if (`${n.options.host}:${n.options.port}` === nodeKey) return n;
    return undefined;
  }

  get implicitPipelining(): boolean {
    return this.windowMs > 0;
  }

  /** What the deployment connects to, for log lines. */
  describe(): string {
    return `${this.name}_URL=${this.settings.url} (${describeTarget(this.settings)})`;
  }

  /**
   * Connects and waits for a PING answer, retrying with backoff until the deadline; logs once what it
   * waits for (the reference blocks its startup on the same PING).
   */
  async connect(deadlineMs: number, backoff?: StartupBackoff): Promise<void> {
    const until = Date.now() + deadlineMs;
    const perTry = Math.min(this.settings.connectTimeoutMs, 5000);
    this.logger?.warn(`connecting to redis at ${this.describe()}`);
    for (let attempt = 1; ; attempt++) {
      try {
        const c = this.client;
        if (c.status === 'wait' || c.status === 'end' || c.status === 'close') {
          await withTimeout(c.connect(), perTry, 'connect');
        }
        const pong = await withTimeout(c.ping(), perTry, 'PING');
        if (pong !== 'PONG') throw new Error(`unexpected PING answer '${pong}'`);
        if (attempt > 1) this.logger?.warn(`redis at ${this.name}_URL is up`);
        this.everConnected = true;
        return;
      } catch (err) {
        let message = (err as Error).message;
        // A timed-out PING says little: name the connection error behind it (TLS, auth, refused...).
        if (this.lastConnectionError && !message.includes(this.lastConnectionError)) {
          message += ` (connection error: ${this.lastConnectionError})`;
        }
        if (attempt === 1) this.logger?.warn(`waiting for redis at ${this.describe()}: ${message}`);
        else this.logger?.debug(`still waiting for redis at ${this.name}_URL: ${message}`);
        if (Date.now() >= until || this.closing) {
          throw new CacheError(`could not connect to redis at ${this.describe()}: ${message}`, err);
        }
        const delay = backoff ? startupDelayMs(attempt, backoff) : reconnectDelayMs(attempt);
        await sleep(Math.min(delay, Math.max(0, until - Date.now())));
      }
    }
  }

  /** INCRBY + EXPIRE per op; resolves with the counts after the increment, in op order. */
  increment(ops: readonly CounterOp[]): Promise<number[]> {
    return this.incrementEach(ops).then(allCounted);
  }

  /**
   * Per-op settlement: each op gets its count or its own error. An error reply fails only the op it
   * answers (reply-errors.ts); a timeout or a lost connection fails every op of the call. On a cluster
   * each hash slot's pipeline succeeds or fails on its own.
   */
  async incrementEach(ops: readonly CounterOp[]): Promise<(number | Error)[]> {
    // Bounded per slot group inside: a hung master must not time out the groups of the others.
    if (this.isCluster && this.windowMs <= 0) return this.incrementClusterEach(ops);
    try {
      return await this.deadlines.bound(this.incrementUnbounded(ops));
    } catch (err) {
      const e = cacheError('redis INCRBY/EXPIRE failed', err);
      return new Array<Error>(ops.length).fill(e);
    }
  }

  private incrementUnbounded(ops: readonly CounterOp[]): Promise<(number | Error)[]> {
    if (this.windowMs > 0) return this.enqueue(ops);
    if (this.direct?.usable()) return this.incrementDirect(ops);
    return this.incrementPipeline(ops);
  }

  /**
   * On the direct connection; an op it refused without counting (READONLY: a demoted master) is resent,
   * alone, through ioredis, which finds the new master; the ops that ran are never sent again.
   */
  private incrementDirect(ops: readonly CounterOp[]): Promise<(number | Error)[]> {
    // A `then` rather than an async function: fewer heap bytes per store call.
    return this.direct!.increment(ops).then(
      (results) => {
        for (let i = 0; i < results.length; i++) {
          if (results[i] instanceof ResendThroughIoredis) return this.resendRefused(ops, results);
        }
        return results;
      },
      (err: unknown) => {
        // Nothing of the request was sent: all of it goes through ioredis.
        if (err instanceof ResendThroughIoredis) return this.incrementPipeline(ops);
        throw err;
      },
    );
  }

  private async resendRefused(
    ops: readonly CounterOp[],
    results: (number | Error)[],
  ): Promise<(number | Error)[]> {
    const idx: number[] = [];
    for (let i = 0; i < results.length; i++) if (results[i] instanceof ResendThroughIoredis) idx.push(i);
    const again = await this.incrementPipeline(idx.map((i) => ops[i]));
    for (let j = 0; j < idx.length; j++) results[idx[j]] = again[j];
    return results;
  }

  /**
   * One pipeline per master, all sent at once; each op settles on its own. The ops of one store call
   * (a turn's increments of many requests) are grouped by the master the slot map names for their
   * slot, as ioredis allows in one pipeline: grouped by slot, a turn of N distinct keys cost N
   * pipelines (a Pipeline object, a write and a promise each). An op whose slot the cluster answered
   * with a redirection (its INCRBY did not run) is resent in a pipeline of its slot, which ioredis
   * follows to the node the cluster names, so an INCRBY and its EXPIRE still travel together.
   */
  private async incrementClusterEach(ops: readonly CounterOp[]): Promise<(number | Error)[]> {
    const c = this.client as Cluster;
    const groups = new Map<string | number, number[]>();
    for (let i = 0; i < ops.length; i++) {
      const slot = clusterSlot(ops[i].key);
      // Before the first slot map every op is its own slot's group.
      const node = c.slots[slot]?.[0] ?? slot;
      const g = groups.get(node);
      if (g) g.push(i);
      else groups.set(node, [i]);
    }
    const out = new Array<number | Error>(ops.length);
    const settle = async (idx: number[], run: (part: CounterOp[]) => Promise<(number | Error)[]>) => {
      try {
        const counts = await this.deadlines.bound(run(idx.map((i) => ops[i])));
        for (let j = 0; j < idx.length; j++) out[idx[j]] = counts[j];
      } catch (err) {
        for (const i of idx) out[i] = err as Error;
      }
    };
    await Promise.all(
      [...groups.values()].map((idx) =>
        settle(idx, (part) =>
          part.length === 1 ? this.execClusterGroup(c, part) : this.execNodeGroup(c, part),
        ),
      ),
    );
    return out;
  }

  /**
   * The ops of one master in one pipeline; the ops the cluster redirected (or whose slot moved to
   * another master since the slot map was read) are resent one pipeline per slot.
   */
  private async execNodeGroup(c: Cluster, ops: readonly CounterOp[]): Promise<(number | Error)[]> {
    const p = c.pipeline();
    for (let i = 0; i < ops.length; i++) {
      p.incrby(ops[i].key, sentHits(ops[i].hits));
      p.expire(ops[i].key, ops[i].expireSeconds);
    }
    let res: ExecResult;
    try {
      res = await p.exec();
    } catch (err) {
      // Refused before sending: the slot map changed between the grouping and the exec.
      if (/same slots allocation group/.test((err as Error).message)) return this.execPerSlot(c, ops);
      throw cacheError('redis cluster pipeline failed', err);
    }
    const out = countsFrom(res, 0, ops.length);
    const redirected: number[] = [];
    for (let i = 0; i < ops.length; i++) {
      const err = res?.[2 * i]?.[0];
      if (err && REDIRECTED.test(err.message)) redirected.push(i);
    }
    if (redirected.length > 0) {
      const again = await this.execPerSlot(
        c,
        redirected.map((i) => ops[i]),
      );
      for (let j = 0; j < redirected.length; j++) out[redirected[j]] = again[j];
    }
    return out;
  }

  /** One pipeline per hash slot, all sent at once (ioredis follows a slot's redirections). */
  private async execPerSlot(c: Cluster, ops: readonly CounterOp[]): Promise<(number | Error)[]> {
    const slots = new Map<number, number[]>();
    for (let i = 0; i < ops.length; i++) {
      const s = clusterSlot(ops[i].key);
      const g = slots.get(s);
      if (g) g.push(i);
      else slots.set(s, [i]);
    }
    const out = new Array<number | Error>(ops.length);
    await Promise.all(
      [...slots.values()].map(async (idx) => {
        try {
          const counts = await this.execClusterGroup(
            c,
            idx.map((i) => ops[i]),
          );
          for (let j = 0; j < idx.length; j++) out[idx[j]] = counts[j];
        } catch (err) {
          for (const i of idx) out[i] = err as Error;
        }
      }),
    );
    return out;
  }

  /**
   * INCRBY and EXPIRE per op as plain commands on the one connection: they are written in order and
   * answered in order, one round trip per request as the reference's pipeline. ioredis' Pipeline
   * object costs more CPU than the two commands (docs/decisions/007-hot-path-shapes.md) and
   * lived long enough to be promoted, lengthening every scavenge. When a command fails, every op is
   * settled on its own (eachSettled): an error reply fails its op only.
   */
  private async incrementPipeline(ops: readonly CounterOp[]): Promise<(number | Error)[]> {
    if (this.full(ops.length * 2, '')) throw this.busy;
    const c = this.client as Redis;
    this.corkForThisTick(c);
    const pending: Promise<number>[] = new Array(ops.length * 2);
    try {
      for (let i = 0; i < ops.length; i++) {
        const op = ops[i];
        pending[2 * i] = c.incrby(op.key, sentHits(op.hits));
        pending[2 * i + 1] = c.expire(op.key, op.expireSeconds);
      }
      const res = await Promise.all(pending);
      const out = new Array<number | Error>(ops.length);
      for (let i = 0; i < ops.length; i++) out[i] = countOf(res[2 * i]);
      return out;
    } catch (err) {
      if (pending[pending.length - 1] === undefined) throw cacheError('redis INCRBY/EXPIRE failed', err);
      return eachSettled(pending, ops.length);
    }
  }

  private corked = false;

  /**
   * Holds the connection's writes until the end of this tick, so the commands of every request decided
   * in it leave in one write (writev) instead of one system call per command.
   */
  private corkForThisTick(c: Redis): void {
    if (this.corked || c.status !== 'ready') return;
    const stream = c.stream;
    if (!stream || stream.writableCorked > 0) return;
    this.corked = true;
    stream.cork();
    process.nextTick(() => {
      this.corked = false;
      stream.uncork();
    });
  }

  /**
   * On a cluster a pipeline must stay on one node: one pipeline per hash slot, all sent at once.
   * ioredis re-sends a pipeline after MOVED/ASK, a closed connection or CLUSTERDOWN, to the node the
   * refreshed slot map names, so INCRBY and its EXPIRE always travel together.
   */
  private incrementCluster(ops: readonly CounterOp[]): Promise<(number | Error)[]> {
    const c = this.client as Cluster;
    if (ops.length === 1) return this.execClusterGroup(c, ops);
    return this.incrementClusterEach(ops);
  }

  private async execClusterGroup(c: Cluster, ops: readonly CounterOp[]): Promise<(number | Error)[]> {
    if (this.full(ops.length * 2, ops[0]!.key)) throw this.busy;
    const p = c.pipeline();
    for (let i = 0; i < ops.length; i++) {
      p.incrby(ops[i].key, sentHits(ops[i].hits));
      p.expire(ops[i].key, ops[i].expireSeconds);
    }
    let res: ExecResult;
    try {
      res = await p.exec();
    } catch (err) {
      throw cacheError('redis cluster pipeline failed', err);
    }
    return countsFrom(res, 0, ops.length);
  }

  // --- implicit pipelining (REDIS_PIPELINE_WINDOW / REDIS_PIPELINE_LIMIT) ---------------------------

  private enqueue(ops: readonly CounterOp[]): Promise<(number | Error)[]> {
    // The cluster's groups are checked per master when the window flushes (execClusterGroup).
    if (!this.isCluster && this.full(this.queuedCommands + ops.length * 2, '')) {
      return Promise.reject(this.busy);
    }
    return new Promise<(number | Error)[]>((resolve, reject) => {
      this.queue.push({ ops, resolve, reject });
      this.queuedCommands += ops.length * 2;
      if (this.limit > 0 && this.queuedCommands >= this.limit) {
        this.flush();
      } else if (!this.flushScheduled) {
        this.flushScheduled = true;
        // Node timers have millisecond resolution: a sub-millisecond window (radix's typical 150µs)
        // flushes after the current I/O phase, which still batches requests that arrived together.
        if (this.windowMs < 1) setImmediate(this.flushNow);
        else this.timer = setTimeout(this.flushNow, this.windowMs);
      }
    });
  }

  private flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.flushScheduled = false;
    const batch = this.queue;
    if (batch.length === 0) return;
    this.queue = [];
    this.queuedCommands = 0;
    if (this.isCluster) {
      // Sent in one tick: ioredis's auto-pipelining writes each node's share of the window at once.
      for (const e of batch) this.incrementCluster(e.ops).then(e.resolve, e.reject);
      return;
    }
    const p = (this.client as Redis).pipeline();
    for (const e of batch) {
      for (let i = 0; i < e.ops.length; i++) {
        const op = e.ops[i];
        p.incrby(op.key, sentHits(op.hits));
        p.expire(op.key, op.expireSeconds);
      }
    }
    p.exec().then(
      (res) => {
        let at = 0;
        for (const e of batch) {
          e.resolve(countsFrom(res, at, e.ops.length));
          at += e.ops.length;
        }
      },
      (err: unknown) => {
        const ce = cacheError('redis pipeline failed', err);
        for (const e of batch) e.reject(ce);
      },
    );
  }

  /** The limit script per descriptor (limit-script.ts), all in one round trip. */
  evaluate(checks: readonly LimitCheck[]): Promise<LimitVerdict[]> {
    const sent = this.direct?.usable() ? this.evaluateDirect(checks) : this.evaluateViaIoredis(checks);
    return this.deadlines.bound(sent).catch(this.scriptFailed);
  }

  /**
   * On the direct connection; a check it refused without running (NOSCRIPT, or a demoted master) is
   * resent, alone, through ioredis, which loads the script or finds the master: a check that ran is
   * never run twice.
   */
  private async evaluateDirect(checks: readonly LimitCheck[]): Promise<LimitVerdict[]> {
    let results: (LimitVerdict | Error)[];
    try {
      results = await this.direct!.evaluate(checks);
    } catch (err) {
      if (err instanceof ResendThroughIoredis) return this.evaluateViaIoredis(checks);
      throw err;
    }
    let idx: number[] | undefined;
    for (let i = 0; i < results.length; i++) {
      const r = results[i]!;
      if (r instanceof ResendThroughIoredis) (idx ??= []).push(i);
      else if (r instanceof Error) throw r;
      else {
        const v = verdictOf(r, checks[i]!);
        if (v instanceof Error) throw v;
      }
    }
    if (idx) {
      // As EVAL, which carries the script: under repeated SCRIPT FLUSH an EVALSHA resent by ioredis can
      // meet NOSCRIPT again, and a call failing as a whole leaves unknown which of its checks ran.
      const c = this.client as Redis;
      const again = await Promise.all(
        idx.map((i) => {
          const check = checks[i]!;
          return c.call('EVAL', LIMIT_SCRIPT, check.keys.length, ...check.keys, ...check.args);
        }),
      );
      for (let j = 0; j < idx.length; j++) {
        const v = verdictOf(again[j], checks[idx[j]!]!);
        if (v instanceof Error) throw v;
        results[idx[j]!] = v;
      }
    }
    return results as LimitVerdict[];
  }

  /**
   * evaluate, each check settled on its own: an error reply to one check (or its refusal) is that
   * check's result, and the others keep their verdicts; a timeout or a lost connection fails them all.
   * The checks still leave in one write per turn (the direct connection's tick, ioredis' turn batch).
   */
  async evaluateEach(checks: readonly LimitCheck[]): Promise<(LimitVerdict | Error)[]> {
    try {
      return await this.deadlines.bound(
        this.direct?.usable() ? this.evaluateDirectEach(checks) : this.evaluateViaIoredisEach(checks),
      );
    } catch (err) {
      const e = scriptFailure(err);
      return new Array<Error>(checks.length).fill(e);
    }
  }

  private async evaluateDirectEach(checks: readonly LimitCheck[]): Promise<(LimitVerdict | Error)[]> {
    let results: (LimitVerdict | Error)[];
    try {
      results = await this.direct!.evaluate(checks);
    } catch (err) {
      if (err instanceof ResendThroughIoredis) return this.evaluateViaIoredisEach(checks);
      throw err;
    }
    let idx: number[] | undefined;
    for (let i = 0; i < results.length; i++) {
      const r = results[i]!;
      if (r instanceof ResendThroughIoredis) (idx ??= []).push(i);
      else if (!(r instanceof Error)) results[i] = verdictOf(r, checks[i]!);
    }
    if (idx) {
      // As EVAL (see evaluateDirect), each settled on its own.
      const c = this.client as Redis;
      const again = await Promise.allSettled(
        idx.map((i) => {
          const check = checks[i]!;
          return c.call('EVAL', LIMIT_SCRIPT, check.keys.length, ...check.keys, ...check.args);
        }),
      );
      for (let j = 0; j < idx.length; j++) {
        const s = again[j]!;
        results[idx[j]!] =
          s.status === 'fulfilled' ? verdictOf(s.value, checks[idx[j]!]!) : scriptFailure(s.reason);
      }
    }
    return results;
  }

  /** One script call per check, queued in ioredis' turn batch (one write per turn), each settled alone. */
  private async evaluateViaIoredisEach(checks: readonly LimitCheck[]): Promise<(LimitVerdict | Error)[]> {
    if (!this.isCluster) this.corkForThisTick(this.client as Redis);
    const pending = new Array<Promise<LimitVerdict[]>>(checks.length);
    for (let i = 0; i < checks.length; i++) {
      const check = checks[i]!;
      pending[i] = this.full(1, check.keys[0]!)
        ? Promise.reject(this.busy)
        : runLimitScripts(this.client, [check]);
    }
    const settled = await Promise.allSettled(pending);
    const out = new Array<LimitVerdict | Error>(checks.length);
    for (let i = 0; i < checks.length; i++) {
      const s = settled[i]!;
      out[i] = s.status === 'fulfilled' ? verdictOf(s.value[0], checks[i]!) : scriptFailure(s.reason);
    }
    return out;
  }

  private evaluateViaIoredis(checks: readonly LimitCheck[]): Promise<LimitVerdict[]> {
    if (this.isCluster) {
      for (let i = 0; i < checks.length; i++) {
        if (this.full(1, checks[i]!.keys[0]!)) return Promise.reject(this.busy);
      }
    } else if (this.full(checks.length, '')) return Promise.reject(this.busy);
    if (!this.isCluster) this.corkForThisTick(this.client as Redis);
    return runLimitScripts(this.client, checks).then((v) => verdictsOf(v, checks));
  }

  private readonly scriptFailed = (err: unknown): never => {
    throw scriptFailure(err);
  };

  /** Current counts (0 when absent), without counting. */
  async get(ops: readonly CounterOp[]): Promise<number[]> {
    try {
      for (let i = 0; i < ops.length; i++) if (this.full(1, ops[i]!.key)) throw this.busy;
      const values = await this.deadlines.bound(Promise.all(ops.map((op) => this.client.get(op.key))));
      return values.map((v) => {
        const count = storedCountOf(v);
        if (count instanceof Error) throw count;
        return count;
      });
    } catch (err) {
      throw cacheError('redis GET failed', err);
    }
  }

  /**
   * PING, bounded by REDIS_TIMEOUT: the circuit breaker's recovery probe. A demoted `single` Redis
   * answers PING but cannot count: the probe fails until ROLE says master again.
   */
  async ping(node?: Redis): Promise<void> {
    try {
      const pong = await this.deadlines.bound((node ?? this.client).ping());
      if (pong !== 'PONG') throw new CacheError(`unexpected PING answer '${pong}'`);
      this.everConnected = true;
    } catch (err) {
      throw cacheError(`redis PING (${this.name})`, err);
    }
    if (this.demoted && !(await this.checkRole())) {
      throw new CacheError(`redis at ${this.name}_URL is a replica (READONLY): it cannot count`);
    }
  }

  /**
   * A READONLY reply from a `single` Redis: it is a replica now. Reported once (log line, onRole), then
   * ROLE is asked every ROLE_CHECK_MS until it is a master again.
   */
  private readonly sawReadOnly = (): void => {
    if (this.demoted || this.closing) return;
    this.demoted = true;
    if (this.settings.closeConnectionOnReadOnly) {
      this.logger?.error(
        `redis at ${this.describe()} answers READONLY: it is a replica now; reconnecting through the address (REDIS_CLOSE_CONNECTION_ON_READONLY_ERROR) until it leads to a master. Meanwhile its decisions fail (the circuit breaker answers them from the failure mode) and /healthcheck reports the cache not ready`,
      );
      this.reconnect();
    } else {
      this.logger?.error(
        `redis at ${this.describe()} answers READONLY: it is a replica now, and a single Redis has no other master to follow; its decisions fail (the circuit breaker answers them from the failure mode) and /healthcheck reports the cache not ready until it is a master again (REDIS_CLOSE_CONNECTION_ON_READONLY_ERROR=true reconnects through the address instead, for a name repointed at a new master)`,
      );
    }
    this.onRole?.(this.name, true);
    this.roleTimer = setInterval(() => void this.checkRole(), ROLE_CHECK_MS);
    this.roleTimer.unref();
  };

  /**
   * REDIS_CLOSE_CONNECTION_ON_READONLY_ERROR: drops the connection so that ioredis dials the address
   * again (a DNS name or Service is resolved anew, a proxy picks its current backend); the direct
   * counting connection follows ioredis' new one. ROLE is asked as soon as it is ready, so a new master
   * is found without waiting for a write.
   */
  private reconnect(): void {
    if (this.closing) return;
    const now = performance.now();
    // At most once per ROLE_CHECK_MS: the ROLE check that follows a reconnect must not start another.
    if (now - this.lastReconnectAt < ROLE_CHECK_MS) return;
    this.lastReconnectAt = now;
    this.client.once('ready', () => void this.checkRole());
    this.client.disconnect(true);
  }

  private roleChecking = false;

  /** Asks ROLE; true (and the demotion cleared) when the server is a master. */
  private async checkRole(): Promise<boolean> {
    if (!this.demoted) return true;
    if (this.roleChecking) return false;
    this.roleChecking = true;
    try {
      const role = (await this.deadlines.bound(this.client.call('ROLE'))) as unknown[];
      if (!this.demoted) return true;
      if (role[0] !== 'master') {
        // Still a replica behind this connection: dial the address again (at most once per check).
        if (this.settings.closeConnectionOnReadOnly) this.reconnect();
        return false;
      }
      this.demoted = false;
      clearInterval(this.roleTimer);
      this.roleTimer = undefined;
      this.logger?.warn(`redis at ${this.name}_URL is a master again`);
      this.onRole?.(this.name, false);
      return true;
    } catch {
      return false;
    } finally {
      this.roleChecking = false;
    }
  }

  /**
   * True while the client has a usable connection to a Redis that can count
   * (REDIS_HEALTH_CHECK_ACTIVE_CONNECTION): a `single` Redis demoted to replica is not.
   */
  isHealthy(): boolean {
    return this.client.status === 'ready' && !this.demoted;
  }

  async close(): Promise<void> {
    this.closing = true;
    clearInterval(this.roleTimer);
    this.deadlines.stop();
    this.direct?.close();
    if (this.queue.length > 0) this.flush();
    const c = this.client;
    if (c.status === 'ready') {
      try {
        await withTimeout(c.quit(), 1000, 'QUIT');
      } catch {
        // a hard disconnect below
      }
    }
    // Also after QUIT: it closes the sentinel connections the failover detector subscribes on.
    c.disconnect();
  }
}

/** A failed script call as a CacheError: an error reply is that call's own (reply-errors.ts) unless it is the server's state. */
function scriptFailure(err: unknown): CacheError {
  if (isReplyError(err)) return replyError(`redis limit script failed: ${err.message}`, err.message, err);
  return cacheError('redis limit script failed', err);
}

/** Per op its INCRBY's count or error, once every command of the call has settled. */
async function eachSettled(pending: Promise<number>[], n: number): Promise<(number | Error)[]> {
  const settled = await Promise.allSettled(pending);
  const out = new Array<number | Error>(n);
  for (let i = 0; i < n; i++) {
    const s = settled[2 * i]!;
    out[i] = s.status === 'fulfilled' ? countOf(s.value) : incrbyFailure(s.reason);
  }
  return out;
}

/** How often a demoted `single` Redis is asked for its role. */
const ROLE_CHECK_MS = 1000;

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

async function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
