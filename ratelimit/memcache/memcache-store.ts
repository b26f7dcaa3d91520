// Counters in memcached (BACKEND_TYPE=memcache), with the reference's keys, values and commands:
// the value is the decimal count, created with `add key 0 <exptime> ...` and bumped with `incr`
// (a refund, negative hits, is `decr`).
//
// One deliberate difference: the reference answers from a multi-get and increments afterwards in the
// background (so a client can briefly exceed its quota). Here the increment is in the request path —
// `incr`, and only for a new key `add` (then `incr` again if another writer won the `add`) — and the
// decision uses the count it returns: exact under concurrency, for one extra round trip on a new key.
// Pods of both implementations given the same node list still share the same counters.
import type { ConnectionOptions } from 'node:tls';
import type { Logger } from '../../common/index.js';
import { clientTlsOptions } from '../../common/index.js';
import { CacheError, KeyRejectedError, type CounterOp, type CounterStore } from '../counting/index.js';
import type { Settings } from '../settings/index.js';
import {
  MAX_RELATIVE_EXPTIME,
  MemcacheError,
  MemcacheNode,
  illegalKeyReason,
  pickServer,
} from './memcache-client.js';
import { serversFromSrv, type SrvResolver } from './srv.js';

export interface MemcacheCounterStoreOptions {
  settings: Settings['memcache'];
  logger?: Logger;
  /** Per-request deadline; MEMCACHE_TIMEOUT by default (gomemcache's default is 500 ms). */
  timeoutMs?: number;
  /** DNS SRV resolver (tests inject one). */
  resolveSrv?: SrvResolver;
  nowMs?: () => number;
}

function tlsConnectionOptions(s: Settings['memcache']): ConnectionOptions | undefined {
  if (!s.tls) return undefined;
  return clientTlsOptions(s.tlsFiles);
}

function memcacheError(err: unknown): CacheError {
  if (err instanceof CacheError) return err;
  const e = err as MemcacheError;
  return new CacheError(`memcache error${e.node ? ` on ${e.node}` : ''}: ${e.message}`, err);
}

export class MemcacheCounterStore implements CounterStore {
  private nodes: MemcacheNode[] = [];
  private servers: string[] = [];
  private refreshTimer?: NodeJS.Timeout;
  private readonly tls?: ConnectionOptions;
  private readonly timeoutMs: number;
  private readonly now: () => number;
  private readonly s: Settings['memcache'];
  private readonly logger?: Logger;

  constructor(private readonly opts: MemcacheCounterStoreOptions) {
    this.s = opts.settings;
    this.logger = opts.logger;
    this.timeoutMs = opts.timeoutMs ?? this.s.timeoutMs ?? 500;
    this.now = opts.nowMs ?? Date.now;
    this.tls = tlsConnectionOptions(this.s);
    if (this.s.hostPort.length > 0 && this.s.srv !== '') {
      throw new CacheError('MEMCACHE_HOST_PORT and MEMCACHE_SRV are mutually exclusive');
    }
    if (this.s.hostPort.length > 0) this.setServers(this.s.hostPort);
    else if (this.s.srv === '')
      throw new CacheError('BACKEND_TYPE=memcache needs MEMCACHE_HOST_PORT or MEMCACHE_SRV');
  }

  /** The node list in use, in key-assignment order. */
  get serverList(): readonly string[] {
    return this.servers;
  }

  private setServers(servers: readonly string[]): void {
    const keep = new Map(this.nodes.map((n) => [n.address, n]));
    const next = servers.map(
      (address) =>
        keep.get(address) ??
        new MemcacheNode({
          address,
          connections: this.s.maxIdleConns,
          timeoutMs: this.timeoutMs,
          tls: this.tls,
        }),
    );
    for (const n of this.nodes) if (!servers.includes(n.address)) n.close();
    this.nodes = next;
    this.servers = [...servers];
  }

  private async refreshFromSrv(): Promise<void> {
    const servers = await serversFromSrv(this.s.srv, this.opts.resolveSrv);
    if (servers.join(',') !== this.servers.join(',')) {
      if (this.servers.length > 0)
        this.logger?.warn(`memcache nodes from ${this.s.srv} changed: ${servers.join(',')}`);
      this.setServers(servers);
    }
  }

  /**
   * Resolves MEMCACHE_SRV (required to start, as in the reference), then waits for the nodes to answer
   * `version`, logging what it waits for. A node still down at the deadline is logged and its keys
   * fail until it is back; no node at all fails the start.
   */
  async start(deadlineMs = 60_000): Promise<void> {
    const until = this.now() + deadlineMs;
    if (this.s.srv !== '') {
      for (let attempt = 1; ; attempt++) {
        try {
          await this.refreshFromSrv();
          break;
        } catch (err) {
          const msg = (err as Error).message;
          if (attempt === 1)
            this.logger?.warn(`waiting for memcache nodes from MEMCACHE_SRV=${this.s.srv}: ${msg}`);
          if (this.now() >= until)
            throw new CacheError(`unable to fetch memcache servers from SRV: ${msg}`, err);
          await sleep(Math.min(200 * attempt, 1000));
        }
      }
      if (this.s.srvRefreshMs > 0) {
        this.refreshTimer = setInterval(() => {
          this.refreshFromSrv().catch((err: Error) =>
            this.logger?.warn(`failed to refresh memcache hosts from ${this.s.srv}: ${err.message}`),
          );
        }, this.s.srvRefreshMs);
        this.refreshTimer.unref();
      }
    }
    this.logger?.warn(`connecting to memcache at ${this.servers.join(',')}`);
    const down = new Set(this.nodes);
    for (let attempt = 1; ; attempt++) {
      const results = await Promise.allSettled([...down].map(async (n) => [n, await n.version()] as const));
      const errors: string[] = [];
      results.forEach((r, i) => {
        const n = [...down][i];
        if (r.status === 'fulfilled') down.delete(n);
        else errors.push(`${n.address}: ${(r.reason as Error).message}`);
      });
      if (down.size === 0) return;
      if (attempt === 1) this.logger?.warn(`waiting for memcache at ${errors.join('; ')}`);
      if (this.now() >= until) {
        if (down.size === this.nodes.length) {
          throw new CacheError(`could not connect to memcache: ${errors.join('; ')}`);
        }
        this.logger?.error(
          `memcache nodes still down, their keys fail until they are back: ${errors.join('; ')}`,
        );
        return;
      }
      await sleep(Math.min(100 * attempt, 1000));
    }
  }

  /** Refuses keys memcached cannot take, before anything is sent. */
  private check(ops: readonly CounterOp[]): void {
    for (let i = 0; i < ops.length; i++) {
      const reason = illegalKeyReason(ops[i].key);
      if (reason !== undefined) {
        throw new KeyRejectedError(
          `memcache: cache key '${ops[i].key.slice(0, 80)}${ops[i].key.length > 80 ? '...' : ''}' ${reason}; ` +
            'descriptors for the memcache backend must be printable, without whitespace, and keys at most 250 bytes',
        );
      }
    }
  }

  private nodeFor(key: string): MemcacheNode {
    if (this.nodes.length === 0) throw new CacheError('memcache: no servers');
    return this.nodes[pickServer(key, this.nodes.length)];
  }

  /** exptime as memcached reads it: above 30 days it must be an absolute unix time. */
  private exptime(seconds: number): number {
    return seconds > MAX_RELATIVE_EXPTIME ? Math.floor(this.now() / 1000) + seconds : seconds;
  }

  async increment(ops: readonly CounterOp[]): Promise<number[]> {
    this.check(ops);
    try {
      if (ops.length === 1) return [await this.incrementOne(ops[0])];
      // Commands for different keys are independent: all in flight at once, pipelined per connection.
      return await Promise.all(ops.map((op) => this.incrementOne(op)));
    } catch (err) {
      throw memcacheError(err);
    }
  }

  private async incrementOne(op: CounterOp): Promise<number> {
    const node = this.nodeFor(op.key);
    // A refund: memcached's decr stops at 0 and never creates the key (nothing to return to).
    if (op.hits < 0) return (await node.decr(op.key, -op.hits)) ?? 0;
    const v = await node.incr(op.key, op.hits);
    if (v !== null) return v;
    if (op.hits === 0) return 0;
    if (await node.add(op.key, String(op.hits), this.exptime(op.expireSeconds))) return op.hits;
    // Another writer created it between our incr and add: increment it now.
    const again = await node.incr(op.key, op.hits);
    if (again === null) throw new MemcacheError(`key vanished between add and incr: ${op.key}`, node.address);
    return again;
  }

  async get(ops: readonly CounterOp[]): Promise<number[]> {
    this.check(ops);
    try {
      const byNode = new Map<MemcacheNode, string[]>();
      for (const op of ops) {
        const n = this.nodeFor(op.key);
        const keys = byNode.get(n);
        if (keys) keys.push(op.key);
        else byNode.set(n, [op.key]);
      }
      const found = new Map<string, string>();
      await Promise.all(
        [...byNode].map(async ([n, keys]) => {
          for (const [k, v] of await n.getMulti(keys)) found.set(k, v);
        }),
      );
      return ops.map((op) => {
        const v = found.get(op.key);
        const n = v === undefined ? 0 : Number(v.trim());
        return Number.isFinite(n) ? n : 0;
      });
    } catch (err) {
      throw memcacheError(err);
    }
  }

  /** Memcache has no connection to watch continuously: healthy while at least one node is known. */
  isHealthy(): boolean {
    return this.nodes.length > 0;
  }

  async close(): Promise<void> {
    clearInterval(this.refreshTimer);
    for (const n of this.nodes) n.close();
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
