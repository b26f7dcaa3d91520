// One Redis deployment (the REDIS_* one, or the REDIS_PERSECOND_* one): its ioredis client, how the
// reference's commands are sent (per counter `INCRBY key hits` + `EXPIRE key seconds`), the optional
// implicit pipeline that batches the commands of concurrent requests, health, and the startup wait.
import type { Cluster, Redis } from 'ioredis';
import type { Logger } from 'pino';
import { CacheError, type CounterOp, type LimitCheck, type LimitVerdict } from '../limiter/index.js';
import type { RedisSettings, TlsFiles } from '../settings/index.js';
import { createRedisClient, describeTarget, reconnectDelayMs, type RedisClient } from './client-options.js';
import { RequestDeadlines } from './deadlines.js';
import { clusterSlot } from './cluster-slot.js';
import { DirectCounter, ResendThroughIoredis } from './direct-counter.js';
import { defineLimitScript, runLimitScripts } from './limit-script.js';

type ExecResult = [Error | null, unknown][] | null;

/** A request waiting in the implicit pipeline. */
interface Pending {
  readonly ops: readonly CounterOp[];
  resolve(counts: number[]): void;
  reject(err: unknown): void;
}

function cacheError(what: string, err: unknown): CacheError {
  return err instanceof CacheError ? err : new CacheError(`${what}: ${(err as Error).message}`, err);
}

/** Counts from an exec result holding INCRBY/EXPIRE pairs, starting at pair `from`. */
function countsFrom(res: ExecResult, from: number, n: number): number[] {
  if (!res) throw new CacheError('redis pipeline returned no result');
  const out = new Array<number>(n);
  for (let i = 0; i < n; i++) {
    const [err, value] = res[(from + i) * 2];
    if (err) throw new CacheError(`redis INCRBY failed: ${err.message}`, err);
    out[i] = Number(value);
  }
  return out;
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
  /** INCRBY + EXPIRE on a connection of our own while ioredis is connected (direct-counter.ts). */
  private readonly direct: DirectCounter | undefined;
  private closing = false;
  /** True once the deployment has answered a PING (health: ready for the cache). */
  everConnected = false;

  constructor(name: string, settings: RedisSettings, tlsFiles: TlsFiles, logger?: Logger) {
    this.name = name;
    this.settings = settings;
    this.logger = logger;
    this.client = createRedisClient(settings, tlsFiles, name);
    this.isCluster = settings.type === 'cluster';
    this.deadlines = new RequestDeadlines(settings.timeoutMs, `redis request (${name}_TIMEOUT)`);
    // As radix's PoolPipelineWindow: a zero window disables implicit pipelining, a zero limit leaves
    // the window as the only bound.
    this.windowMs = settings.pipelineWindowMs;
    this.limit = settings.pipelineLimit;
    defineLimitScript(this.client);
    this.direct = DirectCounter.supports(settings)
      ? new DirectCounter(this.client as Redis, settings, tlsFiles, name, logger)
      : undefined;
    // ioredis reconnects by itself; without a listener an 'error' event would crash the process.
    this.client.on('error', (err: Error) => {
      this.lastConnectionError = err.message;
      this.logger?.debug({ err: err.message }, `${name}: redis connection error`);
    });
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
  async connect(deadlineMs: number): Promise<void> {
    const until = Date.now() + deadlineMs;
    const perTry = Math.min(this.settings.timeoutMs > 0 ? this.settings.timeoutMs : 10_000, 5000);
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
        await sleep(Math.min(reconnectDelayMs(attempt), Math.max(0, until - Date.now())));
      }
    }
  }

  /** INCRBY + EXPIRE per op; resolves with the counts after the increment, in op order. */
  increment(ops: readonly CounterOp[]): Promise<number[]> {
    return this.deadlines.bound(this.incrementUnbounded(ops));
  }

  private incrementUnbounded(ops: readonly CounterOp[]): Promise<number[]> {
    if (this.windowMs > 0) return this.enqueue(ops);
    if (this.isCluster) return this.incrementCluster(ops);
    if (this.direct?.usable()) {
      return this.direct.increment(ops).catch((err: unknown) => {
        // Not counted (a demoted master refused it): ioredis resends after finding the new one.
        if (err instanceof ResendThroughIoredis) return this.incrementPipeline(ops);
        throw err;
      });
    }
    return this.incrementPipeline(ops);
  }

  /** Per-op settlement: on a cluster each hash slot's pipeline succeeds or fails on its own. */
  async incrementEach(ops: readonly CounterOp[]): Promise<(number | Error)[]> {
    if (!this.isCluster || this.windowMs > 0) {
      try {
        return await this.increment(ops);
      } catch (err) {
        return ops.map(() => err as Error);
      }
    }
    // Bounded per slot group inside: a hung master must not time out the groups of the others.
    return this.incrementClusterEach(ops);
  }

  /** One pipeline per hash slot, all sent at once; each slot's ops succeed or fail together. */
  private async incrementClusterEach(ops: readonly CounterOp[]): Promise<(number | Error)[]> {
    const c = this.client as Cluster;
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
          const counts = await this.deadlines.bound(
            this.execClusterGroup(
              c,
              idx.map((i) => ops[i]),
            ),
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
   * object costs more CPU than the two commands (measured: 33 vs 24 µs per op at 32 in flight) and
   * lived long enough to be promoted, lengthening every scavenge.
   */
  private async incrementPipeline(ops: readonly CounterOp[]): Promise<number[]> {
    const c = this.client as Redis;
    this.corkForThisTick(c);
    try {
      if (ops.length === 1) {
        const op = ops[0];
        const [count] = await Promise.all([c.incrby(op.key, op.hits), c.expire(op.key, op.expireSeconds)]);
        return [count];
      }
      const pending: Promise<number>[] = new Array(ops.length * 2);
      for (let i = 0; i < ops.length; i++) {
        const op = ops[i];
        pending[2 * i] = c.incrby(op.key, op.hits);
        pending[2 * i + 1] = c.expire(op.key, op.expireSeconds);
      }
      const res = await Promise.all(pending);
      const out = new Array<number>(ops.length);
      for (let i = 0; i < ops.length; i++) out[i] = res[2 * i];
      return out;
    } catch (err) {
      throw cacheError('redis INCRBY/EXPIRE failed', err);
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
  private async incrementCluster(ops: readonly CounterOp[]): Promise<number[]> {
    const c = this.client as Cluster;
    if (ops.length === 1) return this.execClusterGroup(c, ops);
    const results = await this.incrementClusterEach(ops);
    for (const r of results) if (r instanceof Error) throw r;
    return results as number[];
  }

  private async execClusterGroup(c: Cluster, ops: readonly CounterOp[]): Promise<number[]> {
    const p = c.pipeline();
    for (let i = 0; i < ops.length; i++) {
      p.incrby(ops[i].key, ops[i].hits);
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

  private enqueue(ops: readonly CounterOp[]): Promise<number[]> {
    return new Promise<number[]>((resolve, reject) => {
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
        p.incrby(op.key, op.hits);
        p.expire(op.key, op.expireSeconds);
      }
    }
    p.exec().then(
      (res) => {
        let at = 0;
        for (const e of batch) {
          try {
            e.resolve(countsFrom(res, at, e.ops.length));
          } catch (err) {
            e.reject(err);
          }
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
    const sent = this.direct?.usable()
      ? this.direct.evaluate(checks).catch((err: unknown) => {
          // Not counted (NOSCRIPT, or a demoted master): ioredis loads the script or finds the master.
          if (err instanceof ResendThroughIoredis) return this.evaluateViaIoredis(checks);
          throw err;
        })
      : this.evaluateViaIoredis(checks);
    return this.deadlines.bound(sent).catch(this.scriptFailed);
  }

  private evaluateViaIoredis(checks: readonly LimitCheck[]): Promise<LimitVerdict[]> {
    if (!this.isCluster) this.corkForThisTick(this.client as Redis);
    return runLimitScripts(this.client, checks);
  }

  private readonly scriptFailed = (err: unknown): never => {
    throw cacheError('redis limit script failed', err);
  };

  /** Current counts (0 when absent), without counting. */
  async get(ops: readonly CounterOp[]): Promise<number[]> {
    try {
      const values = await this.deadlines.bound(Promise.all(ops.map((op) => this.client.get(op.key))));
      return values.map((v) => (v === null ? 0 : Number(v)));
    } catch (err) {
      throw cacheError('redis GET failed', err);
    }
  }

  /** PING, bounded by REDIS_TIMEOUT: the circuit breaker's recovery probe. */
  async ping(node?: Redis): Promise<void> {
    try {
      const pong = await this.deadlines.bound((node ?? this.client).ping());
      if (pong !== 'PONG') throw new CacheError(`unexpected PING answer '${pong}'`);
      this.everConnected = true;
    } catch (err) {
      throw cacheError(`redis PING (${this.name})`, err);
    }
  }

  /** True while the client has a usable connection (REDIS_HEALTH_CHECK_ACTIVE_CONNECTION). */
  isHealthy(): boolean {
    return this.client.status === 'ready';
  }

  async close(): Promise<void> {
    this.closing = true;
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
