// Wires the service from one Settings object: store -> limiter -> service -> config source -> listeners.
// No globals: tests build the real thing with other settings (ports 0, memory store, a temp dir).
import type { Logger } from '../common/index.js';
import { ConfigError, type ConfigFeature, type RateLimitConfig } from './config/model.js';
import { RATELIMIT_FEATURES } from '../proto/index.js';
import { Limiter, LocalOverLimitCache } from './limiter/index.js';
import { buildCounterStack } from './counter-stack.js';
import { CircuitBreakerStore, type CounterStore, type WriteBehindCounterStore } from './counting/index.js';
import { createLogger } from '../common/index.js';
// Not the sources/ barrel: that one holds the xDS client, which loads grpc-js.
import { FileConfigProvider } from './sources/file.js';
import type { ConfigSource, ConfigSourceDeps, ConfigUpdate } from './sources/index.js';
import { DebugServer, HealthChecker, RateLimitGrpcServer, RateLimitHttpServer } from './server/index.js';
import { OverLimitLog, RateLimitService, type NamedLimitsOptions } from './service/index.js';
import { QuotaServer } from './quota/index.js';
import type { Env, Settings } from './settings/index.js';
import { StatsStore, createStatsPipeline, type StatsPipeline } from './stats/index.js';
import type { RateLimitTracing } from './tracing/index.js';

/** How long after the drain time (SHUTDOWN_DRAIN_TIMEOUT) the process exits whatever still hangs. */
export const SHUTDOWN_EXIT_SLACK_MS = 2000;

/** Whether a response or log names limits (then /rlconfig shows the names too). */
function namedOutputsOn(n: Settings['namedLimits']): boolean {
  return n.ietfHeaders || n.dynamicMetadata || n.logEnabled;
}

/** The service's named-limit options; undefined when no output is on (the decision skips them). */
function namedLimitsOptions(n: Settings['namedLimits'], logger: Logger): NamedLimitsOptions | undefined {
  if (!namedOutputsOn(n)) return undefined;
  return {
    ietfHeaders: n.ietfHeaders,
    dynamicMetadata: n.dynamicMetadata,
    overLimitLog: n.logEnabled
      ? new OverLimitLog({
          sampleRate: n.logSampleRate,
          maxPerSecond: n.logMaxPerSecond,
          redactKeys: n.logRedactKeys,
          maxValueBytes: n.logMaxValueBytes,
          info: (msg) => logger.info(msg),
        })
      : undefined,
  };
}

export interface RateLimitAppOptions {
  settings: Settings;
  logger?: Logger;
  /** Overrides the counter store built from settings (tests). */
  store?: CounterStore;
  /** Environment for settings outside Settings (DOG_STATSD_MOGRIFIER_*); process.env by default. */
  env?: Env;
  /** Builds the xDS config source; injected so this module does not depend on the xDS client. */
  xdsSourceFactory?: (deps: ConfigSourceDeps) => Promise<ConfigSource>;
  /** TRACING_ENABLED: the tracing, from loadTracing (built outside so that OpenTelemetry loads only then). */
  tracing?: RateLimitTracing;
}

export class RateLimitApp {
  readonly settings: Settings;
  readonly logger: Logger;
  readonly stats: StatsStore;
  /** Sinks and flushing of `stats`: StatsD, DogStatsD, the log or Prometheus. */
  readonly statsPipeline: StatsPipeline;
  /** OpenTelemetry; undefined when TRACING_ENABLED is false (then nothing is traced at all). */
  readonly tracing?: RateLimitTracing;
  readonly health = new HealthChecker();
  readonly store: CounterStore;
  /** CACHE_WRITE_BEHIND_ENABLED: the local-decision layer; closed (and so flushed) before the store. */
  readonly writeBehind?: WriteBehindCounterStore;
  /** The store the limiter counts in (store, decorated). */
  private readonly limiterStore: CounterStore;
  readonly service: RateLimitService;
  grpc?: RateLimitGrpcServer;
  http?: RateLimitHttpServer;
  debug?: DebugServer;
  /** RLQS_ENABLED: the rate limit quota server (StreamRateLimitQuotas on the gRPC port). */
  readonly quota?: QuotaServer;
  private configSource?: ConfigSource;
  private initialConfig?: { resolve: () => void; promise: Promise<void> };
  private healthTimer?: NodeJS.Timeout;
  private loggedInitialConfig = false;

  constructor(private readonly opts: RateLimitAppOptions) {
    const s = (this.settings = opts.settings);
    this.stats = new StatsStore({
      maxUnknownDomains: s.stats.maxUnknownDomains,
      maxNamedLimits: s.namedLimits.statsMaxSeries,
    });
    this.logger = opts.logger ?? createLogger({ level: s.logLevel, format: s.logFormat });
    if (s.tracing.enabled && !opts.tracing)
      throw new Error('TRACING_ENABLED=true needs the tracing (loadTracing)');
    this.tracing = s.tracing.enabled ? opts.tracing : undefined;
    const stack = buildCounterStack(s, {
      stats: this.stats,
      logger: this.logger,
      base: opts.store,
      tracing: this.tracing,
    });
    this.store = stack.base;
    this.writeBehind = stack.writeBehind;
    this.limiterStore = stack.store;
    this.statsPipeline = createStatsPipeline(s.stats, {
      store: this.stats,
      logger: this.logger,
      env: opts.env,
    });
    const limiter = new Limiter({
      store: this.limiterStore,
      stats: this.stats,
      cacheKeyPrefix: s.cacheKeyPrefix,
      nearLimitRatio: s.nearLimitRatio,
      expirationJitterMaxSeconds: s.expirationJitterMaxSeconds,
      localCache: s.localCacheSizeInBytes > 0 ? new LocalOverLimitCache(s.localCacheSizeInBytes) : undefined,
      stopCacheKeyIncrementWhenOverlimit: s.stopCacheKeyIncrementWhenOverlimit,
      failureMode: s.failureMode,
    });
    this.service = new RateLimitService({
      limiter,
      stats: this.stats,
      globalShadowMode: s.globalShadowMode,
      globalQuotaMode: s.globalQuotaMode,
      responseHeaders: s.responseHeadersEnabled
        ? { limit: s.headerLimit, remaining: s.headerRemaining, reset: s.headerReset }
        : null,
      requestHeaders: s.requestHeadersEnabled
        ? { limit: s.requestHeaderLimit, remaining: s.requestHeaderRemaining, reset: s.requestHeaderReset }
        : null,
      responseDynamicMetadata: s.responseDynamicMetadata,
      namedLimits: namedLimitsOptions(s.namedLimits, this.logger),
    });
    if (s.quota.enabled) {
      // Fleet demand goes through the store under the limiter's layers (circuit breaker included), not
      // through write-behind, which would answer from local estimates.
      this.quota = new QuotaServer({
        settings: s.quota,
        bounds: s.requestBounds,
        store: this.store,
        keyPrefix: s.cacheKeyPrefix,
        stats: this.stats,
        logger: this.logger,
      });
    }
    this.health.add('sigterm', true);
    if (s.healthyWithAtLeastOneConfigLoaded) this.health.add('config', false);
    if (s.redis.healthCheckActiveConnection) this.health.addProbe('cache', () => this.store.isHealthy());
    else if (this.store instanceof CircuitBreakerStore) {
      // Not ready for the cache until Redis has answered once (a start without Redis goes on without it).
      const store = this.store;
      this.health.addProbe('cache', () => store.hasConnected());
    }
  }

  /** Applies a config update from any source: swap on success, keep the last good one on error. */
  applyConfig(update: ConfigUpdate): void {
    if ('error' in update) {
      this.stats.service.configLoadError.inc();
      this.logger.error(`error loading new configuration: ${update.error.message}`);
      return;
    }
    try {
      this.setConfig(update.config, update.sources);
    } catch (err) {
      this.applyConfig({ error: err as Error });
    }
  }

  /** The config features this pod enforces (announced over xDS): none on a store without evaluate. */
  supportedFeatures(): readonly ConfigFeature[] {
    return this.limiterStore.evaluate ? RATELIMIT_FEATURES : [];
  }

  /**
   * Serves a compiled configuration. Throws a ConfigError (the last good one keeps serving) when the
   * backend cannot count what it uses exactly: memcache has no atomic multi-key script, so it would
   * enforce a sliding window or a token bucket as something else. `sources` (the files read) are named
   * in the reload line.
   */
  setConfig(config: RateLimitConfig, sources?: readonly string[]): void {
    if (config.features.size > 0 && !this.limiterStore.evaluate) {
      const used = [...config.features].sort().join(', ');
      throw new ConfigError(
        'configuration',
        config.features.has('rate_limits') ? 'rate_limits' : 'rate_limit.algorithm',
        `BACKEND_TYPE=${this.settings.backendType} cannot count ${used} exactly (no atomic per-descriptor script); use redis or memory`,
      );
    }
    // RLQS: a config ambiguous for buckets is refused here, before anything serves it.
    const buckets = this.quota?.prepare(config);
    this.service.setConfig(config);
    if (buckets) this.quota!.apply(buckets);
    this.stats.service.configLoadSuccess.inc();
    if (this.settings.healthyWithAtLeastOneConfigLoaded) {
      if (config.domains.length > 0) this.health.ok('config');
      else this.health.fail('config');
    }
    // Startup logs every rule at warning level (as the reference does); later reloads log one summary
    // line, `configuration applied`, at warning (so an edit shows at the default level) and the rules at
    // debug, so a 10k-rule reload does not spend its time logging.
    const first = !this.loggedInitialConfig;
    this.loggedInitialConfig = true;
    const lines = first || this.logger.isLevelEnabled('debug') ? config.dump().split('\n') : [];
    let rules = 0;
    for (const line of lines) {
      if (!line.trim()) continue;
      rules++;
      if (first) this.logger.warn(`loaded: ${line}`);
      else this.logger.debug(`loaded: ${line}`);
    }
    if (!first) {
      const from = sources?.length
        ? ` from ${sources.slice(0, 10).join(', ')}${sources.length > 10 ? ` and ${sources.length - 10} more` : ''}`
        : '';
      this.logger.warn(`configuration applied: ${config.domains.length} domains${from}`);
    } else if (rules === 0) this.logger.warn('loaded an empty configuration (no domains)');
    this.initialConfig?.resolve();
  }

  /** Starts in the reference's order: cache, config (waiting for the first one), then the listeners. */
  async start(): Promise<void> {
    const s = this.settings;
    let resolve!: () => void;
    const promise = new Promise<void>((r) => (resolve = r));
    this.initialConfig = { resolve, promise };
    let source: ConfigSource | undefined;
    if (s.configType === 'FILE') {
      const file = new FileConfigProvider(
        {
          root: s.runtimeRoot,
          subdirectory: s.runtimeSubdirectory,
          appDirectory: s.runtimeAppDirectory,
          ignoreDotFiles: s.runtimeIgnoreDotFiles,
          watchRoot: s.runtimeWatchRoot,
          mergeDomainConfig: s.mergeDomainConfig,
          yamlLimits: s.configYamlLimits,
          parseTimeoutMs: s.configParseTimeoutMs,
          maxDescriptors: s.configMaxDescriptors,
          spareWorker: s.configReload.spareWorker,
          logger: this.logger,
        },
        (u) => this.applyConfig(u),
      );
      // The parse worker loads its modules on its own thread while the store connects.
      file.warm();
      source = this.configSource = file;
    }
    await this.statsPipeline.start();
    await this.store.start?.();
    if (!source) {
      if (!this.opts.xdsSourceFactory) throw new Error(`CONFIG_TYPE=${s.configType} needs the xDS client`);
      source = this.configSource = await this.opts.xdsSourceFactory({
        settings: s,
        logger: this.logger,
        features: () => this.supportedFeatures(),
        setConfig: (config) => this.setConfig(config),
        onUpdate: (update) => this.applyConfig(update),
      });
    }
    await source.start();
    if (!s.forceStartWithoutInitialConfig && !this.service.getConfig()) {
      this.logger.info('waiting for the initial rate limit configuration');
      await promise;
    }

    this.debug = new DebugServer({
      service: this.service,
      stats: this.stats,
      logger: this.logger,
      host: s.debugHost,
      port: s.debugPort,
      pprofEnabled: s.debugPprofEnabled,
      rlconfigNames: namedOutputsOn(s.namedLimits),
    });
    this.http = new RateLimitHttpServer({
      service: this.service,
      health: this.health,
      logger: this.logger,
      host: s.host,
      port: s.port,
      bodyLimit: s.httpMaxBodyBytes,
      requestBounds: s.requestBounds,
    });
    this.grpc = new RateLimitGrpcServer({
      service: this.service,
      health: this.health,
      stats: this.stats,
      tracing: this.tracing,
      logger: this.logger,
      host: s.grpc.host,
      port: s.grpc.port,
      uds: s.grpc.uds || undefined,
      maxConnectionAgeMs: s.grpc.maxConnectionAgeMs,
      maxConnectionAgeGraceMs: s.grpc.maxConnectionAgeGraceMs,
      maxReceiveMessageLength: s.grpc.maxRecvMsgSize,
      maxDecompressedMessageLength: s.grpc.maxDecompressedMsgSize,
      requestBounds: s.requestBounds,
      http2Limits: s.grpc.limits,
      http2: s.grpc.http2,
      quota: this.quota,
      tls: s.grpc.tls.enabled
        ? {
            certFile: s.grpc.tls.cert,
            keyFile: s.grpc.tls.key,
            clientCaFile: s.grpc.tls.clientCaCert || undefined,
            clientSan: s.grpc.tls.clientSan || undefined,
          }
        : undefined,
    });
    const quota = this.quota;
    if (quota) {
      this.debug.addPath(
        '/rlqs',
        'rate limit quota streams and buckets with their current assignments (JSON)',
        async () => JSON.stringify(quota.snapshot()),
      );
      quota.start();
    }
    await this.debug.start();
    await this.http.start();
    await this.grpc.start();
    if (s.redis.healthCheckActiveConnection) {
      this.healthTimer = setInterval(() => this.grpc?.refreshHealth(), 1000);
      this.healthTimer.unref();
    }
  }

  /**
   * Graceful stop, in this order: unhealthy, and no new connections; calls in progress finish for up to
   * `drainMs` (SHUTDOWN_DRAIN_TIMEOUT); every connection still open is cut; the write-behind hits are
   * sent; then the config source and the store close. main.ts exits anyway SHUTDOWN_EXIT_SLACK_MS after
   * the drain time.
   */
  async close(drainMs = this.settings.shutdownDrainMs): Promise<void> {
    this.health.fail('sigterm');
    clearInterval(this.healthTimer);
    // Envoys get their assignments with a time to live of 0 before the listener ends their streams.
    this.quota?.shutdown();
    await Promise.all([this.grpc?.close(drainMs), this.http?.close(drainMs), this.debug?.close(drainMs)]);
    // Before anything else that may wait (the xDS client's close): the admitted hits must reach Redis.
    await this.writeBehind?.flush();
    await this.configSource?.close();
    // The write-behind layer sends what is left (hits of calls cut while deciding), then closes the store.
    await (this.writeBehind ?? this.store).close();
    await this.statsPipeline.close();
    await this.tracing?.close();
  }
}
