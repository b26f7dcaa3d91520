// The verdict's "ms until more quota" per limit (what the RateLimit header's t is made of), checked
// against its definition on random programs of hits and refunds: with no other hit, a limit has no more
// than its remaining until that many ms have passed, and more once they have; 0 only when waiting brings
// nothing (the limit holds nothing, or its quota is 0).
import t from 'tap';
import fc from 'fast-check';
import type { Algorithm, RateLimitRule } from '../config/index.js';
import {
  buildLimitCheck,
  evaluateLimitCheck,
  moreMsAt,
  type BucketState,
  type NumberSlots,
} from './index.js';

class MapSlots implements NumberSlots {
  readonly numbers = new Map<string, number>();
  readonly buckets = new Map<string, BucketState>();
  read(key: string): number {
    return this.numbers.get(key) ?? 0;
  }
  add(key: string, by: number): void {
    this.numbers.set(key, this.read(key) + by);
  }
  take(key: string, by: number): void {
    this.numbers.set(key, this.read(key) - by);
  }
  readBucket(key: string): BucketState | undefined {
    return this.buckets.get(key);
  }
  writeBucket(key: string, ms: number, frac: number, den: number): void {
    this.buckets.set(key, { count: ms, frac, den });
  }
}

interface Limit {
  algorithm: Algorithm;
  requestsPerUnit: number;
  unitSeconds: number;
  burst: number;
}

const rule = (limits: Limit[]) =>
  ({ limits: limits.map((l) => ({ ...l, unit: 'SECOND', name: 'x' })) }) as unknown as RateLimitRule;

const limitArb: fc.Arbitrary<Limit> = fc
  .record({
    algorithm: fc.constantFrom<Algorithm>('fixed_window', 'sliding_window', 'token_bucket'),
    requestsPerUnit: fc.integer({ min: 0, max: 12 }),
    unitSeconds: fc.constantFrom(1, 2, 7, 60),
    extra: fc.integer({ min: 0, max: 5 }),
  })
  .map(({ algorithm, requestsPerUnit, unitSeconds, extra }) => ({
    algorithm,
    requestsPerUnit,
    unitSeconds,
    burst: algorithm === 'token_bucket' ? requestsPerUnit + extra : 0,
  }));

// Hits (positive) and refunds (negative), each after a pause.
const stepArb = fc.record({
  waitMs: fc.integer({ min: 0, max: 90_000 }),
  hits: fc.integer({ min: -6, max: 6 }),
});

t.test('ms until more quota matches its definition on every algorithm', async (t) => {
  let checked = 0;
  fc.assert(
    fc.property(
      fc.array(limitArb, { minLength: 1, maxLength: 2 }),
      fc.array(stepArb, { maxLength: 12 }),
      fc.integer({ min: 1_700_000_000_000, max: 1_700_000_100_000 }),
      (limits, steps, start) => {
        const r = rule(limits);
        const slots = new MapSlots();
        let now = start;
        for (const s of steps) {
          now += s.waitMs;
          evaluateLimitCheck(buildLimitCheck('{d_k_v_}', r, s.hits, now), slots);
        }
        const n = limits.length;
        const at = (ms: number) => evaluateLimitCheck(buildLimitCheck('{d_k_v_}', r, 0, ms), slots);
        const v = at(now);
        for (let i = 0; i < n; i++) {
          const remaining = v[1 + 2 * i]!;
          const more = v[moreMsAt(n, i)]!;
          if (more === 0) {
            // Nothing to wait for: no later moment has more.
            for (const dt of [1, 999, 60_001, 3_600_000]) {
              if (at(now + dt)[1 + 2 * i]! > remaining) return false;
            }
            continue;
          }
          checked++;
          if (at(now + more - 1)[1 + 2 * i]! > remaining) return false;
          if (at(now + more)[1 + 2 * i]! <= remaining) return false;
        }
        return true;
      },
    ),
    { numRuns: 3000 },
  );
  t.ok(checked > 500, `${checked} limits had something to wait for`);
});

t.test('a refund reports ms until more quota after the refund', async (t) => {
  const r = rule([{ algorithm: 'token_bucket', requestsPerUnit: 10, unitSeconds: 10, burst: 10 }]);
  const slots = new MapSlots();
  const now = 1_700_000_000_000;
  evaluateLimitCheck(buildLimitCheck('{d_k_v_}', r, 10, now), slots);
  const back = evaluateLimitCheck(buildLimitCheck('{d_k_v_}', r, -4, now), slots);
  t.same(back, [0, 4, 6000, 1000], 'a bucket of 10 per 10 s, 4 refunded: 4 left, one more every second');
  const s = rule([{ algorithm: 'sliding_window', requestsPerUnit: 10, unitSeconds: 10, burst: 0 }]);
  evaluateLimitCheck(buildLimitCheck('{d_s_v_}', s, 6, now), slots);
  const w = evaluateLimitCheck(buildLimitCheck('{d_s_v_}', s, -1, now + 4000), slots);
  // 5 in the current window from second 0 of it: more once the next window's weight of them drops to 4,
  // 2 s into it (5 × 8 / 10 = 4), so 6 s to the window's end plus 2.
  t.same(w, [0, 5, 16_000, 8000]);
});
