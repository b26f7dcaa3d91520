// The counter backends' settings: which backend counts (BACKEND_TYPE's values), the TLS client files a
// backend presents (Redis and memcache), and the Redis group (REDIS_*, REDIS_PERSECOND_*) with its
// defaults and checks. Part of the one Settings object (settings.ts), which calls redisGroupSettings.
import { EnvReader, SettingsError } from './env.js';

export type BackendType = 'redis' | 'memcache' | 'memory';
export type RedisType = 'single' | 'sentinel' | 'cluster';
export type SocketType = 'tcp' | 'unix';

export interface RedisSettings {
  socketType: SocketType;
  type: RedisType;
  url: string;
  poolSize: number;
  auth: string;
  /** Sentinel nodes' own password (REDIS_SENTINEL_AUTH). */
  sentinelAuth: string;
  tls: boolean;
  pipelineWindowMs: number;
  pipelineLimit: number;
  timeoutMs: number;
  /** The connect timeout: <prefix>_TIMEOUT, or 10 s when that is 0 (no per-command deadline). */
  connectTimeoutMs: number;
  /** A request older than this means a hung server (direct counting drops the connection): twice
   * <prefix>_TIMEOUT, or 30 s when that is 0. */
  staleRequestMs: number;
  /** Ours (<prefix>_DIRECT_COUNTING, default true): INCRBY + EXPIRE on a connection of our own (direct-counter.ts). */
  directCounting: boolean;
  /**
   * REDIS_CLOSE_CONNECTION_ON_READONLY_ERROR (both deployments): a `single` Redis answering READONLY is
   * reconnected to through its address, so a name repointed at the new master is followed.
   */
  closeConnectionOnReadOnly: boolean;
  /**
   * <prefix>_CLUSTER_PIPELINE_PARALLELISM and <prefix>_POOL_ON_EMPTY_BEHAVIOR: read and checked as the
   * reference checks them; no effect (ioredis keeps one connection per node: no pool to bound or wait on).
   */
  clusterPipelineParallelism: number;
  poolOnEmptyBehavior: string;
  /**
   * Ours (<prefix>_MAX_OUTSTANDING_COMMANDS): commands written to one Redis connection and not yet
   * answered; past it a new operation fails at once as a cache error instead of queueing behind them.
   */
  maxOutstandingCommands: number;
}

export interface TlsFiles {
  clientCert: string;
  clientKey: string;
  caCert: string;
  skipHostnameVerification: boolean;
}

/** The Redis counters (REDIS_*): the main deployment, the optional per-second one, and what they share. */
export interface RedisGroupSettings {
  main: RedisSettings;
  /** REDIS_PERSECOND_*: set only when REDIS_PERSECOND=true (second-unit limits count there). */
  perSecond: RedisSettings | undefined;
  /** REDIS_TLS_*: the client files of both deployments. */
  tlsFiles: TlsFiles;
  healthCheckActiveConnection: boolean;
  /** Ours: the circuit breaker per Redis deployment and cluster shard. */
  circuitBreaker: { enabled: boolean; failureThreshold: number; probeIntervalMs: number };
  /**
   * How long startup waits for Redis before opening the listeners without it: REDIS_STARTUP_WAIT, or
   * REDIS_STARTUP_MAX_ELAPSED_TIME when set (0 there: for as long as it takes, Infinity here).
   */
  startupWaitMs: number;
  /** REDIS_STARTUP_INITIAL_INTERVAL / _MAX_INTERVAL when either is set; else our own faster schedule. */
  startupBackoff: { initialMs: number; maxMs: number } | undefined;
}

/** REDIS_STARTUP_MAX_ELAPSED_TIME (the reference's name; 0 = no end) wins over REDIS_STARTUP_WAIT. */
function startupWaitMs(r: EnvReader): number {
  const wait = r.durationMs('REDIS_STARTUP_WAIT', 10_000);
  const elapsed = r.durationMs('REDIS_STARTUP_MAX_ELAPSED_TIME', 0);
  if (r.raw('REDIS_STARTUP_MAX_ELAPSED_TIME') === undefined) return wait;
  return elapsed === 0 ? Number.POSITIVE_INFINITY : elapsed;
}

function startupBackoff(r: EnvReader): { initialMs: number; maxMs: number } | undefined {
  const initialMs = r.durationMs('REDIS_STARTUP_INITIAL_INTERVAL', 1000);
  const maxMs = r.durationMs('REDIS_STARTUP_MAX_INTERVAL', 30_000);
  const set =
    r.raw('REDIS_STARTUP_INITIAL_INTERVAL') !== undefined ||
    r.raw('REDIS_STARTUP_MAX_INTERVAL') !== undefined;
  return set ? { initialMs, maxMs } : undefined;
}

export function redisGroupSettings(r: EnvReader, backendType: BackendType): RedisGroupSettings {
  const closeOnReadOnly = r.bool('REDIS_CLOSE_CONNECTION_ON_READONLY_ERROR', false);
  const g: RedisGroupSettings = {
    main: redisSettings(r, 'REDIS', '/var/run/nutcracker/ratelimit.sock', closeOnReadOnly),
    perSecond: undefined,
    tlsFiles: {
      clientCert: r.string('REDIS_TLS_CLIENT_CERT', ''),
      clientKey: r.string('REDIS_TLS_CLIENT_KEY', ''),
      caCert: r.string('REDIS_TLS_CACERT', ''),
      skipHostnameVerification: r.bool('REDIS_TLS_SKIP_HOSTNAME_VERIFICATION', false),
    },
    healthCheckActiveConnection: r.bool('REDIS_HEALTH_CHECK_ACTIVE_CONNECTION', false),
    circuitBreaker: {
      enabled: r.bool('REDIS_CIRCUIT_BREAKER_ENABLED', true),
      failureThreshold: r.int('REDIS_CIRCUIT_BREAKER_FAILURES', 5, { min: 1 }),
      probeIntervalMs: r.durationMs('REDIS_CIRCUIT_BREAKER_PROBE_INTERVAL', 500),
    },
    startupWaitMs: startupWaitMs(r),
    startupBackoff: startupBackoff(r),
  };
  // The REDIS_PERSECOND_* variables are read (and so checked) whether or not REDIS_PERSECOND is on.
  const perSecond = redisSettings(
    r,
    'REDIS_PERSECOND',
    '/var/run/nutcracker/ratelimitpersecond.sock',
    closeOnReadOnly,
  );
  if (r.bool('REDIS_PERSECOND', false)) g.perSecond = perSecond;
  // Refused where the reference refuses them: when it builds that Redis client.
  if (backendType === 'redis') {
    checkPoolSettings(g.main, 'REDIS');
    if (g.perSecond) checkPoolSettings(g.perSecond, 'REDIS_PERSECOND');
  }
  if (g.circuitBreaker.probeIntervalMs < 10) {
    throw new SettingsError('REDIS_CIRCUIT_BREAKER_PROBE_INTERVAL', 'must be at least 10ms');
  }
  return g;
}

/**
 * Commands one Redis connection may have unanswered: ten times what the benchmark's heaviest shape
 * holds (docs/failure-modes.md), and small enough that a stalled Redis holds a bounded amount of
 * memory in the process.
 */
export const DEFAULT_MAX_OUTSTANDING_COMMANDS = 20_000;

/**
 * The reference's checks of <prefix>_POOL_ON_EMPTY_BEHAVIOR (its Redis client, radix v4, only waits:
 * CREATE and ERROR stop the start, any other value is accepted) and of
 * <prefix>_CLUSTER_PIPELINE_PARALLELISM (negative stops a cluster's start).
 */
function checkPoolSettings(s: RedisSettings, prefix: string): void {
  const behavior = s.poolOnEmptyBehavior.toUpperCase();
  if (behavior === 'CREATE' || behavior === 'ERROR') {
    throw new SettingsError(
      `${prefix}_POOL_ON_EMPTY_BEHAVIOR`,
      `${behavior} is not supported (as in the reference since its Redis client radix v4): remove the setting or set it to WAIT`,
    );
  }
  if (s.type === 'cluster' && s.clusterPipelineParallelism < 0) {
    throw new SettingsError(`${prefix}_CLUSTER_PIPELINE_PARALLELISM`, 'must be >= 0');
  }
}

function redisSettings(
  r: EnvReader,
  prefix: string,
  defaultUrl: string,
  closeConnectionOnReadOnly: boolean,
): RedisSettings {
  const s: RedisSettings = {
    socketType: r.oneOf(`${prefix}_SOCKET_TYPE`, 'unix', ['tcp', 'unix'] as const),
    type: r.oneOf(`${prefix}_TYPE`, 'single', ['single', 'sentinel', 'cluster'] as const),
    url: r.string(`${prefix}_URL`, defaultUrl),
    poolSize: r.int(`${prefix}_POOL_SIZE`, 10, { min: 1 }),
    auth: r.string(`${prefix}_AUTH`, ''),
    sentinelAuth: r.string(`${prefix}_SENTINEL_AUTH`, ''),
    tls: r.bool(`${prefix}_TLS`, false),
    pipelineWindowMs: r.durationMs(`${prefix}_PIPELINE_WINDOW`, 0),
    pipelineLimit: r.int(`${prefix}_PIPELINE_LIMIT`, 0, { min: 0 }),
    timeoutMs: r.durationMs(`${prefix}_TIMEOUT`, 10_000),
    connectTimeoutMs: 0,
    staleRequestMs: 0,
    directCounting: r.bool(`${prefix}_DIRECT_COUNTING`, true),
    closeConnectionOnReadOnly,
    clusterPipelineParallelism: r.int(`${prefix}_CLUSTER_PIPELINE_PARALLELISM`, 1),
    poolOnEmptyBehavior: r.string(`${prefix}_POOL_ON_EMPTY_BEHAVIOR`, 'WAIT'),
    maxOutstandingCommands: r.int(`${prefix}_MAX_OUTSTANDING_COMMANDS`, DEFAULT_MAX_OUTSTANDING_COMMANDS, {
      min: 1,
    }),
  };
  // "0 means 10 s" (and 30 s) decided here once: the Redis clients read these and make no choice.
  s.connectTimeoutMs = s.timeoutMs > 0 ? s.timeoutMs : 10_000;
  s.staleRequestMs = s.timeoutMs > 0 ? s.timeoutMs * 2 : 30_000;
  return s;
}
