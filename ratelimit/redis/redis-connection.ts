// One Redis deployment's connection: its ioredis client and the direct counting connection(s) beside it,
// the startup wait (connect), the bound on commands waiting on a connection, the per-tick cork of its
// writes, health (PING, isHealthy), and what a `single` Redis answering READONLY does (ROLE polled
// until it is a master again, or a reconnect through the address). The commands that count are sent by
// the deployment above it (redis-deployment.ts).
import type { Cluster, Redis } from 'ioredis';
import type { Logger } from '../../common/index.js';
import { CacheBusyError, CacheError } from '../counting/index.js';
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
import { ClusterDirectCounters } from './cluster-direct.js';
import { clusterSlot } from './cluster-slot.js';
import { DirectCounter } from './direct-counter.js';
import { defineLimitScript } from './limit-script.js';
import { cacheError } from './send-results.js';

export class RedisConnection {
  readonly client: RedisClient;
  readonly isCluster: boolean;
  /** REDIS or REDIS_PERSECOND: names the variables in log lines and errors. */
  readonly name: string;
  private readonly settings: RedisSettings;
  private readonly logger?: Logger;
  private lastConnectionError = '';
  protected readonly deadlines: RequestDeadlines;
  /** <name>_MAX_OUTSTANDING_COMMANDS: commands one connection may have unanswered. */
  private readonly maxOutstanding: number;
  /** One error for every call refused by the bound: no stack captured per refusal. */
  protected readonly busy: CacheBusyError;
  /** INCRBY + EXPIRE on a connection of our own while ioredis is connected (direct-counter.ts). */
  protected readonly direct: DirectCounter | undefined;
  /** On a cluster: the same, one per master (cluster-direct.ts). */
  protected readonly clusterDirect: ClusterDirectCounters | undefined;
  protected closing = false;
  /** True once the deployment has answered a PING (health: ready for the cache). */
  everConnected = false;
  /**
   * A `single` Redis answering READONLY: it was made a replica (REPLICAOF) and cannot count. Cleared
   * when ROLE says master again (checked every ROLE_CHECK_MS meanwhile, and by the breaker's probes).
   */
  demoted = false;
  protected roleTimer: NodeJS.Timeout | undefined;
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
    defineLimitScript(this.client);
    const direct = DirectCounter.supports(settings);
    this.direct =
      direct && !this.isCluster
        ? new DirectCounter(
            this.client as Redis,
            settings,
            tlsFiles,
            name,
            logger,
            settings.type === 'single' ? this.sawReadOnly : undefined,
          )
        : undefined;
    this.clusterDirect =
      direct && this.isCluster
        ? new ClusterDirectCounters(
            this.client as Cluster,
            (node) => new DirectCounter(node, settings, tlsFiles, name, logger),
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
  protected full(commands: number, key: string): boolean {
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

  /** Direct counting connections kept: on a cluster one per master at most (for tests). */
  get directCounters(): number {
    return this.clusterDirect?.size ?? (this.direct ? 1 : 0);
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

  private corked = false;

  /**
   * Holds the connection's writes until the end of this tick, so the commands of every request decided
   * in it leave in one write (writev) instead of one system call per command.
   */
  protected corkForThisTick(c: Redis): void {
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
}

/** How often a demoted `single` Redis is asked for its role. */
const ROLE_CHECK_MS = 1000;

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

export async function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
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
