// Refunds (is_negative_hits) on every algorithm, on the memory backend through the Limiter, against the
// models of testing.ts: random programs of hits and refunds over window boundaries give the model's
// code and remaining at every step, a refund is always OK, and nothing ever reports more than the
// limit's budget. The same computation runs in Redis' script: ratelimit/redis/refunds.integration.test.ts.
import t from 'tap';
import fc from 'fast-check';
import { MemoryCounterStore } from '../memory/index.js';
import {
  REFUND_KEYS,
  modelOf,
  modelProgram,
  refundConfig,
  runProgram,
  START_MS,
  type RefundKey,
  type Step,
} from './testing.js';
import {
  buildFixedWindowRefund,
  buildLimitCheck,
  evaluateLimitCheck,
  refundLimitCheck,
  taggedKeyBase,
} from './algorithms.js';
import { cacheKey, Limiter, LocalOverLimitCache } from '../limiter/index.js';
import { StatsStore } from '../stats/index.js';

const step: fc.Arbitrary<Step> = fc.record({
  dt: fc.oneof(
    { weight: 8, arbitrary: fc.integer({ min: 0, max: 4 }).map((q) => q * 250) },
    { weight: 1, arbitrary: fc.integer({ min: 29_000, max: 61_000 }) },
  ),
  hits: fc.oneof({ weight: 6, arbitrary: fc.integer({ min: 0, max: 3 }) }, fc.integer({ min: 4, max: 40 })),
  refund: fc.boolean(),
});
const program = fc.array(step, { minLength: 1, maxLength: 60 });

t.test('every algorithm: hits and refunds decide as the model, never above the budget', async (t) => {
  for (const key of REFUND_KEYS) {
    let runs = 0;
    await fc.assert(
      fc.asyncProperty(program, async (steps) => {
        const clock = { now: START_MS };
        const store = new MemoryCounterStore(() => clock.now, 1e9);
        try {
          const got = await runProgram(store, key, 'v', steps, clock);
          const want = modelProgram(key, steps);
          const capacity = modelOf(key).capacity;
          runs++;
          for (let i = 0; i < steps.length; i++) {
            if (got[i]!.remaining > capacity) return false;
            if (steps[i]!.refund && got[i]!.code !== 'OK') return false;
          }
          if (JSON.stringify(got) !== JSON.stringify(want)) {
            t.same(got, want, `${key}: ${JSON.stringify(steps)}`);
            return false;
          }
          return true;
        } finally {
          await store.close();
        }
      }),
      { numRuns: 150 },
    );
    t.ok(runs >= 150, `${key}: ${runs} random programs as the model`);
  }
});

t.test('a refund larger than what a window holds is clamped: no budget is minted', async (t) => {
  for (const key of REFUND_KEYS) {
    const model = modelOf(key);
    const steps: Step[] = [
      { dt: 0, hits: 2, refund: false },
      { dt: 0, hits: 1000, refund: true },
      { dt: 0, hits: 1000, refund: true },
      // Everything the limit allows from full, and one more.
      ...Array.from({ length: model.capacity + 1 }, () => ({ dt: 0, hits: 1, refund: false })),
    ];
    const clock = { now: START_MS };
    const store = new MemoryCounterStore(() => clock.now, 1e9);
    const got = await runProgram(store, key, 'clamp', steps, clock);
    const admitted = got.slice(3).filter((s) => s.code === 'OK').length;
    t.equal(admitted, model.capacity, `${key}: after refunding more than was used, exactly the budget`);
    t.equal(got[1]!.code, 'OK', `${key}: the refund is OK`);
    t.equal(got[1]!.remaining, model.capacity, `${key}: the refund reports the whole budget, not more`);
    t.same(got, modelProgram(key, steps), `${key}: as the model`);
    await store.close();
  }
});

t.test('a refund never creates a key, and a zero refund changes nothing', async (t) => {
  const writes: string[] = [];
  const slots = {
    read: () => 0,
    add: (k: string) => writes.push(`add ${k}`),
    take: (k: string) => writes.push(`take ${k}`),
    readBucket: () => undefined,
    writeBucket: (k: string) => writes.push(`bucket ${k}`),
  };
  for (const key of ['sw', 'tb', 'multi'] as RefundKey[]) {
    const m = refundConfig().getLimit('d', { entries: [{ key, value: 'v' }] })!;
    const tagged = taggedKeyBase('', 'd', m.keyEntries);
    const v = refundLimitCheck(buildLimitCheck(tagged, m.rule, -5, START_MS), slots);
    t.equal(v[0], 0, `${key}: a refund is admitted`);
    const zero = evaluateLimitCheck(buildLimitCheck(tagged, m.rule, -0, START_MS), slots);
    t.equal(zero[0], 0, `${key}: a zero refund is a zero-hit check`);
  }
  t.same(writes, [], 'nothing written for absent keys');
});

t.test('a settle arriving in the next window refunds that window, by the documented rule', async (t) => {
  // START_MS is 1.5 s before a minute boundary: the reservation is in one window, the refund 2 s later
  // in the next one.
  const cases: [RefundKey, number, number, number][] = [
    // key, hits reserved, remaining just before the refund (a zero-hit check), remaining after it
    ['fixed', 4, 5, 5], // the new window's counter is empty: nothing to return
    ['sw', 8, 2, 5], // taken from the previous window: weighted 8 -> 5 at 0.5 s into the window
    ['tb', 4, 0, 3], // T = 10 s: debt 38 s -> 8 s
  ];
  for (const [key, reserved, before, after] of cases) {
    const steps: Step[] = [
      { dt: 0, hits: reserved, refund: false },
      { dt: 2000, hits: 0, refund: false },
      { dt: 0, hits: 3, refund: true },
    ];
    const clock = { now: START_MS };
    const store = new MemoryCounterStore(() => clock.now, 1e9);
    const got = await runProgram(store, key, 'late', steps, clock);
    await store.close();
    t.equal(got[0]!.code, 'OK', `${key}: reserved`);
    t.equal(got[1]!.remaining, before, `${key}: ${before} remaining in the next window before the settle`);
    t.equal(got[2]!.remaining, after, `${key}: ${after} remaining after it`);
    t.same(got, modelProgram(key, steps), `${key}: as the model`);
  }
});

t.test("after a refund on a rule, a pod keeps that rule's keys in its local cache for 1 s", async (t) => {
  const clock = { now: START_MS + 10_000 };
  const store = new MemoryCounterStore(() => clock.now, 1e9);
  t.teardown(() => store.close());
  const pod = (cache: LocalOverLimitCache) =>
    new Limiter({
      store,
      stats: new StatsStore(),
      localCache: cache,
      nowMs: () => clock.now,
      nowSeconds: () => Math.floor(clock.now / 1000),
    });
  const a = pod(new LocalOverLimitCache(100_000, () => clock.now));
  const b = pod(new LocalOverLimitCache(100_000, () => clock.now));
  const match = (value: string) => refundConfig().getLimit('d', { entries: [{ key: 'fixed', value }] })!;
  const decide = async (l: Limiter, value: string, hits: number, refund = false) =>
    (await l.doLimit('d', [match(value)], [hits], undefined, [refund]))[0]!;

  // Pod A has answered a refund on the rule; pod B has not.
  await decide(a, 'first', 1, true);
  for (const [name, l] of [
    ['refunded', a],
    ['never refunded', b],
  ] as const) {
    const value = `key-${name}`;
    t.equal((await decide(l, value, 6)).code, 'OVER_LIMIT', `${name}: over, and cached`);
    // Another pod refunds the key in the store: this one does not see it.
    await store.evaluate([
      buildFixedWindowRefund(
        cacheKey('', 'd', match(value).keyEntries, 60, Math.floor(clock.now / 1000)),
        5,
        60,
        false,
        4,
        clock.now,
      ),
    ]);
  }
  clock.now += 1100;
  t.equal(
    (await decide(a, 'key-refunded', 1)).code,
    'OK',
    'refunded rule: the store decides again after 1 s',
  );
  t.equal(
    (await decide(b, 'key-never refunded', 1)).code,
    'OVER_LIMIT',
    'a rule never refunded here: cached for the rest of the window, as the reference',
  );
});
