// counters get|reset: the counter a descriptor counts under right now, read from (or deleted in) the
// Redis deployment the service uses. The settings are the service's own (loadSettings over the
// environment: REDIS_TYPE, REDIS_URL, REDIS_AUTH, REDIS_TLS*, REDIS_PERSECOND*, CACHE_KEY_PREFIX, ...),
// the store is the service's RedisCounterStore (single, sentinel, cluster, per-second routing), and
// the key is the limiter's cacheKey for the rule the service's matcher picks.
import type { DescriptorEntry } from '../config/index.js';
import { RedisCounterStore } from '../redis/index.js';
import type { Settings } from '../settings/index.js';
import type { DescriptorExplanation } from './explain.js';

export interface CounterReading {
  readonly descriptor: readonly DescriptorEntry[];
  readonly key: string;
  readonly count: number;
  readonly limit: number;
  readonly unit: string;
  readonly remaining: number;
  readonly shadowMode: boolean;
  /** Seconds until the window ends (the service's durationUntilReset). */
  readonly resetsInSeconds: number;
  /** The key's TTL in Redis in ms (-2: no such key, -1: no expiry). */
  readonly ttlMs: number;
  /** REDIS or REDIS_PERSECOND. */
  readonly deployment: string;
  readonly deleted?: boolean;
}

export class CounterClient {
  private readonly store: RedisCounterStore;

  constructor(settings: Settings) {
    if (settings.backendType !== 'redis') {
      throw new Error(`counters reads Redis; BACKEND_TYPE is ${settings.backendType}`);
    }
    this.store = new RedisCounterStore({
      settings: settings.redis,
      tlsFiles: settings.redisTlsFiles,
      ...(settings.redisPerSecond
        ? { perSecond: { settings: settings.redisPerSecondSettings, tlsFiles: settings.redisTlsFiles } }
        : {}),
    });
  }

  start(deadlineMs: number): Promise<void> {
    return this.store.start(deadlineMs);
  }

  /** The deployment a key lives in: SECOND-unit counters in the per-second one when configured (as the store routes). */
  private deployment(perSecond: boolean) {
    return perSecond && this.store.perSecond ? this.store.perSecond : this.store.main;
  }

  /** Reads (and with `reset`, deletes) the counter of each counted explanation. */
  async read(list: readonly DescriptorExplanation[], reset: boolean): Promise<CounterReading[]> {
    const out: CounterReading[] = [];
    for (const x of list) {
      if (!x.counted || x.cacheKey === undefined || !x.rule) continue;
      const perSecond = x.rule.unit === 'SECOND';
      const [count] = await this.store.get([{ key: x.cacheKey, hits: 0, expireSeconds: 0, perSecond }]);
      const d = this.deployment(perSecond);
      const ttlMs = Number(await d.client.pttl(x.cacheKey));
      let deleted: boolean | undefined;
      if (reset) deleted = Number(await d.client.del(x.cacheKey)) > 0;
      out.push({
        descriptor: x.descriptor,
        key: x.cacheKey,
        count: count ?? 0,
        limit: x.rule.requestsPerUnit,
        unit: x.rule.unit,
        remaining: Math.max(0, x.rule.requestsPerUnit - (count ?? 0)),
        shadowMode: x.rule.shadowMode,
        resetsInSeconds: x.resetsInSeconds ?? 0,
        ttlMs,
        deployment: d.name,
        ...(deleted === undefined ? {} : { deleted }),
      });
    }
    return out;
  }

  close(): Promise<void> {
    return this.store.close();
  }
}

export function formatReadings(
  list: readonly DescriptorExplanation[],
  readings: readonly CounterReading[],
): string {
  const out: string[] = [];
  for (const x of list) {
    const r = readings.find((y) => y.descriptor === x.descriptor);
    const name = x.descriptor.map((e) => `${e.key}=${e.value}`).join(',');
    if (!r) {
      out.push(`${name}: not counted (${x.reasons[0] ?? 'no rule'})`);
      continue;
    }
    // The service counts first, then compares: the next hit is over the limit once count >= limit.
    const state = r.count >= r.limit ? 'next hit OVER_LIMIT' : 'next hit OK';
    out.push(
      `${name}: ${r.count} of ${r.limit} per ${r.unit.toLowerCase()} (${state}${r.shadowMode ? ', shadow' : ''}), ${r.remaining} remaining, resets in ${r.resetsInSeconds}s` +
        ` [key ${r.key} in ${r.deployment}, ttl ${r.ttlMs < 0 ? 'none' : `${Math.ceil(r.ttlMs / 1000)}s`}]` +
        (r.deleted === undefined ? '' : r.deleted ? ' — reset (deleted)' : ' — nothing to reset'),
    );
  }
  return out.join('\n') + '\n';
}
