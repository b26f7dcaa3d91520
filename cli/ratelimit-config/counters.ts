// counters get|reset: the state a descriptor is counted in right now, read from (or deleted in) the
// Redis deployment the service uses. The settings are the service's own (loadSettings over the
// environment: REDIS_TYPE, REDIS_URL, REDIS_AUTH, REDIS_TLS*, REDIS_PERSECOND*, CACHE_KEY_PREFIX, ...),
// the store is the service's RedisCounterStore (single, sentinel, cluster, per-second routing), and
// the keys are the limiter's: cacheKey for a reference fixed window, buildLimitCheck for a rule the
// limit script counts (sliding_window, token_bucket, several rate_limits). A scripted rule's state
// is the limiter's own computation (evaluateLimitCheck) over the values read, for zero hits, so
// reading never counts; when the next hit is admitted is found with the same computation.
import type { DescriptorEntry } from '../../ratelimit/config/index.js';
import {
  buildLimitCheck,
  evaluateLimitCheck,
  limitCapacity,
  parseStoredBucket,
  type BucketState,
  type NumberSlots,
} from '../../ratelimit/counting/index.js';
import { createRedisBackend } from '../../ratelimit/counter-stack.js';
import type { RedisCounterStore } from '../../ratelimit/redis/index.js';
import type { Settings } from '../../ratelimit/settings/index.js';
import { scriptedCounterOf, type DescriptorExplanation, type ScriptedCounter } from './explain.js';

/** One limit of a scripted rule, as read. */
export interface LimitReading {
  readonly algorithm: string;
  readonly limit: number;
  readonly unit: string;
  readonly burst?: number;
  /** Hits that fit now (after the estimate / the bucket's refill). */
  readonly remaining: number;
  /** Seconds until this limit is back to its full capacity. */
  readonly replenishedInSeconds: number;
  readonly keys: readonly string[];
  /** Each key's stored value as Redis holds it ("0" when absent; a token bucket's is "ms:ticks:rate"). */
  readonly values: readonly string[];
  /** Each key's TTL in ms (-2: no such key). */
  readonly ttlMs: readonly number[];
  /** What the limit holds charged now (see Charged). */
  readonly charged: Charged;
}

/**
 * What a limit holds charged, read from its keys. The service keeps no separate record of reservations,
 * settlements or refunds: a reservation is a hit, a settle is more hits or a refund, and each key holds
 * their net, so these figures are that net (and nothing says how much of it was refunded).
 */
export type Charged =
  /** fixed_window: hits counted in the current window. */
  | { readonly window: number }
  /**
   * sliding_window: hits counted in the current and the previous window, and the estimate the limit
   * decides with now (current + previous weighted by the part of it still inside the sliding period,
   * rounded up).
   */
  | { readonly current: number; readonly previous: number; readonly estimate: number }
  /**
   * token_bucket: the bucket's debt, how far its theoretical arrival time is ahead of now (ms, rounded
   * up), and the same in hits not yet refilled (debt × requests_per_unit / period, to 3 decimals).
   */
  | { readonly debtMs: number; readonly debtHits: number };

/** The Charged of one limit from its keys' stored values (absent keys read as empty). */
export function chargedOf(
  l: { readonly algorithm: string; readonly requestsPerUnit: number; readonly unitSeconds: number },
  stored: readonly (string | undefined)[],
  nowMs: number,
): Charged {
  const period = l.unitSeconds * 1000;
  if (l.algorithm === 'token_bucket') {
    const st = stored[0] === undefined ? undefined : parseStoredBucket(stored[0]);
    if (st === undefined || l.requestsPerUnit === 0) return { debtMs: 0, debtHits: 0 };
    // As the limiter reads it: a bucket written under another rate is rounded up to the next whole ms.
    const w = st.den !== l.requestsPerUnit && st.frac > 0 ? st.count + 1 : st.count;
    const f = st.den !== l.requestsPerUnit ? 0 : st.frac;
    if (w < nowMs) return { debtMs: 0, debtHits: 0 };
    // debt = (w - now) + f / rate ms; in hits: debt × rate / period = ((w - now) × rate + f) / period.
    const ticks = BigInt(w - nowMs) * BigInt(l.requestsPerUnit) + BigInt(f);
    const milli = (ticks * 1000n + BigInt(period) - 1n) / BigInt(period);
    return { debtMs: w - nowMs + (f > 0 ? 1 : 0), debtHits: Number(milli) / 1000 };
  }
  const current = Number(stored[0] ?? 0);
  if (l.algorithm !== 'sliding_window') return { window: current };
  const previous = Number(stored[1] ?? 0);
  const left = BigInt(period - (nowMs % period));
  const weighted = (BigInt(previous) * left + BigInt(period) - 1n) / BigInt(period);
  return { current, previous, estimate: current + Number(weighted) };
}

/** The text of a Charged. */
function chargedText(c: Charged): string {
  if ('window' in c) return `charged ${c.window} in this window`;
  if ('current' in c)
    return `charged ${c.current} in the current window, ${c.previous} in the previous, estimate ${c.estimate}`;
  return `debt ${c.debtMs} ms = ${c.debtHits} hits not yet refilled`;
}

export interface CounterReading {
  readonly descriptor: readonly DescriptorEntry[];
  /** fixed_window, sliding_window, token_bucket, or several joined by '+'. */
  readonly algorithm: string;
  /** The first key; `keys` has them all. */
  readonly key: string;
  readonly keys: readonly string[];
  /** fixed_window: hits in this window; otherwise the capacity in use (limit - remaining) of the tightest limit. */
  readonly count: number;
  /** The tightest limit (the one the service reports): its requests per unit, unit and remaining. */
  readonly limit: number;
  readonly unit: string;
  readonly remaining: number;
  readonly shadowMode: boolean;
  /** Would the next hit be rejected? (shadow_mode still answers OK.) */
  readonly overLimit: boolean;
  /** Seconds until the next hit is admitted: 0 now; null never (a limit of 0). */
  readonly nextOkInSeconds: number | null;
  /** fixed_window: seconds until the window ends; otherwise until the tightest limit is full again. */
  readonly resetsInSeconds: number;
  /** The first key's TTL in Redis in ms (-2: no such key, -1: no expiry). */
  readonly ttlMs: number;
  /** REDIS or REDIS_PERSECOND. */
  readonly deployment: string;
  /** Scripted rules: every limit. */
  readonly limits?: readonly LimitReading[];
  /** A single fixed_window: the hits counted in this window (see Charged). */
  readonly charged?: Charged;
  /** reset only: whether any key was deleted. */
  readonly deleted?: boolean;
}

/** The values read, for evaluateLimitCheck: absent keys read 0 (an empty bucket), writes go nowhere. */
class ReadSlots implements NumberSlots {
  constructor(private readonly values: ReadonlyMap<string, string>) {}
  read(key: string): number {
    return Number(this.values.get(key) ?? 0);
  }
  readBucket(key: string): BucketState | undefined {
    const v = this.values.get(key);
    return v === undefined ? undefined : parseStoredBucket(v);
  }
  add(): void {}
  take(): void {}
  writeBucket(): void {}
}

/** Far enough for any stored state to have drained (the script caps times at 1e13 ms). */
const HORIZON_MS = 1e13;

/**
 * Milliseconds from nowMs until one more hit is admitted by every limit, with no other hit in
 * between; undefined when never. Admission only becomes easier as time passes (windows drain,
 * buckets refill), so the first admitted moment is found by doubling, then bisection.
 */
export function nextAdmittedMs(
  sc: ScriptedCounter,
  values: ReadonlyMap<string, string>,
  nowMs: number,
): number | undefined {
  const slots = new ReadSlots(values);
  const admits = (dt: number) =>
    evaluateLimitCheck(buildLimitCheck(sc.tagged, sc.rule, 1, nowMs + dt), slots)[0] === 0;
  if (admits(0)) return 0;
  let lo = 0;
  let hi = 1000;
  while (!admits(hi)) {
    if (hi >= HORIZON_MS) return undefined;
    lo = hi;
    hi = Math.min(hi * 2, HORIZON_MS);
  }
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (admits(mid)) hi = mid;
    else lo = mid;
  }
  return hi;
}

export class CounterClient {
  private readonly store: RedisCounterStore;

  constructor(settings: Settings) {
    if (settings.backendType !== 'redis') {
      throw new Error(`counters reads Redis; BACKEND_TYPE is ${settings.backendType}`);
    }
    this.store = createRedisBackend(settings);
  }

  start(deadlineMs: number): Promise<void> {
    return this.store.start(deadlineMs);
  }

  /** The deployment a key lives in: SECOND-unit counters in the per-second one when configured (as the store routes). */
  private deployment(perSecond: boolean) {
    return perSecond && this.store.perSecond ? this.store.perSecond : this.store.main;
  }

  /** Reads (and with `reset`, deletes) the counters of each counted explanation. */
  async read(list: readonly DescriptorExplanation[], reset: boolean): Promise<CounterReading[]> {
    const out: CounterReading[] = [];
    for (const x of list) {
      if (!x.counted || x.cacheKey === undefined || !x.rule) continue;
      const sc = scriptedCounterOf(x);
      out.push(sc ? await this.readScripted(x, sc, reset) : await this.readFixed(x, x.cacheKey, reset));
    }
    return out;
  }

  private async readFixed(x: DescriptorExplanation, key: string, reset: boolean): Promise<CounterReading> {
    const rule = x.rule!;
    const perSecond = rule.unit === 'SECOND';
    const [stored] = await this.store.get([{ key, hits: 0, expireSeconds: 0, perSecond }]);
    const count = stored ?? 0;
    const d = this.deployment(perSecond);
    const ttlMs = Number(await d.client.pttl(key));
    const deleted = reset ? Number(await d.client.del(key)) > 0 : undefined;
    const resetsIn = x.resetsInSeconds ?? 0;
    // The service counts first, then compares: the next hit is over the limit once count >= limit.
    const overLimit = count >= rule.requestsPerUnit;
    return {
      descriptor: x.descriptor,
      algorithm: rule.algorithm,
      key,
      keys: [key],
      count,
      limit: rule.requestsPerUnit,
      unit: rule.unit,
      remaining: Math.max(0, rule.requestsPerUnit - count),
      shadowMode: rule.shadowMode,
      overLimit,
      nextOkInSeconds: !overLimit ? 0 : rule.requestsPerUnit === 0 ? null : resetsIn,
      resetsInSeconds: resetsIn,
      ttlMs,
      deployment: d.name,
      charged: { window: count },
      ...(deleted === undefined ? {} : { deleted }),
    };
  }

  private async readScripted(
    x: DescriptorExplanation,
    sc: ScriptedCounter,
    reset: boolean,
  ): Promise<CounterReading> {
    const nowMs = Date.now();
    const check = buildLimitCheck(sc.tagged, sc.rule, 0, nowMs);
    const d = this.deployment(check.perSecond);
    // One MGET: the keys of a descriptor share a hash tag, so they live in one cluster slot.
    const raw = await d.client.mget(...check.keys);
    const ttls = await Promise.all(check.keys.map(async (k) => Number(await d.client.pttl(k))));
    const values = new Map<string, string>();
    check.keys.forEach((k, i) => {
      const v = raw[i];
      if (v !== null && v !== undefined) values.set(k, v);
    });
    // Zero hits: the script's computation reports the state and writes nothing.
    const verdict = evaluateLimitCheck(check, new ReadSlots(values));
    const next = nextAdmittedMs(sc, values, nowMs);
    const deleted = reset ? Number(await d.client.del(...check.keys)) > 0 : undefined;
    const limits = sc.rule.limits;
    // The tightest limit, as the service reports it: the least remaining (the first on a tie).
    let at = 0;
    for (let i = 1; i < limits.length; i++) if (verdict[1 + 2 * i]! < verdict[1 + 2 * at]!) at = i;
    let k = 0;
    const readings = limits.map((l, i): LimitReading => {
      const n = l.algorithm === 'sliding_window' ? 2 : 1;
      const keys = check.keys.slice(k, k + n);
      const ttlMs = ttls.slice(k, k + n);
      k += n;
      return {
        algorithm: l.algorithm,
        limit: l.requestsPerUnit,
        unit: l.unit,
        ...(l.algorithm === 'token_bucket' ? { burst: l.burst } : {}),
        remaining: verdict[1 + 2 * i]!,
        replenishedInSeconds: Math.ceil(verdict[2 + 2 * i]! / 1000),
        keys,
        values: keys.map((key) => values.get(key) ?? '0'),
        ttlMs,
        charged: chargedOf(
          l,
          keys.map((key) => values.get(key)),
          nowMs,
        ),
      };
    });
    const tight = readings[at]!;
    return {
      descriptor: x.descriptor,
      algorithm: x.rule!.algorithm,
      key: check.keys[0]!,
      keys: check.keys,
      count: limitCapacity(limits[at]!) - tight.remaining,
      limit: tight.limit,
      unit: tight.unit,
      remaining: tight.remaining,
      shadowMode: sc.rule.shadowMode,
      overLimit: next !== 0,
      nextOkInSeconds: next === undefined ? null : Math.ceil(next / 1000),
      resetsInSeconds: tight.replenishedInSeconds,
      ttlMs: ttls[0]!,
      deployment: d.name,
      limits: readings,
      ...(deleted === undefined ? {} : { deleted }),
    };
  }

  close(): Promise<void> {
    return this.store.close();
  }
}

function ttlText(ms: number): string {
  return ms === -2 ? 'absent' : ms < 0 ? 'none' : `${Math.ceil(ms / 1000)}s`;
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
    const state = !r.overLimit
      ? 'next hit OK'
      : r.nextOkInSeconds === null
        ? 'next hit OVER_LIMIT, never OK'
        : `next hit OVER_LIMIT, OK again in ${r.nextOkInSeconds}s`;
    const shadow = r.shadowMode ? ', shadow: answered OK' : '';
    const outcome = r.deleted === undefined ? '' : r.deleted ? ' — reset (deleted)' : ' — nothing to reset';
    if (!r.limits) {
      out.push(
        `${name}: fixed_window ${r.count} of ${r.limit} per ${r.unit.toLowerCase()} (${state}${shadow}), ${r.remaining} remaining, resets in ${r.resetsInSeconds}s` +
          `, ${chargedText(r.charged ?? { window: r.count })}` +
          ` [key ${r.key} in ${r.deployment}, ttl ${ttlText(r.ttlMs)}]` +
          outcome,
      );
      continue;
    }
    out.push(`${name}: ${r.algorithm} (${state}${shadow}) [in ${r.deployment}]${outcome}`);
    for (const l of r.limits) {
      const burst = l.burst === undefined ? '' : ` burst ${l.burst}`;
      const keys = l.keys.map((k, i) => `${k}=${l.values[i]} ttl ${ttlText(l.ttlMs[i]!)}`).join(', ');
      out.push(
        `  ${l.algorithm} ${l.limit} per ${l.unit.toLowerCase()}${burst}: ${l.remaining} remaining, full again in ${l.replenishedInSeconds}s, ${chargedText(l.charged)} [${keys}]`,
      );
    }
  }
  return out.join('\n') + '\n';
}
