// Test helpers: reference models of every counting algorithm with refunds, written in exact integers
// from the definitions (not from the implementation's formulas), and a driver that runs a program of
// hits and refunds through a Limiter on any counter store with an injected clock. Shared by the
// property tests on the memory backend and on real Redis.
import { loadConfig, type LimitMatch } from '../config/index.js';
import { Limiter } from '../limiter/index.js';
import { StatsStore } from '../stats/index.js';
import type { CounterStore } from './store.js';

export interface LimitModel {
  /** Would the hits fit, and the remaining after them (if they fit) or now (if not). */
  check(nowMs: number, hits: number): { fits: boolean; remaining: number };
  commit(nowMs: number, hits: number): void;
  /** Returns up to `hits` to the limit (clamped to what it holds); the remaining after it. */
  refund(nowMs: number, hits: number): number;
  /** What remaining counts down from: nothing ever reports more. */
  readonly capacity: number;
  /** The reference's fixed window: every hit is counted, rejected ones too (INCRBY). */
  readonly countsRejected?: boolean;
}

export function fixedModel(limit: number, periodMs: number, countsRejected = false): LimitModel {
  const counts = new Map<number, number>();
  const count = (now: number) => counts.get(Math.floor(now / periodMs)) ?? 0;
  return {
    capacity: limit,
    countsRejected,
    check: (now, hits) => {
      const c = count(now);
      const fits = c + hits <= limit;
      return { fits, remaining: Math.max(limit - (fits ? c + hits : c), 0) };
    },
    commit: (now, hits) => counts.set(Math.floor(now / periodMs), count(now) + hits),
    refund: (now, hits) => {
      const c = Math.max(count(now) - hits, 0);
      counts.set(Math.floor(now / periodMs), c);
      return Math.max(limit - c, 0);
    },
  };
}

/** Estimate·P = prev·(P − elapsed) + cur·P, compared in integers; a refund empties cur, then prev. */
export function slidingModel(limit: number, periodMs: number): LimitModel {
  const counts = new Map<number, number>();
  const scaled = (now: number, extra: number) => {
    const w = Math.floor(now / periodMs);
    const elapsed = now - w * periodMs;
    return (counts.get(w - 1) ?? 0) * (periodMs - elapsed) + ((counts.get(w) ?? 0) + extra) * periodMs;
  };
  const remainingAt = (now: number, extra: number) =>
    Math.max(Math.floor((limit * periodMs - scaled(now, extra)) / periodMs), 0);
  return {
    capacity: limit,
    check: (now, hits) => {
      const fits = scaled(now, hits) <= limit * periodMs;
      return { fits, remaining: remainingAt(now, fits ? hits : 0) };
    },
    commit: (now, hits) => {
      const w = Math.floor(now / periodMs);
      counts.set(w, (counts.get(w) ?? 0) + hits);
    },
    refund: (now, hits) => {
      const w = Math.floor(now / periodMs);
      const cur = counts.get(w) ?? 0;
      const prev = counts.get(w - 1) ?? 0;
      const fromCur = Math.min(cur, hits);
      counts.set(w, cur - fromCur);
      counts.set(w - 1, prev - Math.min(prev, hits - fromCur));
      return remainingAt(now, 0);
    },
  };
}

/** A token bucket as credit in µs: refills one µs per µs up to burst·T, a hit costs T, a refund gives T. */
export function bucketModel(perUnit: number, periodMs: number, burst: number): LimitModel {
  const T = (periodMs * 1000) / perUnit;
  if (!Number.isInteger(T)) throw new Error('the model keeps T an integer number of µs');
  let credit = burst * T;
  let at = -Infinity;
  const creditAt = (now: number) => Math.min(burst * T, credit + (now - at) * 1000);
  return {
    capacity: burst,
    check: (now, hits) => {
      const c = creditAt(now);
      const fits = c >= hits * T;
      return { fits, remaining: Math.floor((fits ? c - hits * T : c) / T) };
    },
    commit: (now, hits) => {
      credit = creditAt(now) - hits * T;
      at = now;
    },
    refund: (now, hits) => {
      credit = Math.min(burst * T, creditAt(now) + hits * T);
      at = now;
      return Math.floor(credit / T);
    },
  };
}

/** All limits of one descriptor: admitted only when all fit, then counted in all; refunds go to all. */
export function descriptorModel(models: LimitModel[]) {
  const capacity = Math.min(...models.map((m) => m.capacity));
  return {
    capacity,
    step(now: number, hits: number, refund: boolean): { code: string; remaining: number } {
      if (refund) return { code: 'OK', remaining: Math.min(...models.map((m) => m.refund(now, hits))) };
      const r = models.map((m) => m.check(now, hits));
      const fits = r.every((x) => x.fits);
      for (const m of models) if ((fits || m.countsRejected) && hits > 0) m.commit(now, hits);
      return {
        code: fits ? 'OK' : 'OVER_LIMIT',
        remaining: fits ? Math.min(...r.map((x) => x.remaining)) : 0,
      };
    },
  };
}

/** Rules for every algorithm, and their models (units of a minute or more: no real-time TTL runs out). */
export const REFUND_CONFIG = `
domain: d
descriptors:
  - key: fixed
    rate_limit: { unit: minute, requests_per_unit: 5 }
  - key: sw
    rate_limit: { unit: minute, requests_per_unit: 10, algorithm: sliding_window }
  - key: tb
    rate_limit: { unit: minute, requests_per_unit: 6, algorithm: token_bucket, burst: 4 }
  - key: multi
    rate_limits:
      - { unit: minute, requests_per_unit: 6, algorithm: token_bucket, burst: 3 }
      - { unit: hour, requests_per_unit: 30, algorithm: sliding_window }
      - { unit: minute, requests_per_unit: 4 }
`;

export const REFUND_KEYS = ['fixed', 'sw', 'tb', 'multi'] as const;
export type RefundKey = (typeof REFUND_KEYS)[number];

export function modelOf(key: RefundKey): ReturnType<typeof descriptorModel> {
  switch (key) {
    case 'fixed':
      return descriptorModel([fixedModel(5, 60_000, true)]);
    case 'sw':
      return descriptorModel([slidingModel(10, 60_000)]);
    case 'tb':
      return descriptorModel([bucketModel(6, 60_000, 4)]);
    case 'multi':
      return descriptorModel([bucketModel(6, 60_000, 3), slidingModel(30, 3_600_000), fixedModel(4, 60_000)]);
  }
}

export interface Step {
  /** Ms since the previous step. */
  readonly dt: number;
  readonly hits: number;
  readonly refund: boolean;
}

/** 2023-11-14T22:14:00Z minus 1.5 s: a minute (and hour) boundary comes up soon. */
export const START_MS = 1_700_000_040_000 - 1500;

/** The program's clock (ms): the limiter reads it, and a memory store given `() => clock.now` too. */
export interface Clock {
  now: number;
}

/**
 * Runs `steps` on one descriptor `key`=`value` through a Limiter on `store`, advancing `clock` (from
 * its value at the call), and returns each status's code and remaining, as the model's `step` gives them.
 */
export async function runProgram(
  store: CounterStore,
  key: RefundKey,
  value: string,
  steps: readonly Step[],
  clock: Clock = { now: START_MS },
): Promise<{ code: string; remaining: number }[]> {
  const limiter = new Limiter({
    store,
    stats: new StatsStore(),
    nowMs: () => clock.now,
    nowSeconds: () => Math.floor(clock.now / 1000),
  });
  const match = refundConfig().getLimit('d', { entries: [{ key, value }] }) as LimitMatch;
  const out: { code: string; remaining: number }[] = [];
  for (const s of steps) {
    clock.now += s.dt;
    const [status] = await limiter.doLimit('d', [match], [s.hits], undefined, [s.refund]);
    out.push({ code: status!.code, remaining: status!.limitRemaining });
  }
  return out;
}

/** The model's answers for the same program. */
export function modelProgram(
  key: RefundKey,
  steps: readonly Step[],
  startMs = START_MS,
): { code: string; remaining: number }[] {
  const model = modelOf(key);
  let now = startMs;
  return steps.map((s) => {
    now += s.dt;
    return model.step(now, s.hits, s.refund);
  });
}

let config: ReturnType<typeof loadConfig> | undefined;
export function refundConfig(): ReturnType<typeof loadConfig> {
  return (config ??= loadConfig([{ name: 'refunds.yaml', yaml: REFUND_CONFIG }]));
}
