// Turns the reference's REDIS_* (or REDIS_PERSECOND_*) settings into an ioredis client:
// a Redis for `single` (tcp or unix socket) and `sentinel` (ioredis's own sentinel support),
// a Cluster for `cluster` (ioredis's own cluster support, MOVED/ASK followed by it).
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import { clientTlsOptions } from '../../common/index.js';
import type { RedisSettings, TlsFiles } from '../settings/index.js';
import { SettingsError } from '../settings/index.js';

export type RedisClient = Redis | Cluster;

export interface HostPort {
  host: string;
  port: number;
}

/** REDIS_URL parsed for its REDIS_TYPE. */
export type RedisTarget =
  | { type: 'single'; path: string }
  | ({ type: 'single' } & HostPort)
  | { type: 'sentinel'; masterName: string; sentinels: HostPort[] }
  | { type: 'cluster'; nodes: HostPort[] };

/** Splits REDIS_AUTH: `password` or `username:password` (ACL users), as the reference does. */
export function parseAuth(auth: string): { username?: string; password?: string } {
  if (!auth) return {};
  const i = auth.indexOf(':');
  if (i < 0) return { password: auth };
  return { username: auth.slice(0, i), password: auth.slice(i + 1) };
}

export function parseHostPort(text: string, variable: string): HostPort {
  const t = text.trim();
  const i = t.lastIndexOf(':');
  const host = i > 0 ? t.slice(0, i).replace(/^\[(.*)\]$/, '$1') : '';
  const port = i > 0 ? Number(t.slice(i + 1)) : NaN;
  if (!host || !Number.isInteger(port) || port <= 0 || port > 65535) {
    throw new SettingsError(variable, `invalid address '${text}' (expected host:port)`);
  }
  return { host, port };
}

/** The forms of REDIS_URL: one address (or socket path), `master,sentinel,...`, or every cluster node. */
export function parseRedisTarget(s: RedisSettings, variable: string): RedisTarget {
  const items = s.url
    .split(',')
    .map((x) => x.trim())
    .filter((x) => x !== '');
  switch (s.type) {
    case 'single':
      if (items.length !== 1) throw new SettingsError(variable, `expected one address, got '${s.url}'`);
      if (s.socketType === 'unix') return { type: 'single', path: items[0] };
      return { type: 'single', ...parseHostPort(items[0], variable) };
    case 'sentinel':
      // The reference's rule: at least two items, the master name first.
      if (items.length < 2) {
        throw new SettingsError(
          variable,
          `expected '<master name>,<sentinel host:port>,...' for the sentinel type, got '${s.url}'`,
        );
      }
      return {
        type: 'sentinel',
        masterName: items[0],
        sentinels: items.slice(1).map((x) => parseHostPort(x, variable)),
      };
    case 'cluster':
      if (items.length < 1) throw new SettingsError(variable, 'expected the cluster nodes as host:port,...');
      return { type: 'cluster', nodes: items.map((x) => parseHostPort(x, variable)) };
  }
}

export function tlsOptions(files: TlsFiles): NonNullable<RedisOptions['tls']> {
  return clientTlsOptions(files);
}

/** REDIS_STARTUP_INITIAL_INTERVAL / REDIS_STARTUP_MAX_INTERVAL: the wait between startup attempts. */
export interface StartupBackoff {
  initialMs: number;
  maxMs: number;
}

/**
 * The wait before startup attempt `attempt + 1` (attempt from 1) under REDIS_STARTUP_*_INTERVAL, as the
 * reference waits: the initial interval doubling per attempt up to the maximum, with jitter drawn
 * between the initial interval and that (`random` in [0, 1)).
 */
export function startupDelayMs(attempt: number, b: StartupBackoff, random: number = Math.random()): number {
  const max = Math.max(b.maxMs, b.initialMs);
  const d = Math.min(max, b.initialMs * 2 ** Math.min(attempt - 1, 52));
  return b.initialMs + random * (d - b.initialMs);
}

/** Reconnect backoff: 100, 200, 400, 800 ms, then every second (short, so a failover is followed fast). */
export function reconnectDelayMs(times: number): number {
  return Math.min(50 * 2 ** Math.min(times, 5), 1000);
}

/**
 * A master demoted to replica (sentinel failover while the old master stays up) answers writes with
 * READONLY: reconnect, which asks the sentinels for the new master, and resend (nothing was written).
 */
function reconnectOnReadOnly(err: Error): 2 | false {
  return err.message.startsWith('READONLY') ? 2 : false;
}

/**
 * A `single` Redis has one address: reconnecting to it cannot find another master, it only loops
 * (ioredis reconnected ~10 times a second, every command waiting for REDIS_TIMEOUT). READONLY is then
 * answered to the command as it is (a shard failure for the circuit breaker), and reported.
 */
function reportReadOnly(onReadOnly: () => void): (err: Error) => false {
  return (err) => {
    if (err.message.startsWith('READONLY')) onReadOnly();
    return false;
  };
}

/**
 * Options of every data-node connection of one deployment. `onReadOnly` (a `single` deployment): told
 * of each READONLY reply instead of reconnecting.
 */
export function connectionOptions(
  s: RedisSettings,
  tlsFiles: TlsFiles,
  onReadOnly?: () => void,
): RedisOptions {
  const opts: RedisOptions = {
    ...parseAuth(s.auth),
    lazyConnect: true,
    // Fail a command fast while disconnected instead of queueing it for long: the decision is
    // answered as an error (the caller's failure mode decides) and the process keeps running.
    maxRetriesPerRequest: 1,
    // A command written before a connection dropped may or may not have run: never resend it, so an
    // INCRBY is never counted twice. The request fails instead.
    autoResendUnfulfilledCommands: false,
    // REDIS_TIMEOUT bounds each request in RedisDeployment (deadlines.ts), not each command: ioredis'
    // commandTimeout arms a timer per command.
    connectTimeout: s.connectTimeoutMs,
    retryStrategy: reconnectDelayMs,
    reconnectOnError:
      s.type === 'single' ? reportReadOnly(onReadOnly ?? (() => undefined)) : reconnectOnReadOnly,
  };
  if (s.tls) opts.tls = tlsOptions(tlsFiles);
  return opts;
}

/** Builds the (not yet connected) ioredis client for one deployment. */
export function createRedisClient(
  s: RedisSettings,
  tlsFiles: TlsFiles,
  variablePrefix: string,
  onReadOnly?: () => void,
): RedisClient {
  const target = parseRedisTarget(s, `${variablePrefix}_URL`);
  const opts = connectionOptions(s, tlsFiles, onReadOnly);
  // ioredis batches the commands of one event-loop tick per node; with a pipeline window the batcher
  // (counting/coalescing.ts) sends a whole window in one tick, so on a cluster its script calls are
  // grouped per node too.
  const autoPipeline = s.pipelineWindowMs > 0;
  switch (target.type) {
    case 'single':
      return new Redis({
        ...opts,
        ...('path' in target ? { path: target.path } : { host: target.host, port: target.port }),
      });
    case 'sentinel': {
      const sentinelAuth = parseAuth(s.sentinelAuth);
      return new Redis({
        ...opts,
        name: target.masterName,
        sentinels: target.sentinels,
        sentinelUsername: sentinelAuth.username,
        sentinelPassword: sentinelAuth.password,
        // REDIS_TLS covers the sentinels too, as in the reference (one dialer for both).
        enableTLSForSentinelMode: s.tls,
        sentinelTLS: s.tls ? opts.tls : undefined,
        sentinelRetryStrategy: reconnectDelayMs,
        // Subscribes to +switch-master so a failover is followed at once, not at the next error.
        failoverDetector: true,
      });
    }
    case 'cluster': {
      const { retryStrategy: _r, ...redisOptions } = opts;
      const clusterOpts: ClusterOptions = {
        redisOptions,
        lazyConnect: true,
        enableAutoPipelining: autoPipeline,
        clusterRetryStrategy: reconnectDelayMs,
        // While a master is down its slots answer "connection closed" or CLUSTERDOWN: retry every
        // 100 ms, refreshing the slot map, until a replica is promoted or the redirections run out.
        retryDelayOnFailover: 100,
        retryDelayOnClusterDown: 100,
        retryDelayOnTryAgain: 100,
        maxRedirections: 16,
        slotsRefreshTimeout: Math.min(s.connectTimeoutMs, 2000),
      };
      return new Cluster(target.nodes, clusterOpts);
    }
  }
}

/** Where a deployment points, for log lines (never the password). */
export function describeTarget(s: RedisSettings): string {
  return `${s.type} ${s.socketType === 'unix' && s.type === 'single' ? 'unix:' : ''}${s.url}${s.tls ? ' (tls)' : ''}`;
}
