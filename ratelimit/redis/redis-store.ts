// Counters in Redis with the reference's commands and key format: per descriptor one
// INCRBY key hits and one EXPIRE key seconds, all descriptors of a request in one pipeline.
import { Redis, type RedisOptions } from 'ioredis';
import type { Logger } from 'pino';
import { CacheError, type CounterOp, type CounterStore } from '../limiter/index.js';
import type { RedisSettings, TlsFiles } from '../settings/index.js';
import { baseOptions } from './client-options.js';

export interface RedisCounterStoreOptions {
  settings: RedisSettings;
  tlsFiles: TlsFiles;
  /** A second deployment for SECOND-unit limits (REDIS_PERSECOND). */
  perSecond?: { settings: RedisSettings; tlsFiles: TlsFiles };
  logger?: Logger;
}

function makeClient(s: RedisSettings, tls: TlsFiles, prefix: string): Redis {
  if (s.type !== 'single') {
    throw new CacheError(`${prefix}_TYPE=${s.type} is not supported by this build yet`);
  }
  const opts: RedisOptions = baseOptions(s, tls, prefix);
  return new Redis(opts);
}

export class RedisCounterStore implements CounterStore {
  private readonly main: Redis;
  private readonly perSecond?: Redis;
  private readonly logger?: Logger;

  constructor(private readonly opts: RedisCounterStoreOptions) {
    this.logger = opts.logger;
    this.main = makeClient(opts.settings, opts.tlsFiles, 'REDIS');
    if (opts.perSecond)
      this.perSecond = makeClient(opts.perSecond.settings, opts.perSecond.tlsFiles, 'REDIS_PERSECOND');
    for (const c of this.clients()) {
      // ioredis reconnects by itself; without a listener an 'error' event would crash the process.
      c.on('error', (err: Error) => this.logger?.debug({ err: err.message }, 'redis connection error'));
    }
  }

  private clients(): Redis[] {
    return this.perSecond ? [this.main, this.perSecond] : [this.main];
  }

  /** Connects, retrying until the deadline, logging what it waits for (the reference blocks the same way). */
  async start(deadlineMs = 60_000): Promise<void> {
    const until = Date.now() + deadlineMs;
    for (const [client, name, url] of [
      [this.main, 'REDIS_URL', this.opts.settings.url],
      ...(this.perSecond
        ? [[this.perSecond, 'REDIS_PERSECOND_URL', this.opts.perSecond!.settings.url] as const]
        : []),
    ] as const) {
      let logged = false;
      for (;;) {
        try {
          if (client.status === 'wait' || client.status === 'end') await client.connect();
          await client.ping();
          break;
        } catch (err) {
          if (!logged) {
            this.logger?.warn(`waiting for redis at ${name}=${url}: ${(err as Error).message}`);
            logged = true;
          }
          if (Date.now() > until)
            throw new CacheError(`could not connect to redis at ${url}: ${(err as Error).message}`);
          await new Promise((r) => setTimeout(r, 200));
        }
      }
    }
  }

  private clientFor(op: CounterOp): Redis {
    return op.perSecond && this.perSecond ? this.perSecond : this.main;
  }

  async increment(ops: readonly CounterOp[]): Promise<number[]> {
    if (!this.perSecond) return this.incrementOn(this.main, ops);
    const out = new Array<number>(ops.length);
    const groups = new Map<Redis, number[]>();
    ops.forEach((op, i) => {
      const c = this.clientFor(op);
      const g = groups.get(c);
      if (g) g.push(i);
      else groups.set(c, [i]);
    });
    await Promise.all(
      [...groups].map(async ([client, idx]) => {
        const counts = await this.incrementOn(
          client,
          idx.map((i) => ops[i]),
        );
        idx.forEach((i, j) => (out[i] = counts[j]));
      }),
    );
    return out;
  }

  private async incrementOn(client: Redis, ops: readonly CounterOp[]): Promise<number[]> {
    const p = client.pipeline();
    for (const op of ops) {
      p.incrby(op.key, op.hits);
      p.expire(op.key, op.expireSeconds);
    }
    let res: [Error | null, unknown][] | null;
    try {
      res = await p.exec();
    } catch (err) {
      throw new CacheError(`redis pipeline failed: ${(err as Error).message}`, err);
    }
    if (!res) throw new CacheError('redis pipeline returned no result');
    const out = new Array<number>(ops.length);
    for (let i = 0; i < ops.length; i++) {
      const [err, value] = res[i * 2];
      if (err) throw new CacheError(`redis INCRBY failed: ${err.message}`, err);
      out[i] = Number(value);
    }
    return out;
  }

  async get(ops: readonly CounterOp[]): Promise<number[]> {
    try {
      return await Promise.all(
        ops.map(async (op) => {
          const v = await this.clientFor(op).get(op.key);
          return v === null ? 0 : Number(v);
        }),
      );
    } catch (err) {
      throw new CacheError(`redis GET failed: ${(err as Error).message}`, err);
    }
  }

  isHealthy(): boolean {
    return this.clients().every((c) => c.status === 'ready');
  }

  async close(): Promise<void> {
    await Promise.all(
      this.clients().map(async (c) => {
        try {
          await c.quit();
        } catch {
          c.disconnect();
        }
      }),
    );
  }
}
