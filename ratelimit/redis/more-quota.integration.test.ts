// The limit script's full verdict, "ms until more quota" included, equals the memory backend's
// computation (evaluateLimitCheck) on random programs of hits and refunds on real Redis. The clock is
// injected; periods are a minute or longer so no key's real-time TTL runs out while the simulated
// clock stands still.
import t from 'tap';
import fc from 'fast-check';
import { startRedis } from '../../harness/redis/index.js';
import type { Algorithm, RateLimitRule } from '../config/index.js';
import {
  buildLimitCheck,
  evaluateLimitCheck,
  type BucketState,
  type NumberSlots,
} from '../counting/index.js';
import { loadSettings } from '../settings/index.js';
import { RedisCounterStore } from './index.js';

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

const limitArb = fc
  .record({
    algorithm: fc.constantFrom<Algorithm>('fixed_window', 'sliding_window', 'token_bucket'),
    requestsPerUnit: fc.integer({ min: 0, max: 12 }),
    unitSeconds: fc.constantFrom(60, 3600),
    extra: fc.integer({ min: 0, max: 5 }),
  })
  .map(({ algorithm, requestsPerUnit, unitSeconds, extra }) => ({
    algorithm,
    requestsPerUnit,
    unitSeconds,
    burst: algorithm === 'token_bucket' ? requestsPerUnit + extra : 0,
    unit: unitSeconds === 60 ? 'MINUTE' : 'HOUR',
    name: 'x',
  }));

t.test('the script and the memory backend give the same verdicts, ms until more included', async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const store = new RedisCounterStore({
    settings: loadSettings({ REDIS_SOCKET_TYPE: 'tcp', REDIS_URL: redis.url }).redis.main,
    tlsFiles: { caCert: '', clientCert: '', clientKey: '', skipHostnameVerification: false },
  });
  await store.start(10_000);
  t.teardown(() => store.close());
  let run = 0;
  let compared = 0;
  await fc.assert(
    fc.asyncProperty(
      fc.array(limitArb, { minLength: 1, maxLength: 2 }),
      fc.array(
        fc.record({ waitMs: fc.integer({ min: 0, max: 2_000_000 }), hits: fc.integer({ min: -6, max: 6 }) }),
        { minLength: 1, maxLength: 10 },
      ),
      async (limits, steps) => {
        const r = { limits } as unknown as RateLimitRule;
        const tagged = `{d_run_${run++}_}`;
        const slots = new MapSlots();
        let now = 1_700_000_000_000;
        for (const s of [...steps, { waitMs: 1, hits: 0 }]) {
          now += s.waitMs;
          const check = buildLimitCheck(tagged, r, s.hits, now);
          const [got] = await store.evaluate([check]);
          const want = evaluateLimitCheck(check, slots);
          compared++;
          if (JSON.stringify(got) !== JSON.stringify(want)) {
            t.fail(
              `${JSON.stringify({ limits, steps, at: s })}: redis ${JSON.stringify(got)}, memory ${JSON.stringify(want)}`,
            );
            return false;
          }
        }
        return true;
      },
    ),
    { numRuns: 150 },
  );
  t.ok(compared > 300, `${compared} verdicts compared`);
});
