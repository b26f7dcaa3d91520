// One typed settings object, parsed once from the environment at startup and passed down.
// Names and defaults follow the reference service (envoyproxy/ratelimit src/settings/settings.go).
// The groups with parsing of their own sit beside it (grpc-settings.ts, backend-settings.ts,
// named-limits-settings.ts, quota-settings.ts); this file holds the object and the one parse that
// reads every variable in order.
// The model entry, not the config/ barrel (which holds the YAML reader and the validator).
import {
  DEFAULT_MAX_DESCRIPTORS,
  DEFAULT_YAML_LIMITS,
  FAILURE_MODES,
  type FailureMode,
  type YamlLimits,
} from '../config/model.js';
import { DEFAULT_REQUEST_BOUNDS, type RequestBounds, XDS_MAX_MESSAGE_BYTES } from '../../proto/index.js';
import { EnvReader, SettingsError, type Env } from './env.js';
import {
  type BackendType,
  type RedisGroupSettings,
  redisGroupSettings,
  type TlsFiles,
} from './backend-settings.js';
import { type GrpcSettings, grpcSettings } from './grpc-settings.js';
import { type NamedLimitsSettings, namedLimitsSettings } from './named-limits-settings.js';
import { type QuotaSettings, quotaSettings } from './quota-settings.js';

/** CACHE_FAILURE_MODE_LOCAL_MAX_BYTES's default: the budget of `local` failure mode's counters. */
export const DEFAULT_LOCAL_MAX_BYTES = 64 * 1024 * 1024;

/** MEMORY_MAX_BYTES: the memory backend's byte budget (ratelimit/memory). */
export const DEFAULT_MEMORY_MAX_BYTES = 256 * 1024 * 1024;

export type ConfigType = 'FILE' | 'GRPC_XDS_SOTW' | 'GRPC_XDS_DELTA';

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
