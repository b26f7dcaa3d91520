// One Redis deployment (the REDIS_* one, or the REDIS_PERSECOND_* one): sends the batches it is given
// with the reference's commands (per counter `INCRBY key hits` + `EXPIRE key seconds`, per check the
// limit script), one send path per transport: the direct RESP connection where it applies
// (direct-counter.ts; on a cluster one per master, cluster-direct.ts), ioredis' commands on one
// connection otherwise, and per-master pipelines on a cluster. Batching is the batcher's
// (counting/coalescing.ts), never done here. The connection, health and READONLY handling are
// redis-connection.ts's.
import type { Cluster, Redis } from 'ioredis';
import {
  allOrFirstError,
  type BatchResults,
  type CounterOp,
  type LimitCheck,
  type LimitVerdict,
} from '../counting/index.js';
import { clusterSlot } from './cluster-slot.js';
import { ResendThroughIoredis, type DirectCounter } from './direct-counter.js';
import { LIMIT_SCRIPT, runLimitScript } from './limit-script.js';
import { isRedirectReply } from './reply-errors.js';
import { countOf, storedCountOf, verdictOf } from './resp-reader.js';
import { RedisConnection, withTimeout } from './redis-connection.js';
import {
  cacheError,
  countsFrom,
  eachSettled,
  scriptFailure,
  type ExecResult,
  sentHits,
} from './send-results.js';

const NONE: readonly never[] = Object.freeze([]);

const keyOfOp = (op: CounterOp): string => op.key;
const keyOfCheck = (check: LimitCheck): string => check.keys[0]!;
const asError = (err: unknown): Error => err as Error;

/** A batch's results from its two parts, either of which may be absent (nothing of that kind sent). */
function both(
  counts: Promise<(number | Error)[]> | undefined,
  verdicts: Promise<(LimitVerdict | Error)[]> | undefined,
): Promise<BatchResults> {
  if (verdicts === undefined)
    return counts === undefined
      ? Promise.resolve({ counts: [], verdicts: [] })
      : counts.then((c) => ({ counts: c, verdicts: [] }));
  if (counts === undefined) return verdicts.then((v) => ({ counts: [], verdicts: v }));
  return Promise.all([counts, verdicts]).then(([c, v]) => ({ counts: c, verdicts: v }));
}

export class RedisDeployment extends RedisConnection {
  /**
   * One batch: per op its count and per check its verdict, each settled on its own. An error reply
   * fails only the item it answers (reply-errors.ts); a timeout or a lost connection fails every item
   * of the call (on a cluster, of its master's group). Never rejects.
   */
  send(ops: readonly CounterOp[], checks: readonly LimitCheck[]): Promise<BatchResults> {
    if (this.isCluster) return this.sendCluster(ops, checks);
    const sent = this.direct?.usable() ? this.sendDirect(ops, checks) : this.sendIoredis(ops, checks);
    return this.deadlines.bound(sent).catch((err: unknown) => ({
      counts: new Array<Error>(ops.length).fill(cacheError('redis INCRBY/EXPIRE failed', err)),
      verdicts: new Array<Error>(checks.length).fill(scriptFailure(err)),
    }));
  }

  /** INCRBY + EXPIRE per op; resolves with the counts after the increment, or the first op's error. */
  increment(ops: readonly CounterOp[]): Promise<number[]> {
    return this.send(ops, NONE).then((r) => allOrFirstError(r.counts));
  }

  /** Per op its count or its own error. */
  incrementEach(ops: readonly CounterOp[]): Promise<(number | Error)[]> {
    return this.send(ops, NONE).then((r) => r.counts);
  }

  /** The limit script per check; the verdicts, or the first check's error. */
  evaluate(checks: readonly LimitCheck[]): Promise<LimitVerdict[]> {
    return this.send(NONE, checks).then((r) => allOrFirstError(r.verdicts));
  }

  /** Per check its verdict or its own error. */
  evaluateEach(checks: readonly LimitCheck[]): Promise<(LimitVerdict | Error)[]> {
    return this.send(NONE, checks).then((r) => r.verdicts);
  }

  /** Through ioredis on its one connection, corked for this tick: the batch leaves in one write. */
  private sendIoredis(ops: readonly CounterOp[], checks: readonly LimitCheck[]): Promise<BatchResults> {
    return both(
      ops.length === 0 ? undefined : this.countsIoredis(ops),
      checks.length === 0 ? undefined : this.verdictsIoredis(checks),
    );
  }

  /**
   * On the direct connection (one write per tick). What it refused without running (READONLY: a demoted
   * master; NOSCRIPT) is resent, alone, through ioredis, which finds the master or loads the script; an
   * op or check that ran is never sent again. A part the connection could not take (nothing of it was
   * sent) goes through ioredis whole.
   */
  private sendDirect(ops: readonly CounterOp[], checks: readonly LimitCheck[]): Promise<BatchResults> {
    const direct = this.direct!;
    return both(
      ops.length === 0 ? undefined : this.countsDirect(direct, ops, this.resendSingle),
      checks.length === 0 ? undefined : this.verdictsDirect(direct, checks),
    );
  }

  /** Ops the direct connection refused, through ioredis' one connection. */
  private readonly resendSingle = (ops: readonly CounterOp[]) => this.countsIoredis(ops);

  /** Ops a master's direct connection refused (redirected), one pipeline per slot through ioredis. */
  private readonly resendCluster = (ops: readonly CounterOp[]) =>
    this.execPerSlot(this.client as Cluster, ops);

  /**
   * The ops on `direct`; what it refused without running, and a whole call it could not take, through
   * `resend` (ioredis).
   */
  private countsDirect(
    direct: DirectCounter,
    ops: readonly CounterOp[],
    resend: (ops: readonly CounterOp[]) => Promise<(number | Error)[]>,
  ): Promise<(number | Error)[]> {
    // `then` rather than an async function: fewer heap bytes per store call.
    return direct.increment(ops).then(
      (counts) => {
        let idx: number[] | undefined;
        for (let i = 0; i < counts.length; i++)
          if (counts[i] instanceof ResendThroughIoredis) (idx ??= []).push(i);
        if (idx === undefined) return counts;
        const again = idx;
        return resend(again.map((i) => ops[i]!)).then((r) => {
          for (let j = 0; j < again.length; j++) counts[again[j]!] = r[j]!;
          return counts;
        });
      },
      (err: unknown) =>
        err instanceof ResendThroughIoredis
          ? resend(ops)
          : new Array<Error>(ops.length).fill(cacheError('redis INCRBY/EXPIRE failed', err)),
    );
  }

  private verdictsDirect(
    direct: DirectCounter,
    checks: readonly LimitCheck[],
  ): Promise<(LimitVerdict | Error)[]> {
    return direct.evaluate(checks).then(
      (verdicts) => {
        let again: Promise<void>[] | undefined;
        for (let i = 0; i < verdicts.length; i++) {
          const r = verdicts[i]!;
          if (r instanceof ResendThroughIoredis)
            (again ??= []).push(this.evalThroughIoredis(checks[i]!, verdicts, i));
          else if (!(r instanceof Error)) verdicts[i] = verdictOf(r, checks[i]!);
        }
        return again === undefined ? verdicts : Promise.all(again).then(() => verdicts);
      },
      (err: unknown) =>
        err instanceof ResendThroughIoredis
          ? this.verdictsIoredis(checks)
          : new Array<Error>(checks.length).fill(scriptFailure(err)),
    );
  }

  /**
   * A check refused by the direct connection, as EVAL, which carries the script: under repeated SCRIPT
   * FLUSH an EVALSHA resent by ioredis can meet NOSCRIPT again.
   */
  private evalThroughIoredis(check: LimitCheck, out: (LimitVerdict | Error)[], i: number): Promise<void> {
    return this.client.call('EVAL', LIMIT_SCRIPT, check.keys.length, ...check.keys, ...check.args).then(
      (r) => void (out[i] = verdictOf(r, check)),
      (err: unknown) => void (out[i] = scriptFailure(err)),
    );
  }

  /** One script call per check through ioredis, each settled alone (on a cluster, to its keys' node). */
  private async verdictsIoredis(checks: readonly LimitCheck[]): Promise<(LimitVerdict | Error)[]> {
    if (!this.isCluster) this.corkForThisTick(this.client as Redis);
    const pending = new Array<Promise<unknown>>(checks.length);
    for (let i = 0; i < checks.length; i++) {
      const check = checks[i]!;
      if (this.full(1, check.keys[0]!)) pending[i] = Promise.reject(this.busy);
      else {
        try {
          pending[i] = runLimitScript(this.client, check);
        } catch (err) {
          pending[i] = Promise.reject(err);
        }
      }
    }
    const settled = await Promise.allSettled(pending);
    const out = new Array<LimitVerdict | Error>(checks.length);
    for (let i = 0; i < checks.length; i++) {
      const s = settled[i]!;
      out[i] = s.status === 'fulfilled' ? verdictOf(s.value, checks[i]!) : scriptFailure(s.reason);
    }
    return out;
  }

  /**
   * A cluster: each master its share, in parallel, each bounded on its own (a hung master must not
   * time out the others' items): on the master's direct connection when it has a usable one, else the
   * ops one ioredis pipeline per master and the checks one script call each to their keys' node.
   */
  private sendCluster(ops: readonly CounterOp[], checks: readonly LimitCheck[]): Promise<BatchResults> {
    return both(
      ops.length === 0 ? undefined : this.perMaster(ops, keyOfOp, this.countsOnMaster, asError),
      checks.length === 0
        ? undefined
        : this.perMaster(checks, keyOfCheck, this.verdictsOnMaster, scriptFailure),
    );
  }

  /** The master's direct connection when it has a usable one (`node`: its key in the slot map). */
  private directTo(node: string | number): DirectCounter | undefined {
    return typeof node === 'string' ? this.clusterDirect?.usable(node) : undefined;
  }

  /** One master's counters (bound once: no closure per call). */
  private readonly countsOnMaster = (node: string | number, part: CounterOp[]) => {
    const d = this.directTo(node);
    if (d !== undefined) return this.countsDirect(d, part, this.resendCluster);
    const c = this.client as Cluster;
    return part.length === 1 ? this.execClusterGroup(c, part) : this.execNodeGroup(c, part);
  };

  /** One master's checks. */
  private readonly verdictsOnMaster = (node: string | number, part: LimitCheck[]) => {
    const d = this.directTo(node);
    return d !== undefined ? this.verdictsDirect(d, part) : this.verdictsIoredis(part);
  };

  /**
   * Items grouped by the master the slot map names for their key (before the first slot map, by
   * slot), each group run and bounded by REDIS_TIMEOUT on its own, the results put back in order; a
   * group's failure (`failure` of its error) is each of its items'. The items of one store call are
   * usually one master's (the batcher sends each shard its own batch): then nothing is split. Grouped
   * by slot, a turn of N distinct keys cost N pipelines on the ioredis path.
   */
  private perMaster<I, R>(
    items: readonly I[],
    keyOf: (item: I) => string,
    run: (node: string | number, part: I[]) => Promise<(R | Error)[]>,
    failure: (err: unknown) => Error,
  ): Promise<(R | Error)[]> {
    const slots = (this.client as Cluster).slots;
    const nodes = new Array<string | number>(items.length);
    let one = true;
    for (let i = 0; i < items.length; i++) {
      const slot = clusterSlot(keyOf(items[i]!));
      nodes[i] = slots[slot]?.[0] ?? slot;
      if (nodes[i] !== nodes[0]) one = false;
    }
    const bounded = (node: string | number, part: I[]): Promise<(R | Error)[]> =>
      this.deadlines
        .bound(run(node, part))
        .catch((err: unknown) => new Array<Error>(part.length).fill(failure(err)));
    if (one) return bounded(nodes[0]!, items as I[]);
    const groups = new Map<string | number, number[]>();
    for (let i = 0; i < items.length; i++) {
      const g = groups.get(nodes[i]!);
      if (g) g.push(i);
      else groups.set(nodes[i]!, [i]);
    }
    const out = new Array<R | Error>(items.length);
    return Promise.all(
      [...groups].map(([node, idx]) =>
        bounded(
          node,
          idx.map((i) => items[i]!),
        ).then((r) => {
          for (let j = 0; j < idx.length; j++) out[idx[j]!] = r[j]!;
        }),
      ),
    ).then(() => out);
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
      if (err && isRedirectReply(err.message)) redirected.push(i);
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
  private async countsIoredis(ops: readonly CounterOp[]): Promise<(number | Error)[]> {
    if (this.full(ops.length * 2, '')) return new Array<Error>(ops.length).fill(this.busy);
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
      if (pending[pending.length - 1] === undefined) {
        // Thrown while writing: the commands already queued settle unobserved, every op fails.
        for (const p of pending) p?.catch(() => undefined);
        return new Array<Error>(ops.length).fill(cacheError('redis INCRBY/EXPIRE failed', err));
      }
      return eachSettled(pending, ops.length);
    }
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
    this.clusterDirect?.close();
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
