// The limit script's send paths of a Redis deployment (evaluate, evaluateEach): on the direct
// connection when it is usable, else through ioredis; a check refused without running is resent
// alone. RedisDeployment (redis-deployment.ts) adds the INCRBY + EXPIRE paths on top of these.
import type { Redis } from 'ioredis';
import type { LimitCheck, LimitVerdict } from '../counting/index.js';
import { ResendThroughIoredis } from './direct-counter.js';
import { LIMIT_SCRIPT, runLimitScripts } from './limit-script.js';
import { verdictOf, verdictsOf } from './reply-shapes.js';
import { RedisConnection } from './redis-connection.js';
import { scriptFailure } from './send-results.js';

export class RedisScriptCalls extends RedisConnection {
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
}
