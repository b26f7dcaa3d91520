// The token bucket and the sliding window keep their bounds at every rate the config accepts, on the
// memory backend and on real Redis (the Lua script) alike: decided through the real limiter against
// models in BigInt rational arithmetic written here (a bucket's TAT in ticks of 1/rate ms, the sliding
// estimate scaled by the period), at the extremes (600,000/s, 2,000,000/s, 4294967295 per unit, one per
// year) and over random rates (fast-check). The clock is injected; bucket keys live at least a second
// in Redis, and every exchange of one simulated instant is sent well within it.
import t, { type Test } from 'tap';
import fc from 'fast-check';
import { startRedis } from '../../harness/redis/index.js';
import { loadConfig, type RateLimitConfig } from '../config/index.js';
import { Limiter } from '../limiter/index.js';
import { type CounterStore } from '../counting/index.js';
import { MemoryCounterStore } from '../memory/index.js';
import { loadSettings } from '../settings/index.js';
import { StatsStore } from '../stats/index.js';
import { RedisCounterStore } from './index.js';

const MAX = 4294967295;
const UNIT_MS: Record<string, number> = {
  second: 1000,
  minute: 60_000,
  hour: 3_600_000,
  day: 86_400_000,
  year: 31_536_000_000,
};

// --- models (BigInt, exact) ----------------------------------------------------------------------

interface Decision {
  fits: boolean;
  remaining: number;
}

/** GCRA with the TAT in ticks of 1/rate ms: a hit costs period ticks; burst·period ticks of credit. */
function bucketModel(rate: number, periodMs: number, burst: number) {
  const r = BigInt(rate);
  const p = BigInt(periodMs);
  const cap = BigInt(burst) * p;
  let tat = 0n;
  return (nowMs: number, hits: number): Decision => {
    const now = BigInt(nowMs) * r;
    const debt = tat > now ? tat - now : 0n;
    const after = debt + BigInt(hits) * p;
    const fits = after <= cap;
    const used = fits ? after : debt;
    if (fits && hits > 0) tat = now + after;
    const covering = (used + p - 1n) / p; // hits whose cost reaches `used`
    const remaining = Number(BigInt(burst) - covering);
    // The limiter reports 0 remaining on OVER_LIMIT.
    return { fits, remaining: fits ? Math.max(Math.min(remaining, burst), 0) : 0 };
  };
}

/** estimate·P = prev·(P − elapsed) + cur·P, compared in integers. */
function slidingModel(limit: number, periodMs: number) {
  const counts = new Map<number, number>();
  const p = BigInt(periodMs);
  const scaled = (now: number, extra: number) => {
    const w = Math.floor(now / periodMs);
    const elapsed = BigInt(now - w * periodMs);
    return BigInt(counts.get(w - 1) ?? 0) * (p - elapsed) + BigInt((counts.get(w) ?? 0) + extra) * p;
  };
  return (now: number, hits: number): Decision => {
    const fits = scaled(now, hits) <= BigInt(limit) * p;
    const room = BigInt(limit) * p - scaled(now, fits ? hits : 0);
    // floor(room / P), floor towards -infinity for a negative room, then at least 0
    const floor = room >= 0n ? room / p : -((-room + p - 1n) / p);
    if (fits && hits > 0) {
      const w = Math.floor(now / periodMs);
      counts.set(w, (counts.get(w) ?? 0) + hits);
    }
    return { fits, remaining: fits ? Math.max(Number(floor), 0) : 0 };
  };
}

// --- backends --------------------------------------------------------------------------------------

const noTls = { caCert: '', clientCert: '', clientKey: '', skipHostnameVerification: false };

interface Backend {
  name: string;
  store: CounterStore;
}

let clock = 0;
const memory = new MemoryCounterStore(() => clock);
t.teardown(() => memory.close());
const redis = await startRedis();
t.teardown(() => redis.stop());
const redisStore = new RedisCounterStore({
  settings: loadSettings({ REDIS_SOCKET_TYPE: 'tcp', REDIS_URL: redis.url }).redis.main,
  tlsFiles: noTls,
});
await redisStore.start(10_000);
t.teardown(() => redisStore.close());
const backends: Backend[] = [
  { name: 'memory', store: memory },
  { name: 'redis', store: redisStore },
];

let unique = 0;

/** A limiter over `store` with the test's clock, and a match for a fresh descriptor of `config`. */
function decider(store: CounterStore, config: RateLimitConfig) {
  const limiter = new Limiter({ store, stats: new StatsStore(), nowMs: () => clock });
  const match = config.getLimit('x', { entries: [{ key: 'k', value: `v${++unique}` }] })!;
  return {
    /** `n` decisions of `hits` at the current clock, sent together (one event-loop turn). */
    async at(n: number, hits = 1): Promise<Decision[]> {
      const all = await Promise.all(
        Array.from({ length: n }, () => limiter.doLimit('x', [match], [hits]).then((s) => s[0]!)),
      );
      return all.map((s) => ({ fits: s.code === 'OK', remaining: s.limitRemaining }));
    },
  };
}

function configOf(rateLimit: string): RateLimitConfig {
  return loadConfig([
    { name: 'x.yaml', yaml: `domain: x\ndescriptors:\n  - key: k\n    rate_limit: ${rateLimit}\n` },
  ]);
}

const START = 1_700_000_040_000;

// --- token bucket at high rates --------------------------------------------------------------------

t.test(
  'token bucket at any rate: exactly burst of 100 simultaneous hits, exactly the refill, burst + rate × elapsed',
  async (t) => {
    const cases: [number, string][] = [
      [600_000, 'second'],
      [2_000_000, 'second'],
      [MAX, 'second'],
      [MAX, 'minute'],
      [MAX, 'year'],
      [1_000_001, 'second'],
    ];
    for (const { name, store } of backends) {
      for (const [rate, unit] of cases) {
        clock = START;
        const d = decider(
          store,
          configOf(`{ unit: ${unit}, requests_per_unit: ${rate}, algorithm: token_bucket, burst: 10 }`),
        );
        const first = await d.at(100);
        t.equal(first.filter((x) => x.fits).length, 10, `${name} ${rate}/${unit}: 10 of 100 admitted`);
        // One ms later the bucket has refilled rate·1ms/unit hits, at most the burst.
        clock += 1;
        const refill = Math.min(Math.floor((rate * 1) / UNIT_MS[unit]!), 10);
        const second = await d.at(100);
        t.equal(second.filter((x) => x.fits).length, refill, `${name} ${rate}/${unit}: ${refill} after 1 ms`);
      }
    }

    // 1.5 hits per ms, three offered each ms: every decision as the model, and over 299 ms exactly
    // burst + rate × elapsed admitted.
    for (const { name, store } of backends) {
      clock = START;
      const d = decider(
        store,
        configOf('{ unit: second, requests_per_unit: 1500, algorithm: token_bucket, burst: 2 }'),
      );
      const model = bucketModel(1500, 1000, 2);
      let admitted = 0;
      const got: Decision[] = [];
      const want: Decision[] = [];
      for (let ms = 0; ms < 300; ms++) {
        clock = START + ms;
        for (const x of await d.at(3)) {
          got.push(x);
          want.push(model(clock, 1));
          if (x.fits) admitted++;
        }
      }
      t.same(got, want, `${name}: every decision and remaining as the exact model`);
      t.equal(admitted, 2 + Math.floor((1500 * 299) / 1000), `${name}: burst + rate × elapsed, exactly`);
    }
  },
);

// --- sliding window at the extremes ---------------------------------------------------------------

/** x⁻¹ mod m (x and m coprime). */
function inverse(x: bigint, m: bigint): bigint {
  let [a, b, u, v] = [x % m, m, 1n, 0n];
  while (b !== 0n) {
    const q = a / b;
    [a, b] = [b, a - q * b];
    [u, v] = [v, u - q * v];
  }
  return ((u % m) + m) % m;
}

t.test(
  'sliding window: exact at the largest rate (1/period above the limit is refused), at one per year',
  async (t) => {
    // prev·(P − e) ≡ 1 (mod P): the previous window weighs Q + 1/P, a fraction no double near 2^32 holds.
    const limit = 4294967291; // prime, coprime with a year in ms
    const P = UNIT_MS.year!;
    const e = Number(((-inverse(BigInt(limit), BigInt(P)) % BigInt(P)) + BigInt(P)) % BigInt(P));
    const Q = Number((BigInt(limit) * BigInt(P - e)) / BigInt(P));
    const ws = Math.floor(START / P) * P;
    for (const { name, store } of backends) {
      const d = decider(
        store,
        configOf(`{ unit: year, requests_per_unit: ${limit}, algorithm: sliding_window }`),
      );
      clock = ws - P + 1;
      const [filled] = await d.at(1, limit);
      t.ok(filled!.fits, `${name}: the previous window takes the whole limit`);
      clock = ws + e;
      const [over] = await d.at(1, limit - Q);
      t.notOk(over!.fits, `${name}: Q + 1/P + (limit − Q) > limit: refused`);
      const [probe] = await d.at(1, 0);
      t.equal(probe!.remaining, limit - Q - 1, `${name}: remaining is floor(limit − estimate)`);
      const [fits] = await d.at(1, limit - Q - 1);
      t.ok(fits!.fits, `${name}: one hit less fits`);
      t.equal(fits!.remaining, 0, `${name}: nothing remains`);
    }

    for (const { name, store } of backends) {
      for (const [rate, unit, step] of [
        [1, 'year', 7 * 86_400_000],
        [MAX, 'second', 97],
        [3, 'day', 3_600_000],
      ] as const) {
        clock = START;
        const d = decider(
          store,
          configOf(`{ unit: ${unit}, requests_per_unit: ${rate}, algorithm: sliding_window }`),
        );
        const model = slidingModel(rate, UNIT_MS[unit]!);
        const hits = rate === MAX ? 600_000_000 : 1;
        const got: Decision[] = [];
        const want: Decision[] = [];
        for (let i = 0; i < 120; i++) {
          clock = START + i * step;
          got.push((await d.at(1, hits))[0]!);
          want.push(model(clock, hits));
        }
        t.ok(
          want.some((w) => !w.fits) && want.some((w) => w.fits),
          `${name} ${rate}/${unit}: both answers occur`,
        );
        t.same(got, want, `${name} ${rate}/${unit}: every decision and remaining as the model`);
      }
    }
  },
);

// --- random rates, both backends against the model ------------------------------------------------

t.test(
  'property: random rates (extremes included) decide as the exact models on memory and Redis',
  async (t) => {
    const rate = fc.oneof(
      fc.constantFrom(1, 2, 3, 999_983, 600_000, 2_000_000, MAX - 1, MAX),
      fc.integer({ min: 1, max: MAX }),
    );
    const unit = fc.constantFrom('second', 'minute', 'hour', 'day', 'year');
    const steps = fc.array(
      fc.record({
        dt: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 5000 })),
        hits: fc.integer({ min: 0, max: 4 }),
      }),
      { minLength: 5, maxLength: 25 },
    );
    let runs = 0;
    await fc.assert(
      fc.asyncProperty(
        rate,
        unit,
        fc.integer({ min: 1, max: 64 }),
        fc.boolean(),
        steps,
        async (r, u, burst, bucket, plan) => {
          runs++;
          const periodMs = UNIT_MS[u]!;
          const spec = bucket
            ? `{ unit: ${u}, requests_per_unit: ${r}, algorithm: token_bucket, burst: ${burst} }`
            : `{ unit: ${u}, requests_per_unit: ${r}, algorithm: sliding_window }`;
          // A bucket refilling for longer than the config allows is refused at load: not drawn.
          if (bucket && BigInt(burst) * BigInt(periodMs) > 10n ** 13n * BigInt(r)) return;
          const config = configOf(spec);
          // Sliding windows at large rates: hits scaled so the limit is reached within the plan.
          const scale = bucket ? 1 : Math.max(1, Math.floor(r / 8));
          for (const { store } of backends) {
            const model = bucket ? bucketModel(r, periodMs, burst) : slidingModel(r, periodMs);
            clock = START;
            const d = decider(store, config);
            for (const s of plan) {
              clock += bucket ? s.dt : s.dt * Math.ceil(periodMs / 5000);
              const [got] = await d.at(1, s.hits * scale);
              const want = model(clock, s.hits * scale);
              if (got!.fits !== want.fits || got!.remaining !== want.remaining) return false;
            }
          }
          return true;
        },
      ),
      { numRuns: 60, seed: 20261125 },
    );
    t.ok(runs >= 60, `${runs} random configurations checked`);
  },
);

// --- refused at load ------------------------------------------------------------------------------

t.test(
  'a token bucket refilling for longer than 1e10 s is refused at load, naming the bound',
  async (t: Test) => {
    // 317 years: accepted; 318: refused.
    t.doesNotThrow(() =>
      configOf('{ unit: year, requests_per_unit: 1, algorithm: token_bucket, burst: 317 }'),
    );
    t.throws(() => configOf('{ unit: year, requests_per_unit: 1, algorithm: token_bucket, burst: 318 }'), {
      message: /descriptors\[0\]\.rate_limit\.burst.*token bucket refills too slowly.*10000000000 seconds/,
    });
    // The default burst (requests_per_unit) refills in one unit: always accepted.
    t.doesNotThrow(() => configOf(`{ unit: year, requests_per_unit: ${MAX}, algorithm: token_bucket }`));
  },
);

t.test('a bucket TAT in whole µs, as an earlier version wrote it, is still read', async (t) => {
  clock = START;
  const config = configOf('{ unit: minute, requests_per_unit: 6, algorithm: token_bucket, burst: 4 }');
  const limiter = new Limiter({ store: redisStore, stats: new StatsStore(), nowMs: () => clock });
  const match = config.getLimit('x', { entries: [{ key: 'k', value: 'legacy' }] })!;
  // Four emission intervals (10 s each) ahead: the bucket is empty.
  await redis.client().set('{x_k_legacy_}tb:60', String((START + 40_000) * 1000), 'PX', 60_000);
  t.equal((await limiter.doLimit('x', [match], [1]))[0]!.code, 'OVER_LIMIT', 'empty: refused');
  clock += 10_000;
  t.equal((await limiter.doLimit('x', [match], [1]))[0]!.code, 'OK', 'one interval later: admitted');
  t.equal(
    await redis.client().get('{x_k_legacy_}tb:60'),
    `${START + 50_000}:0:6`,
    'rewritten in the exact form',
  );
});
