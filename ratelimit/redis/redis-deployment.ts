// One Redis deployment (the REDIS_* one, or the REDIS_PERSECOND_* one): its ioredis client, how the
// reference's commands are sent (per counter `INCRBY key hits` + `EXPIRE key seconds`), the optional
// implicit pipeline that batches the commands of concurrent requests, health, and the startup wait.
// The class is layered: the connection, health and READONLY handling (redis-connection.ts), the limit
// script's send paths (redis-script-calls.ts), and here the INCRBY + EXPIRE send paths and close.
import type { Cluster, Redis } from 'ioredis';
import type { Logger } from '../../common/index.js';
import type { CounterOp } from '../counting/index.js';
import type { RedisSettings, TlsFiles } from '../settings/index.js';
import { clusterSlot } from './cluster-slot.js';
import { ResendThroughIoredis } from './direct-counter.js';
import { countOf, storedCountOf } from './reply-shapes.js';
import { withTimeout } from './redis-connection.js';
import { RedisScriptCalls } from './redis-script-calls.js';
import {
  allCounted,
  cacheError,
  countsFrom,
  eachSettled,
  type ExecResult,
  sentHits,
} from './send-results.js';

/** Replies by which a cluster refuses a command without running it: it is to be sent elsewhere or again. */
const REDIRECTED = /^(MOVED|ASK|TRYAGAIN|CLUSTERDOWN) /;

/** A request waiting in the implicit pipeline. */
interface Pending {
  readonly ops: readonly CounterOp[];
  resolve(counts: (number | Error)[]): void;
  reject(err: unknown): void;
}

export class RedisDeployment extends RedisScriptCalls {
  private readonly windowMs: number;
  private readonly limit: number;
  private queue: Pending[] = [];
  private queuedCommands = 0;
  private flushScheduled = false;
  private timer: NodeJS.Timeout | undefined;
  private readonly flushNow = (): void => this.flush();

  constructor(
    name: string,
    settings: RedisSettings,
    tlsFiles: TlsFiles,
    logger?: Logger,
    onRole?: (deployment: string, replica: boolean) => void,
  ) {
    super(name, settings, tlsFiles, logger, onRole);
    // As radix's PoolPipelineWindow: a zero window disables implicit pipelining, a zero limit leaves
    // the window as the only bound.
    this.windowMs = settings.pipelineWindowMs;
    this.limit = settings.pipelineLimit;
  }

  get implicitPipelining(): boolean {
    return this.windowMs > 0;
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
