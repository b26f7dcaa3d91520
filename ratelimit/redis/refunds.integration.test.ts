// Refunds (is_negative_hits) on real Redis, single, cluster and sentinel, through the production layers
// (the batcher, coalescing.ts): random programs of hits and refunds on every algorithm decide as
// the models of counting/testing.ts (and as the memory backend); refunds and hits sent concurrently
// never push a counter below zero nor a budget above its limit; a fixed window's refund is a DECRBY
// on the reference's own key that keeps its expiry and never creates it.
import t, { type Test } from 'tap';
import fc from 'fast-check';
import { startRedis, startRedisCluster, startRedisSentinel } from '../../harness/redis/index.js';
import { Limiter } from '../limiter/index.js';
import { CoalescingCounterStore, type CounterStore } from '../counting/index.js';
import {
  REFUND_KEYS,
  START_MS,
  modelOf,
  modelProgram,
  refundConfig,
  runProgram,
  type RefundKey,
  type Step,
} from '../counting/testing.js';
import { loadSettings } from '../settings/index.js';
import { StatsStore } from '../stats/index.js';
import { RedisCounterStore } from './index.js';

const noTls = { caCert: '', clientCert: '', clientKey: '', skipHostnameVerification: false };
const redisSettings = (env: Record<string, string>) =>
  loadSettings({ REDIS_SOCKET_TYPE: 'tcp', ...env }).redis.main;

const step: fc.Arbitrary<Step> = fc.record({
  dt: fc.oneof(
    { weight: 8, arbitrary: fc.integer({ min: 0, max: 4 }).map((q) => q * 250) },
    { weight: 1, arbitrary: fc.integer({ min: 29_000, max: 61_000 }) },
  ),
  hits: fc.oneof({ weight: 6, arbitrary: fc.integer({ min: 0, max: 3 }) }, fc.integer({ min: 4, max: 40 })),
  refund: fc.boolean(),
});

let programs = 0;

/** Random programs per algorithm, each on its own descriptor value, as the model. */
async function asModel(t: Test, name: string, store: CounterStore): Promise<void> {
  for (const key of REFUND_KEYS) {
    let runs = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 40 }), async (steps) => {
        // Clocks far apart per program: no program meets another's keys.
        const clock = { now: START_MS + programs++ * 7 * 86_400_000 };
        const startMs = clock.now;
        const got = await runProgram(store, key, `${name}-${programs}`, steps, clock);
        const want = modelProgram(key, steps, startMs);
        runs++;
        if (JSON.stringify(got) !== JSON.stringify(want)) {
          t.same(got, want, `${name} ${key}: ${JSON.stringify(steps)}`);
          return false;
        }
        return true;
      }),
      { numRuns: 25, seed: 4242 },
    );
    t.ok(runs >= 25, `${name} ${key}: ${runs} random programs of hits and refunds as the model`);
  }
}

/** capacity hits, then hits and refunds at once, then an oversized refund: bounds hold throughout. */
async function concurrent(t: Test, name: string, store: CounterStore, key: RefundKey): Promise<void> {
  const now = START_MS + 3_000_000_000;
  const limiter = new Limiter({
    store,
    stats: new StatsStore(),
    nowMs: () => now,
    nowSeconds: () => Math.floor(now / 1000),
  });
  const match = refundConfig().getLimit('d', { entries: [{ key, value: `${name}-concurrent` }] })!;
  const capacity = modelOf(key).capacity;
  const hit = (n: number, refund: boolean) =>
    limiter.doLimit('d', [match], [n], undefined, [refund]).then((s) => s[0]!);
  for (let i = 0; i < capacity; i++) await hit(1, false);
  const refunds = 40;
  const calls: Promise<{ code: string; limitRemaining: number }>[] = [];
  for (let i = 0; i < refunds; i++) calls.push(hit(1, true), hit(1, false));
  const answers = await Promise.all(calls);
  const refundAnswers = answers.filter((_, i) => i % 2 === 0);
  const hitAnswers = answers.filter((_, i) => i % 2 === 1);
  t.ok(
    refundAnswers.every((s) => s.code === 'OK'),
    `${name} ${key}: ${refunds} concurrent refunds all OK`,
  );
  const admitted = hitAnswers.filter((s) => s.code === 'OK').length;
  // How many fit depends on the order Redis runs them in (a reference fixed window also counts the
  // rejected hits): the bound is that refunds never admit more than they returned.
  t.ok(admitted <= refunds, `${name} ${key}: no more admitted than was refunded (${admitted} <= ${refunds})`);
  t.ok(
    answers.every((s) => s.limitRemaining >= 0 && s.limitRemaining <= capacity),
    `${name} ${key}: every remaining within [0, ${capacity}]`,
  );
  const reset = await hit(1_000_000, true);
  t.equal(
    reset.limitRemaining,
    capacity,
    `${name} ${key}: an oversized refund gives the budget back, not more`,
  );
  let ok = 0;
  for (let i = 0; i <= capacity; i++) if ((await hit(1, false)).code === 'OK') ok++;
  t.equal(ok, capacity, `${name} ${key}: then exactly the budget is admitted`);
}

t.test('redis single: refunds as the model, atomic under concurrency, reference keys', async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const base = new RedisCounterStore({ settings: redisSettings({ REDIS_URL: redis.url }), tlsFiles: noTls });
  await base.start(10_000);
  t.teardown(() => base.close());
  const store = new CoalescingCounterStore(base);
  await asModel(t, 'single', store);
  for (const key of REFUND_KEYS) await concurrent(t, 'single', store, key);

  // The fixed window's refund on the reference's key: DECRBY keeps the expiry, an absent key stays absent.
  const now = START_MS + 5_000_000_000;
  const limiter = new Limiter({ store, stats: new StatsStore(), nowSeconds: () => Math.floor(now / 1000) });
  const match = refundConfig().getLimit('d', { entries: [{ key: 'fixed', value: 'ref' }] })!;
  const key = `d_fixed_ref_${Math.floor(now / 60_000) * 60}`;
  const [absent] = await limiter.doLimit('d', [match], [3], undefined, [true]);
  t.equal(absent!.code, 'OK');
  t.equal(absent!.limitRemaining, 5, 'a refund of an absent key: the whole limit remains');
  t.equal(await redis.client().exists(key), 0, 'and the key is not created');
  await limiter.doLimit('d', [match], [4]);
  const ttl = await redis.client().ttl(key);
  t.ok(ttl > 0 && ttl <= 60, `the reference's INCRBY + EXPIRE set its expiry (${ttl} s)`);
  const [refunded] = await limiter.doLimit('d', [match], [3], undefined, [true]);
  t.equal(refunded!.limitRemaining, 4);
  t.equal(await redis.client().get(key), '1', "the reference's key went down by 3");
  t.ok((await redis.client().ttl(key)) > 0, 'and kept its expiry');
  await limiter.doLimit('d', [match], [2], undefined, [true]);
  t.equal(await redis.client().get(key), '0', 'floored at 0');
});

t.test('redis cluster: refunds as the model, atomic under concurrency', async (t) => {
  const cluster = await startRedisCluster({ replicasPerMaster: 0 });
  t.teardown(() => cluster.stop());
  const base = new RedisCounterStore({
    settings: redisSettings({ REDIS_TYPE: 'cluster', REDIS_URL: cluster.urls }),
    tlsFiles: noTls,
  });
  await base.start(15_000);
  t.teardown(() => base.close());
  const store = new CoalescingCounterStore(base);
  await asModel(t, 'cluster', store);
  for (const key of REFUND_KEYS) await concurrent(t, 'cluster', store, key);
});

t.test('redis sentinel: refunds as the model', async (t) => {
  const group = await startRedisSentinel();
  t.teardown(() => group.stop());
  const base = new RedisCounterStore({
    settings: redisSettings({
      REDIS_TYPE: 'sentinel',
      REDIS_URL: `${group.masterName},${group.sentinelUrls}`,
    }),
    tlsFiles: noTls,
  });
  await base.start(15_000);
  t.teardown(() => base.close());
  const store = new CoalescingCounterStore(base);
  await asModel(t, 'sentinel', store);
  await concurrent(t, 'sentinel', store, 'multi');
});
