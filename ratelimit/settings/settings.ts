// One typed settings object, parsed once from the environment at startup and passed down.
// Names and defaults follow the reference service (envoyproxy/ratelimit src/settings/settings.go).
import {
  DEFAULT_MAX_DESCRIPTORS,
  DEFAULT_YAML_LIMITS,
  FAILURE_MODES,
  type FailureMode,
  type YamlLimits,
} from '../config/index.js';
import { DEFAULT_REQUEST_BOUNDS, type RequestBounds, XDS_MAX_MESSAGE_BYTES } from '../../proto/index.js';
import { DEFAULT_H2_LIMITS, type H2Limits } from '../../h2grpc/index.js';
import { EnvReader, SettingsError, type Env } from './env.js';

/** CACHE_FAILURE_MODE_LOCAL_MAX_BYTES's default: the budget of `local` failure mode's counters. */
export const DEFAULT_LOCAL_MAX_BYTES = 64 * 1024 * 1024;

/** MEMORY_MAX_BYTES: the memory backend's byte budget (ratelimit/memory). */
export const DEFAULT_MEMORY_MAX_BYTES = 256 * 1024 * 1024;

export type ConfigType = 'FILE' | 'GRPC_XDS_SOTW' | 'GRPC_XDS_DELTA';
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

/** The gRPC listener (GRPC_*). */
export interface GrpcSettings {
  host: string;
  port: number;
  /** GRPC_UDS: a Unix socket path to listen on as well ('' for none). */
  uds: string;
  maxConnectionAgeMs: number;
  maxConnectionAgeGraceMs: number;
  /** Max gRPC request size the server accepts (ours; the reference uses gRPC's 4 MiB default). */
  maxRecvMsgSize: number;
  /**
   * The HTTP/2 bounds: GRPC_MAX_CONCURRENT_STREAMS, GRPC_MAX_SESSION_MEMORY_MB,
   * GRPC_MAX_TOTAL_SESSION_MEMORY_MB, GRPC_MAX_HEADER_LIST_SIZE, GRPC_MAX_CONNECTIONS,
   * GRPC_MAX_CONNECTION_IDLE, GRPC_KEEPALIVE_MIN_TIME, GRPC_KEEPALIVE_PERMIT_WITHOUT_STREAM.
   */
  limits: H2Limits;
  /** GRPC_MAX_DECOMPRESSED_MSG_SIZE: bytes a compressed gRPC request may inflate to (checked while inflating). */
  maxDecompressedMsgSize: number;
  /** GRPC_HTTP2_SERVER: the HTTP/2 layer under the listener, ours ('builtin') or node:http2 ('node'). */
  http2: 'builtin' | 'node';
  /** GRPC_SERVER_USE_TLS and its files; cert and key are both set when enabled (checked at parse). */
  tls: { enabled: boolean; cert: string; key: string; clientCaCert: string; clientSan: string };
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

export interface Settings {
  // listeners
  host: string;
  port: number;
  grpc: GrpcSettings;
  debugHost: string;
  debugPort: number;
  /** DEBUG_PPROF_ENABLED: serve the heap snapshot and CPU profile (off: they expose process memory). */
  debugPprofEnabled: boolean;
  /** SHUTDOWN_DRAIN_TIMEOUT: how long SIGTERM lets calls in progress finish before connections are cut. */
  shutdownDrainMs: number;
  /** HTTP_MAX_BODY_BYTES: largest /json body. */
  httpMaxBodyBytes: number;
  /** REQUEST_MAX_*: what one rate limit request may ask for (gRPC and /json alike). */
  requestBounds: RequestBounds;

  // logging
  logLevel: string;
  logFormat: 'text' | 'json';

  // config source
  configType: ConfigType;
  forceStartWithoutInitialConfig: boolean;
  runtimeRoot: string;
  runtimeSubdirectory: string;
  runtimeAppDirectory: string;
  runtimeIgnoreDotFiles: boolean;
  runtimeWatchRoot: boolean;
  mergeDomainConfig: boolean;
  healthyWithAtLeastOneConfigLoaded: boolean;
  /** Bounds on each config YAML file (CONFIG_YAML_*), checked before it expands. */
  configYamlLimits: YamlLimits;
  /** CONFIG_PARSE_TIMEOUT: a parse running longer is stopped and its files rejected. */
  configParseTimeoutMs: number;
  /** CONFIG_MAX_DESCRIPTORS: descriptors of the whole config (every level, every domain); a larger config is refused. */
  configMaxDescriptors: number;

  // xDS client
  xds: {
    nodeId: string;
    nodeMetadata: Record<string, string>;
    serverUrl: string;
    connectRetryIntervalMs: number;
    additionalHeaders: Record<string, string>;
    useTls: boolean;
    clientTlsCert: string;
    clientTlsKey: string;
    serverTlsCaCert: string;
    serverTlsSan: string;
    backoffInitialMs: number;
    backoffMaxMs: number;
    backoffRandomFactor: number;
    backoffJitter: boolean;
    maxMsgSizeBytes: number;
  };

  // decisions
  globalShadowMode: boolean;
  globalQuotaMode: boolean;
  responseDynamicMetadata: boolean;
  nearLimitRatio: number;
  localCacheSizeInBytes: number;
  expirationJitterMaxSeconds: number;
  cacheKeyPrefix: string;
  backendType: BackendType;
  /** MEMORY_MAX_BYTES: memory of BACKEND_TYPE=memory's counters (keys are request values). */
  memoryMaxBytes: number;
  stopCacheKeyIncrementWhenOverlimit: boolean;
  /** Ours: merge concurrent increments of one key into one store command (default true). */
  coalesceIncrements: boolean;
  /** Ours (CACHE_WRITE_BEHIND_*): decide known fixed-window keys locally, send their hits in batches. */
  writeBehind: { enabled: boolean; intervalMs: number; maxKeys: number; maxBytes: number };
  responseHeadersEnabled: boolean;
  headerLimit: string;
  headerRemaining: string;
  headerReset: string;
  /** LIMIT_REQUEST_HEADERS_ENABLED: the same three headers in request_headers_to_add (for the upstream service). */
  requestHeadersEnabled: boolean;
  requestHeaderLimit: string;
  requestHeaderRemaining: string;
  requestHeaderReset: string;

  // counters
  redis: RedisGroupSettings;
  /** Ours: what a descriptor gets when its counter cannot be counted (CACHE_FAILURE_MODE*). */
  failureMode: { mode: FailureMode; localPods: number; localMaxBytes: number };
  memcache: {
    hostPort: string[];
    srv: string;
    srvRefreshMs: number;
    maxIdleConns: number;
    /** MEMCACHE_TIMEOUT: deadline of one memcache call. */
    timeoutMs: number;
    tls: boolean;
    tlsFiles: TlsFiles;
  };

  // statistics
  stats: {
    disabled: boolean;
    /** STATS_MAX_UNKNOWN_DOMAINS: distinct unknown request domains given their own stat series. */
    maxUnknownDomains: number;
    useStatsd: boolean;
    statsdHost: string;
    statsdPort: number;
    flushIntervalMs: number;
    extraTags: Record<string, string>;
    useDogStatsd: boolean;
    dogStatsdMogrifiers: string[];
    usePrometheus: boolean;
    prometheusAddr: string;
    prometheusPath: string;
    prometheusMapperYaml: string;
    prometheusResponseTimeAsMilliseconds: boolean;
  };

  // tracing
  tracing: {
    enabled: boolean;
    exporterProtocol: 'http' | 'grpc';
    serviceName: string;
    serviceNamespace: string;
    serviceInstanceId: string;
    samplingRate: number;
  };

  /** Ours (NAMED_LIMITS_*): which named limit decided, in headers, metadata, logs and statistics. */
  namedLimits: NamedLimitsSettings;
  /** RLQS_*: the rate limit quota server (ratelimit/quota, docs/rlqs.md). */
  quota: QuotaSettings;
  /** CONFIG_PARSE_SPARE_WORKER: how config files are reloaded (ratelimit/sources/file.ts). */
  configReload: ConfigReloadSettings;
}

export interface NamedLimitsSettings {
  /** NAMED_LIMITS_IETF_HEADERS: add the IETF RateLimit-Policy and RateLimit response headers. */
  ietfHeaders: boolean;
  /** NAMED_LIMITS_DYNAMIC_METADATA: add `namedLimits` (one struct per descriptor) to dynamic metadata. */
  dynamicMetadata: boolean;
  /** NAMED_LIMITS_STATS_MAX_SERIES: distinct limit names given an over_limit series (0: none). */
  statsMaxSeries: number;
  /** NAMED_LIMITS_LOG_ENABLED: log over-limit decisions at info. */
  logEnabled: boolean;
  /** NAMED_LIMITS_LOG_SAMPLE_RATE: the share of over-limit decisions considered for a line. */
  logSampleRate: number;
  /** NAMED_LIMITS_LOG_MAX_PER_SECOND: lines written per second at most (a token bucket). */
  logMaxPerSecond: number;
  /** NAMED_LIMITS_LOG_REDACT_KEYS: descriptor keys whose values are logged as <redacted>. */
  logRedactKeys: string[];
  /** NAMED_LIMITS_LOG_MAX_VALUE_BYTES: a longer descriptor value is cut to this many bytes in a line. */
  logMaxValueBytes: number;
}

function namedLimitsSettings(r: EnvReader): NamedLimitsSettings {
  return {
    ietfHeaders: r.bool('NAMED_LIMITS_IETF_HEADERS', false),
    dynamicMetadata: r.bool('NAMED_LIMITS_DYNAMIC_METADATA', false),
    statsMaxSeries: r.int('NAMED_LIMITS_STATS_MAX_SERIES', 1000, { min: 0, max: 1_000_000 }),
    logEnabled: r.bool('NAMED_LIMITS_LOG_ENABLED', false),
    logSampleRate: r.float('NAMED_LIMITS_LOG_SAMPLE_RATE', 1, { min: 0, max: 1 }),
    logMaxPerSecond: r.int('NAMED_LIMITS_LOG_MAX_PER_SECOND', 10, { min: 1, max: 100_000 }),
    logRedactKeys: r.list('NAMED_LIMITS_LOG_REDACT_KEYS'),
    logMaxValueBytes: r.int('NAMED_LIMITS_LOG_MAX_VALUE_BYTES', 128, { min: 1, max: 65_536 }),
  };
}

const MB = 1024 * 1024;

function h2Limits(r: EnvReader): H2Limits {
  const d = DEFAULT_H2_LIMITS;
  const limits: H2Limits = {
    maxConcurrentStreams: r.int('GRPC_MAX_CONCURRENT_STREAMS', d.maxConcurrentStreams, {
      min: 1,
      max: 2 ** 31 - 1,
    }),
    maxSessionMemory: MB * r.int('GRPC_MAX_SESSION_MEMORY_MB', d.maxSessionMemory / MB, { min: 1 }),
    maxTotalSessionMemory:
      MB * r.int('GRPC_MAX_TOTAL_SESSION_MEMORY_MB', d.maxTotalSessionMemory / MB, { min: 1 }),
    maxHeaderListSize: r.int('GRPC_MAX_HEADER_LIST_SIZE', d.maxHeaderListSize, {
      min: 1024,
      max: 512 * 1024,
    }),
    prefaceTimeoutMs: d.prefaceTimeoutMs,
    maxConnectionIdleMs: r.durationMs('GRPC_MAX_CONNECTION_IDLE', d.maxConnectionIdleMs),
    keepaliveMinTimeMs: r.durationMs('GRPC_KEEPALIVE_MIN_TIME', d.keepaliveMinTimeMs),
    keepalivePermitWithoutStream: r.bool(
      'GRPC_KEEPALIVE_PERMIT_WITHOUT_STREAM',
      d.keepalivePermitWithoutStream,
    ),
    maxConnections: r.int('GRPC_MAX_CONNECTIONS', d.maxConnections, { min: 0 }),
  };
  return limits;
}

function grpcSettings(r: EnvReader): GrpcSettings {
  const g: GrpcSettings = {
    host: r.string('GRPC_HOST', '0.0.0.0'),
    port: r.int('GRPC_PORT', 8081, { min: 0, max: 65535 }),
    uds: r.string('GRPC_UDS', ''),
    maxConnectionAgeMs: r.durationMs('GRPC_MAX_CONNECTION_AGE', 24 * 3_600_000),
    maxConnectionAgeGraceMs: r.durationMs('GRPC_MAX_CONNECTION_AGE_GRACE', 3_600_000),
    maxRecvMsgSize: r.int('GRPC_MAX_RECV_MSG_SIZE', 4 * 1024 * 1024, { min: 1024 }),
    maxDecompressedMsgSize: r.int('GRPC_MAX_DECOMPRESSED_MSG_SIZE', 64 * 1024, { min: 1024 }),
    limits: h2Limits(r),
    http2: r.oneOf('GRPC_HTTP2_SERVER', 'builtin', ['builtin', 'node'] as const),
    tls: {
      enabled: r.bool('GRPC_SERVER_USE_TLS', false),
      cert: r.string('GRPC_SERVER_TLS_CERT', ''),
      key: r.string('GRPC_SERVER_TLS_KEY', ''),
      clientCaCert: r.string('GRPC_CLIENT_TLS_CACERT', ''),
      clientSan: r.string('GRPC_CLIENT_TLS_SAN', ''),
    },
  };
  if (g.tls.enabled && (!g.tls.cert || !g.tls.key)) {
    throw new SettingsError(
      'GRPC_SERVER_TLS_CERT',
      'GRPC_SERVER_USE_TLS=true needs GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY',
    );
  }
  return g;
}

function redisGroupSettings(r: EnvReader, backendType: BackendType): RedisGroupSettings {
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

/** Parses every setting; throws SettingsError naming the variable on the first invalid value. */
export function loadSettings(env: Env = process.env): Settings {
  const r = new EnvReader(env);
  // Read with its default, so `ratelimit --help` (which notes each read) shows it.
  const backend = r.string('BACKEND_TYPE', 'redis');
  const b = backend.toLowerCase();
  if (b !== 'redis' && b !== 'memcache' && b !== 'memory')
    throw new SettingsError('BACKEND_TYPE', `invalid value '${backend}' (one of: redis, memcache, memory)`);
  const backendType: BackendType = b;

  const s: Settings = {
    host: r.string('HOST', '0.0.0.0'),
    port: r.int('PORT', 8080, { min: 0, max: 65535 }),
    grpc: grpcSettings(r),
    debugHost: r.string('DEBUG_HOST', '0.0.0.0'),
    debugPort: r.int('DEBUG_PORT', 6070, { min: 0, max: 65535 }),
    debugPprofEnabled: r.bool('DEBUG_PPROF_ENABLED', false),
    shutdownDrainMs: r.durationMs('SHUTDOWN_DRAIN_TIMEOUT', 10_000),
    httpMaxBodyBytes: r.int('HTTP_MAX_BODY_BYTES', 64 * 1024, { min: 1024 }),
    requestBounds: {
      maxDescriptors: r.int('REQUEST_MAX_DESCRIPTORS', DEFAULT_REQUEST_BOUNDS.maxDescriptors, { min: 1 }),
      maxEntries: r.int('REQUEST_MAX_DESCRIPTOR_ENTRIES', DEFAULT_REQUEST_BOUNDS.maxEntries, { min: 1 }),
      maxKeyBytes: r.int('REQUEST_MAX_KEY_BYTES', DEFAULT_REQUEST_BOUNDS.maxKeyBytes, { min: 1 }),
      maxValueBytes: r.int('REQUEST_MAX_VALUE_BYTES', DEFAULT_REQUEST_BOUNDS.maxValueBytes, { min: 1 }),
      // At most 2^32-1: above it an addend is over any (uint32) limit by itself, and it keeps a
      // window's sum exact in a double for over two million such hits (docs/decisions/003).
      maxHitsAddend: r.int('REQUEST_MAX_HITS_ADDEND', DEFAULT_REQUEST_BOUNDS.maxHitsAddend, {
        min: 1,
        max: 4294967295,
      }),
    },

    logLevel: r.string('LOG_LEVEL', 'WARN'),
    logFormat: r.oneOf('LOG_FORMAT', 'text', ['text', 'json'] as const),

    configType: r.oneOf('CONFIG_TYPE', 'FILE', ['FILE', 'GRPC_XDS_SOTW', 'GRPC_XDS_DELTA'] as const, false),
    forceStartWithoutInitialConfig: r.bool('FORCE_START_WITHOUT_INITIAL_CONFIG', false),
    runtimeRoot: r.string('RUNTIME_ROOT', '/srv/runtime_data/current'),
    runtimeSubdirectory: r.string('RUNTIME_SUBDIRECTORY', ''),
    runtimeAppDirectory: r.string('RUNTIME_APPDIRECTORY', 'config'),
    runtimeIgnoreDotFiles: r.bool('RUNTIME_IGNOREDOTFILES', false),
    runtimeWatchRoot: r.bool('RUNTIME_WATCH_ROOT', true),
    mergeDomainConfig: r.bool('MERGE_DOMAIN_CONFIG', false),
    healthyWithAtLeastOneConfigLoaded: r.bool('HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED', false),
    configYamlLimits: {
      maxBytes: r.int('CONFIG_YAML_MAX_BYTES', DEFAULT_YAML_LIMITS.maxBytes, { min: 1 }),
      maxAliases: r.int('CONFIG_YAML_MAX_ALIASES', DEFAULT_YAML_LIMITS.maxAliases, { min: 0 }),
      maxScalarLength: r.int('CONFIG_YAML_MAX_SCALAR_BYTES', DEFAULT_YAML_LIMITS.maxScalarLength, { min: 1 }),
      maxDepth: r.int('CONFIG_YAML_MAX_DEPTH', DEFAULT_YAML_LIMITS.maxDepth, { min: 1, max: 1000 }),
      maxNodes: r.int('CONFIG_YAML_MAX_NODES', DEFAULT_YAML_LIMITS.maxNodes, { min: 1 }),
    },
    configParseTimeoutMs: r.durationMs('CONFIG_PARSE_TIMEOUT', 30_000),
    configMaxDescriptors: r.int('CONFIG_MAX_DESCRIPTORS', DEFAULT_MAX_DESCRIPTORS, { min: 1 }),

    xds: {
      nodeId: r.string('CONFIG_GRPC_XDS_NODE_ID', 'default'),
      nodeMetadata: r.map('CONFIG_GRPC_XDS_NODE_METADATA'),
      serverUrl: r.string('CONFIG_GRPC_XDS_SERVER_URL', 'localhost:18000'),
      connectRetryIntervalMs: r.durationMs('CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL', 3000),
      additionalHeaders: r.map('CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS'),
      useTls: r.bool('CONFIG_GRPC_XDS_SERVER_USE_TLS', false),
      clientTlsCert: r.string('CONFIG_GRPC_XDS_CLIENT_TLS_CERT', ''),
      clientTlsKey: r.string('CONFIG_GRPC_XDS_CLIENT_TLS_KEY', ''),
      serverTlsCaCert: r.string('CONFIG_GRPC_XDS_SERVER_TLS_CACERT', ''),
      serverTlsSan: r.string('CONFIG_GRPC_XDS_SERVER_TLS_SAN', ''),
      backoffInitialMs: r.durationMs('XDS_CLIENT_BACKOFF_INITIAL_INTERVAL', 10_000),
      backoffMaxMs: r.durationMs('XDS_CLIENT_BACKOFF_MAX_INTERVAL', 60_000),
      backoffRandomFactor: r.float('XDS_CLIENT_BACKOFF_RANDOM_FACTOR', 0.5, { min: 0 }),
      backoffJitter: r.bool('XDS_CLIENT_BACKOFF_JITTER', true),
      maxMsgSizeBytes: r.int('XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES', XDS_MAX_MESSAGE_BYTES, { min: 1024 }),
    },

    globalShadowMode: r.bool('SHADOW_MODE', false),
    globalQuotaMode: r.bool('QUOTA_MODE', false),
    responseDynamicMetadata: r.bool('RESPONSE_DYNAMIC_METADATA', false),
    nearLimitRatio: r.float('NEAR_LIMIT_RATIO', 0.8, { min: 0, max: 1 }),
    localCacheSizeInBytes: r.int('LOCAL_CACHE_SIZE_IN_BYTES', 0, { min: 0 }),
    expirationJitterMaxSeconds: r.int('EXPIRATION_JITTER_MAX_SECONDS', 300, { min: 0 }),
    cacheKeyPrefix: r.string('CACHE_KEY_PREFIX', ''),
    backendType,
    memoryMaxBytes: r.int('MEMORY_MAX_BYTES', DEFAULT_MEMORY_MAX_BYTES, { min: 4096 }),
    stopCacheKeyIncrementWhenOverlimit: r.bool('STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT', false),
    coalesceIncrements: r.bool('COALESCE_INCREMENTS', true),
    writeBehind: {
      enabled: r.bool('CACHE_WRITE_BEHIND_ENABLED', false),
      intervalMs: r.durationMs('CACHE_WRITE_BEHIND_INTERVAL', 1000),
      maxKeys: r.int('CACHE_WRITE_BEHIND_MAX_KEYS', 100_000, { min: 1, max: 10_000_000 }),
      maxBytes: r.int('CACHE_WRITE_BEHIND_MAX_BYTES', 64 * 1024 * 1024, { min: 4096 }),
    },
    responseHeadersEnabled: r.bool('LIMIT_RESPONSE_HEADERS_ENABLED', false),
    headerLimit: r.string('LIMIT_LIMIT_HEADER', 'RateLimit-Limit'),
    headerRemaining: r.string('LIMIT_REMAINING_HEADER', 'RateLimit-Remaining'),
    headerReset: r.string('LIMIT_RESET_HEADER', 'RateLimit-Reset'),
    requestHeadersEnabled: r.bool('LIMIT_REQUEST_HEADERS_ENABLED', false),
    requestHeaderLimit: r.string('LIMIT_REQUEST_LIMIT_HEADER', 'RateLimit-Limit'),
    requestHeaderRemaining: r.string('LIMIT_REQUEST_REMAINING_HEADER', 'RateLimit-Remaining'),
    requestHeaderReset: r.string('LIMIT_REQUEST_RESET_HEADER', 'RateLimit-Reset'),

    redis: redisGroupSettings(r, backendType),
    failureMode: {
      mode: r.oneOf('CACHE_FAILURE_MODE', 'error', FAILURE_MODES),
      localPods: r.int('CACHE_FAILURE_MODE_LOCAL_PODS', 1, { min: 1 }),
      // Bytes of `local` mode's counters (keys come from requests): oldest windows evicted past it.
      localMaxBytes: r.int('CACHE_FAILURE_MODE_LOCAL_MAX_BYTES', DEFAULT_LOCAL_MAX_BYTES, { min: 4096 }),
    },
    memcache: {
      hostPort: r.list('MEMCACHE_HOST_PORT'),
      srv: r.string('MEMCACHE_SRV', ''),
      srvRefreshMs: r.durationMs('MEMCACHE_SRV_REFRESH', 0),
      maxIdleConns: r.int('MEMCACHE_MAX_IDLE_CONNS', 2, { min: 0 }),
      timeoutMs: r.durationMs('MEMCACHE_TIMEOUT', 500),
      tls: r.bool('MEMCACHE_TLS', false),
      tlsFiles: {
        clientCert: r.string('MEMCACHE_TLS_CLIENT_CERT', ''),
        clientKey: r.string('MEMCACHE_TLS_CLIENT_KEY', ''),
        caCert: r.string('MEMCACHE_TLS_CACERT', ''),
        skipHostnameVerification: r.bool('MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION', false),
      },
    },

    stats: {
      disabled: r.bool('DISABLE_STATS', false),
      maxUnknownDomains: r.int('STATS_MAX_UNKNOWN_DOMAINS', 100, { min: 0 }),
      useStatsd: r.bool('USE_STATSD', true),
      statsdHost: r.string('STATSD_HOST', 'localhost'),
      statsdPort: r.int('STATSD_PORT', 8125, { min: 1, max: 65535 }),
      flushIntervalMs: r.durationMs('STATS_FLUSH_INTERVAL', 10_000),
      extraTags: r.map('EXTRA_TAGS'),
      useDogStatsd: r.bool('USE_DOG_STATSD', false),
      dogStatsdMogrifiers: r.raw('DOG_STATSD_MOGRIFIERS')
        ? r.list('DOG_STATSD_MOGRIFIERS')
        : r.list('USE_DOG_STATSD_MOGRIFIERS'),
      usePrometheus: r.bool('USE_PROMETHEUS', false),
      prometheusAddr: r.string('PROMETHEUS_ADDR', ':9090'),
      prometheusPath: r.string('PROMETHEUS_PATH', '/metrics'),
      prometheusMapperYaml: r.string('PROMETHEUS_MAPPER_YAML', ''),
      prometheusResponseTimeAsMilliseconds: r.bool('PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS', false),
    },

    tracing: {
      enabled: r.bool('TRACING_ENABLED', false),
      exporterProtocol: r.oneOf('TRACING_EXPORTER_PROTOCOL', 'http', ['http', 'grpc'] as const),
      serviceName: r.string('TRACING_SERVICE_NAME', 'RateLimit'),
      serviceNamespace: r.string('TRACING_SERVICE_NAMESPACE', ''),
      serviceInstanceId: r.string('TRACING_SERVICE_INSTANCE_ID', ''),
      samplingRate: r.float('TRACING_SAMPLING_RATE', 1, { min: 0, max: 1 }),
    },

    namedLimits: namedLimitsSettings(r),
    quota: quotaSettings(r),
    configReload: configReloadSettings(r),
  };

  // LocalCacheSizeInBytes is the spelling of the reference's settings table (its README); the reference
  // itself reads LOCAL_CACHE_SIZE_IN_BYTES, so both are accepted.
  if (r.raw('LOCAL_CACHE_SIZE_IN_BYTES') === undefined && r.raw('LocalCacheSizeInBytes') !== undefined) {
    s.localCacheSizeInBytes = r.int('LocalCacheSizeInBytes', 0, { min: 0 });
  }
  // Checked even when the mode is off, so a typo is found before someone turns it on.
  if (s.writeBehind.intervalMs < 10 || s.writeBehind.intervalMs > 60_000) {
    throw new SettingsError(
      'CACHE_WRITE_BEHIND_INTERVAL',
      `must be between 10ms and 1m, got ${s.writeBehind.intervalMs}ms (it bounds how stale a pod's counts may be)`,
    );
  }
  if (!(s.shutdownDrainMs >= 0 && s.shutdownDrainMs <= 3_600_000)) {
    throw new SettingsError('SHUTDOWN_DRAIN_TIMEOUT', `must be between 0 and 1h, got ${s.shutdownDrainMs}ms`);
  }
  if (s.memcache.hostPort.length > 0 && s.memcache.srv !== '') {
    throw new SettingsError('MEMCACHE_SRV', 'MEMCACHE_HOST_PORT and MEMCACHE_SRV are mutually exclusive');
  }
  return s;
}

export interface QuotaSettings {
  /** RLQS_ENABLED: serve StreamRateLimitQuotas on the gRPC port (and check configs for ambiguous buckets). */
  enabled: boolean;
  /** RLQS_REPORTING_INTERVAL: the Envoys' reporting_interval; the fleet window, and the TTL basis until a stream's own is seen. */
  reportingIntervalMs: number;
  /** RLQS_ASSIGNMENT_TTL_INTERVALS: an assignment's time to live, in reporting intervals. */
  ttlIntervals: number;
  /** RLQS_REASSIGN_THRESHOLD_PERCENT: a share that moved less than this is not pushed again. */
  reassignThresholdPercent: number;
  /** RLQS_DEMAND_SMOOTHING: weight of the newest report in a subscriber's demand (1: no smoothing); a report below its share and demand is taken whole. */
  demandSmoothing: number;
  /** RLQS_IDLE_TIMEOUT: a bucket a stream has not reported for this long is abandoned. */
  idleTimeoutMs: number;
  /** RLQS_EXPECTED_PODS: while the fleet totals cannot be read, a pod assigns budget / this. */
  expectedPods: number;
  /** RLQS_MAX_STREAMS: streams open at once on a pod. */
  maxStreams: number;
  /** RLQS_MAX_BUCKETS_PER_STREAM: buckets one stream may report. */
  maxBucketsPerStream: number;
  /** RLQS_MAX_REPORTS_PER_MESSAGE: bucket usages in one report message. */
  maxReportsPerMessage: number;
  /** RLQS_MAX_BUCKETS: distinct buckets a pod tracks at once. */
  maxBuckets: number;
  /** RLQS_MAX_BUCKET_BYTES_PER_STREAM: UTF-8 bytes of the bucket ids (domain, keys, values) one stream reports. */
  maxBucketBytesPerStream: number;
  /** RLQS_MAX_BUCKET_BYTES: UTF-8 bytes of the distinct bucket ids a pod tracks at once. */
  maxBucketBytes: number;
  /** RLQS_SEND_TIMEOUT: a stream whose client takes none of its queued responses for this long is ended. */
  sendTimeoutMs: number;
}

/** The RLQS_* group: parsed on its own so the Settings object can be regrouped around it. */
function quotaSettings(r: EnvReader): QuotaSettings {
  const q: QuotaSettings = {
    enabled: r.bool('RLQS_ENABLED', false),
    reportingIntervalMs: r.durationMs('RLQS_REPORTING_INTERVAL', 5000),
    ttlIntervals: r.int('RLQS_ASSIGNMENT_TTL_INTERVALS', 3, { min: 1, max: 100 }),
    reassignThresholdPercent: r.float('RLQS_REASSIGN_THRESHOLD_PERCENT', 5, { min: 0, max: 100 }),
    demandSmoothing: r.float('RLQS_DEMAND_SMOOTHING', 0.7, { min: 0.01, max: 1 }),
    idleTimeoutMs: r.durationMs('RLQS_IDLE_TIMEOUT', 60_000),
    expectedPods: r.int('RLQS_EXPECTED_PODS', 1, { min: 1 }),
    maxStreams: r.int('RLQS_MAX_STREAMS', 10_000, { min: 1 }),
    maxBucketsPerStream: r.int('RLQS_MAX_BUCKETS_PER_STREAM', 1000, { min: 1 }),
    maxReportsPerMessage: r.int('RLQS_MAX_REPORTS_PER_MESSAGE', 1000, { min: 1 }),
    maxBuckets: r.int('RLQS_MAX_BUCKETS', 100_000, { min: 1 }),
    maxBucketBytesPerStream: r.int('RLQS_MAX_BUCKET_BYTES_PER_STREAM', 1024 * 1024, { min: 1 }),
    maxBucketBytes: r.int('RLQS_MAX_BUCKET_BYTES', 64 * 1024 * 1024, { min: 1 }),
    sendTimeoutMs: r.durationMs('RLQS_SEND_TIMEOUT', 30_000),
  };
  if (q.sendTimeoutMs < 100) {
    throw new SettingsError('RLQS_SEND_TIMEOUT', `must be at least 100ms, got ${q.sendTimeoutMs}ms`);
  }
  if (q.reportingIntervalMs < 40 || q.reportingIntervalMs > 3_600_000) {
    throw new SettingsError(
      'RLQS_REPORTING_INTERVAL',
      `must be between 40ms and 1h, got ${q.reportingIntervalMs}ms`,
    );
  }
  if (q.idleTimeoutMs < q.reportingIntervalMs) {
    throw new SettingsError(
      'RLQS_IDLE_TIMEOUT',
      `must be at least RLQS_REPORTING_INTERVAL (${q.reportingIntervalMs}ms), got ${q.idleTimeoutMs}ms`,
    );
  }
  return q;
}

export interface ConfigReloadSettings {
  /**
   * CONFIG_PARSE_SPARE_WORKER: with config files, keep a fresh parse worker ready between reloads (a
   * reload does not wait for one to start; costs the idle worker's memory); false ends it when idle.
   */
  spareWorker: boolean;
}

/** The file reload group: parsed on its own, like the RLQS group. */
function configReloadSettings(r: EnvReader): ConfigReloadSettings {
  return { spareWorker: r.bool('CONFIG_PARSE_SPARE_WORKER', true) };
}
