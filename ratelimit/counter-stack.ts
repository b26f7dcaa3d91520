// The counter store the limiter counts in, built from the settings in one place, so the service and the
// tools that measure it (bench/micro) stack the same layers in the same order:
//
//   limiter
//     -> tracing                   TRACING_ENABLED: one span per call into the stack
//     -> WriteBehindCounterStore   CACHE_WRITE_BEHIND_ENABLED (off by default): known keys decided locally
//     -> CoalescingCounterStore    the one batcher: a flush per turn (or REDIS_PIPELINE_WINDOW), one batch
//                                  per shard; COALESCE_INCREMENTS (on by default): hits on a key, one op
//     -> CircuitBreakerStore       Redis only: a failing shard fails fast, then is probed
//     -> backend                   RedisCounterStore (with the per-second deployment) | memcache | memory
//
// This file sits above counting/ and the
// backends rather than inside counting/: the backends import counting/'s contract, so a builder that
// imports the backends from within counting/ would close an import circle.
import type { Logger } from '../common/index.js';
import {
  CIRCUIT_STATE_VALUE,
  CacheError,
  CircuitBreakerStore,
  CoalescingCounterStore,
  WriteBehindCounterStore,
  type BatcherOptions,
  type FlushPolicy,
  type CounterStore,
} from './counting/index.js';
import { MemcacheCounterStore } from './memcache/index.js';
import { MemoryCounterStore } from './memory/index.js';
import { RedisCounterStore } from './redis/index.js';
import type { Settings } from './settings/index.js';
import type { StatsStore } from './stats/index.js';
import { cacheSpanName, type RateLimitTracing } from './tracing/index.js';

export interface BackendDeps {
  logger?: Logger;
  /** Where the Redis gauges go (replica, circuit state); none are kept without it. */
  stats?: StatsStore;
}

/** The Redis deployments of the settings (REDIS_*, and REDIS_PERSECOND_* when REDIS_PERSECOND is on). */
export function createRedisBackend(s: Settings, deps: BackendDeps = {}): RedisCounterStore {
  const stats = deps.stats;
  const redis = new RedisCounterStore({
    settings: s.redis.main,
    tlsFiles: s.redis.tlsFiles,
    perSecond: s.redis.perSecond ? { settings: s.redis.perSecond, tlsFiles: s.redis.tlsFiles } : undefined,
    logger: deps.logger,
    startupBackoff: s.redis.startupBackoff,
    // ratelimit.redis.<deployment>.all.replica: 1 while a single Redis answers READONLY.
    onRole: stats
      ? (deployment, replica) => stats.gauge(circuitStatName(deployment, 'replica')).set(replica ? 1 : 0)
      : undefined,
  });
  if (stats) {
    if (s.redis.main.type === 'single') stats.gauge(circuitStatName('REDIS', 'replica')).set(0);
    if (s.redis.perSecond?.type === 'single')
      stats.gauge(circuitStatName('REDIS_PERSECOND', 'replica')).set(0);
  }
  return redis;
}

/** The backend of BACKEND_TYPE; Redis comes behind its circuit breaker. */
export function createBackend(s: Settings, deps: BackendDeps = {}): CounterStore {
  switch (s.backendType) {
    case 'memory':
      return new MemoryCounterStore(Date.now, 5000, s.memoryMaxBytes);
    case 'redis': {
      const stats = deps.stats;
      // ratelimit.redis.<shard>.circuit_state: 0 closed, 1 half open, 2 open.
      return new CircuitBreakerStore(
        createRedisBackend(s, deps),
        s.redis.circuitBreaker,
        stats
          ? {
              onState: (shard, state, from) => {
                stats.gauge(circuitStatName(shard, 'circuit_state')).set(CIRCUIT_STATE_VALUE[state]);
                if (state === 'open' && from === 'closed')
                  stats.counter(circuitStatName(shard, 'circuit_open')).inc();
              },
            }
          : undefined,
        deps.logger,
        s.redis.startupWaitMs,
      );
    }
    case 'memcache':
      return new MemcacheCounterStore({ settings: s.memcache, logger: deps.logger });
    default:
      throw new CacheError(`BACKEND_TYPE=${String(s.backendType)} is not supported by this build yet`);
  }
}

export interface CounterStack {
  /** The backend (createBackend's, or the one given): closed last, probed for health. */
  readonly base: CounterStore;
  /** CACHE_WRITE_BEHIND_ENABLED: the local-decision layer; closed (and so flushed) before the base. */
  readonly writeBehind?: WriteBehindCounterStore;
  /** The top of the stack: what the limiter counts in (traced when tracing is given). */
  readonly store: CounterStore;
}

/** The layers of the diagram above on `base` (createBackend's by default). */
export function buildCounterStack(
  s: Settings,
  deps: {
    stats: StatsStore;
    logger?: Logger;
    base?: CounterStore;
    /** TRACING_ENABLED: the tracing (loadTracing's); nothing is traced without it. */
    tracing?: RateLimitTracing;
  },
): CounterStack {
  const base = deps.base ?? createBackend(s, deps);
  const coalescing =
    s.coalesceIncrements || s.backendType === 'redis'
      ? new CoalescingCounterStore(base, batcherOptions(s))
      : base;
  // Write-behind (off by default): known fixed-window keys decided locally, hits sent per interval.
  const writeBehind = s.writeBehind.enabled
    ? new WriteBehindCounterStore(coalescing, s.writeBehind, deps.stats)
    : undefined;
  const top = writeBehind ?? coalescing;
  return {
    base,
    writeBehind,
    store: deps.tracing ? deps.tracing.wrapStore(top, cacheSpanName(s.backendType)) : top,
  };
}

/**
 * The batcher's settings: concurrent hits on one key share one INCRBY (exact per-caller counts) unless
 * COALESCE_INCREMENTS=false; Redis' pipeline window and limit (REDIS_PIPELINE_*, REDIS_PERSECOND_PIPELINE_*)
 * are its flush policy. Other backends without coalescing get no batcher at all (one call per request).
 */
export function batcherOptions(s: Settings): BatcherOptions {
  const main = s.redis.main;
  const second = s.redis.perSecond;
  const redis = s.backendType === 'redis';
  return {
    merge: s.coalesceIncrements,
    flush: redis ? policy(main) : undefined,
    perSecondFlush: redis && second ? policy(second) : undefined,
  };
}

/** A zero window disables pipelining, limit included (as radix's pool pipelining in the reference). */
function policy(r: { pipelineWindowMs: number; pipelineLimit: number }): FlushPolicy {
  return { windowMs: r.pipelineWindowMs, limit: r.pipelineWindowMs > 0 ? r.pipelineLimit : 0 };
}

/** `REDIS 127.0.0.1:7000` -> `ratelimit.redis.REDIS.127_0_0_1_7000.<stat>` (the shard part is one label). */
function circuitStatName(shard: string, stat: string): string {
  const space = shard.indexOf(' ');
  const deployment = space < 0 ? shard : shard.slice(0, space);
  const node = space < 0 ? 'all' : shard.slice(space + 1).replace(/[.:|]/g, '_');
  return `ratelimit.redis.${deployment}.${node}.${stat}`;
}
