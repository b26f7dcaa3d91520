// Sliding window, token bucket and several limits per descriptor on real Redis (single and cluster)
// and on the memory backend, against reference models written here (exact integer arithmetic, not
// the implementation's formulas), over bursts that cross window boundaries. The clock is injected,
// so every decision is deterministic; units are minutes or longer so no key's real-time TTL can run
// out while the simulated clock stands still.
import { Socket } from 'node:net';
import t, { type Test } from 'tap';
import {
  startRedis,
  startRedisCluster,
  startRedisSentinel,
  respCommand,
  slotOf,
} from '../../harness/redis/index.js';
import { loadConfig } from '../config/index.js';
import { Limiter } from '../limiter/index.js';
import { CoalescingCounterStore, type CounterStore } from '../counting/index.js';
import { MemoryCounterStore } from '../memory/index.js';
import { loadSettings } from '../settings/index.js';
import { StatsStore } from '../stats/index.js';
import { RedisCounterStore } from './index.js';

const CONFIG = `
domain: d
descriptors:
  - key: sw
    rate_limit: { unit: minute, requests_per_unit: 10, algorithm: sliding_window }
  - key: tb
    rate_limit: { unit: minute, requests_per_unit: 6, algorithm: token_bucket, burst: 4 }
  - key: multi
    rate_limits:
      - { unit: minute, requests_per_unit: 6, algorithm: token_bucket, burst: 3 }
      - { unit: hour, requests_per_unit: 30, algorithm: sliding_window }
      - { unit: minute, requests_per_unit: 4 }
  - key: fixed
    rate_limit: { unit: minute, requests_per_unit: 5 }
`;
const config = loadConfig([{ name: 'c.yaml', yaml: CONFIG }]);

// --- reference models (exact integers: µs for the bucket, ms·count for the sliding estimate) ------

interface Model {
  /** Would the hit fit, and the remaining after it (if it fits) or now (if not). */
  check(nowMs: number, hits: number): { fits: boolean; remaining: number };
  commit(nowMs: number, hits: number): void;
}

function fixedModel(limit: number, periodMs: number): Model {
  const counts = new Map<number, number>();
  const count = (now: number) => counts.get(Math.floor(now / periodMs)) ?? 0;
  return {
    check: (now, hits) => {
      const c = count(now);
      const fits = c + hits <= limit;
      return { fits, remaining: Math.max(limit - (fits ? c + hits : c), 0) };
    },
    commit: (now, hits) => counts.set(Math.floor(now / periodMs), count(now) + hits),
  };
}

/** Estimate·P = prev·(P − elapsed) + cur·P, compared in integers. */
function slidingModel(limit: number, periodMs: number): Model {
  const counts = new Map<number, number>();
  const scaled = (now: number, extra: number) => {
    const w = Math.floor(now / periodMs);
    const elapsed = now - w * periodMs;
    return (counts.get(w - 1) ?? 0) * (periodMs - elapsed) + ((counts.get(w) ?? 0) + extra) * periodMs;
  };
  return {
    check: (now, hits) => {
      const fits = scaled(now, hits) <= limit * periodMs;
      const used = scaled(now, fits ? hits : 0);
      return { fits, remaining: Math.max(Math.floor((limit * periodMs - used) / periodMs), 0) };
    },
    commit: (now, hits) => {
      const w = Math.floor(now / periodMs);
      counts.set(w, (counts.get(w) ?? 0) + hits);
    },
  };
}

/** A token bucket as credit in µs: refills one µs per µs up to burst·T, a hit costs T. */
function bucketModel(perUnit: number, periodMs: number, burst: number): Model {
  const T = (periodMs * 1000) / perUnit;
  t.ok(Number.isInteger(T), 'the model keeps T an integer number of µs');
  let credit = burst * T;
  let at = -Infinity;
  const creditAt = (now: number) => Math.min(burst * T, credit + (now - at) * 1000);
  return {
    check: (now, hits) => {
      const c = creditAt(now);
      const fits = c >= hits * T;
      return { fits, remaining: Math.floor((fits ? c - hits * T : c) / T) };
    },
    commit: (now, hits) => {
      credit = creditAt(now) - hits * T;
      at = now;
    },
  };
}

/** All limits of one descriptor: admitted only when all fit, then counted in all. */
function allOf(models: Model[]) {
  return (now: number, hits: number) => {
    const r = models.map((m) => m.check(now, hits));
    const fits = r.every((x) => x.fits);
    if (fits) for (const m of models) m.commit(now, hits);
    return { fits, remaining: fits ? Math.min(...r.map((x) => x.remaining)) : 0 };
  };
}

// --- load ---------------------------------------------------------------------------------------

/** 2023-11-14T22:14:00Z minus 1.5 s: a minute (and hour-aligned window) boundary comes up soon. */
const START_MS = 1_700_000_040_000 - 1500;

/** A deterministic burst pattern: steps of 250 ms (sometimes a jump), 1-3 hits, crossing minutes. */
function schedule(seed: number, n: number): { at: number; hits: number }[] {
  let x = seed;
  const rnd = () => (x = (x * 1103515245 + 12345) % 2147483648) / 2147483648;
  const out: { at: number; hits: number }[] = [];
  let at = START_MS;
  for (let i = 0; i < n; i++) {
    const r = rnd();
    at += r < 0.08 ? 29_000 + Math.floor(rnd() * 4) * 250 : Math.floor(rnd() * 4) * 250;
    out.push({ at, hits: 1 + Math.floor(rnd() * 3 * rnd()) });
  }
  return out;
}

interface Outcome {
  codes: string[];
  remaining: number[];
}

async function drive(store: CounterStore, key: string, value: string, seed: number): Promise<Outcome> {
  let now = 0;
  const limiter = new Limiter({
    store,
    stats: new StatsStore(),
    nowMs: () => now,
    nowSeconds: () => Math.floor(now / 1000),
  });
  const match = config.getLimit('d', { entries: [{ key, value }] });
  const out: Outcome = { codes: [], remaining: [] };
  for (const step of schedule(seed, 160)) {
    now = step.at;
    const [s] = await limiter.doLimit('d', [match], [step.hits]);
    out.codes.push(s!.code);
    out.remaining.push(s!.limitRemaining);
  }
  return out;
}

function expected(key: string, seed: number): Outcome {
  const decide =
    key === 'sw'
      ? allOf([slidingModel(10, 60_000)])
      : key === 'tb'
        ? allOf([bucketModel(6, 60_000, 4)])
        : allOf([bucketModel(6, 60_000, 3), slidingModel(30, 3_600_000), fixedModel(4, 60_000)]);
  const out: Outcome = { codes: [], remaining: [] };
  for (const step of schedule(seed, 160)) {
    const r = decide(step.at, step.hits);
    out.codes.push(r.fits ? 'OK' : 'OVER_LIMIT');
    out.remaining.push(r.remaining);
  }
  return out;
}

const noTls = { caCert: '', clientCert: '', clientKey: '', skipHostnameVerification: false };
const redisSettings = (env: Record<string, string>) =>
  loadSettings({ REDIS_SOCKET_TYPE: 'tcp', ...env }).redis.main;

async function checkBackend(
  t: Test,
  name: string,
  store: CounterStore,
  valuePrefix: string,
): Promise<Record<string, Outcome>> {
  const results: Record<string, Outcome> = {};
  for (const key of ['sw', 'tb', 'multi']) {
    for (const seed of [7, 1234]) {
      const got = await drive(store, key, `${valuePrefix}-${seed}`, seed);
      const want = expected(key, seed);
      const over = want.codes.filter((c) => c === 'OVER_LIMIT').length;
      t.ok(over > 10 && over < 150, `${name} ${key}/${seed}: the load is rejected sometimes (${over}/160)`);
      t.same(got.codes, want.codes, `${name} ${key}/${seed}: every decision as the model`);
      t.same(got.remaining, want.remaining, `${name} ${key}/${seed}: every remaining as the model`);
      results[`${key}/${seed}`] = got;
    }
  }
  return results;
}

t.test('memory, redis single, cluster and sentinel decide as the models and agree', async (t) => {
  const memory = new MemoryCounterStore(() => 0);
  t.teardown(() => memory.close());
  const mem = await checkBackend(t, 'memory', memory, 'mem');

  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const single = new RedisCounterStore({
    settings: redisSettings({ REDIS_URL: redis.url }),
    tlsFiles: noTls,
  });
  await single.start(10_000);
  t.teardown(() => single.close());
  const one = await checkBackend(t, 'single', single, 'one');
  t.same(one, mem, 'redis single and memory agree on every decision');

  const stats = await redisInfoStats(redis.port);
  t.ok(stats.evalsha > 0, `the script is called by EVALSHA (${stats.evalsha} calls, ${stats.eval} EVAL)`);
  t.ok(stats.eval <= 1, 'the script text is sent once per connection');
  t.equal(stats.evalsha + stats.eval, 3 * 2 * 160, 'one Redis command per descriptor decision');

  const cluster = await startRedisCluster({ replicasPerMaster: 0 });
  t.teardown(() => cluster.stop());
  const clustered = new RedisCounterStore({
    settings: redisSettings({ REDIS_TYPE: 'cluster', REDIS_URL: cluster.urls }),
    tlsFiles: noTls,
  });
  await clustered.start(15_000);
  t.teardown(() => clustered.close());
  const many = await checkBackend(t, 'cluster', clustered, 'many');
  t.same(many, mem, 'redis cluster and memory agree on every decision');

  const group = await startRedisSentinel();
  t.teardown(() => group.stop());
  const sentinel = new RedisCounterStore({
    settings: redisSettings({
      REDIS_TYPE: 'sentinel',
      REDIS_URL: `${group.masterName},${group.sentinelUrls}`,
    }),
    tlsFiles: noTls,
  });
  await sentinel.start(15_000);
  t.teardown(() => sentinel.close());
  const watched = await checkBackend(t, 'sentinel', sentinel, 'sen');
  t.same(watched, mem, 'redis sentinel and memory agree on every decision');
});

async function redisInfoStats(port: number): Promise<{ evalsha: number; eval: number }> {
  const info = String(await respCommand({ port }, 'INFO', 'commandstats'));
  const calls = (cmd: string) => Number(new RegExp(`cmdstat_${cmd}:calls=(\\d+)`).exec(info)?.[1] ?? 0);
  return { evalsha: calls('evalsha'), eval: calls('eval') };
}

t.test('several limits: a hit rejected by one limit is counted in none; keys share one slot', async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const store = new RedisCounterStore({ settings: redisSettings({ REDIS_URL: redis.url }), tlsFiles: noTls });
  await store.start(10_000);
  t.teardown(() => store.close());
  // One second into a minute: the whole exchange stays in one fixed window.
  let now = START_MS + 2500;
  const limiter = new Limiter({ store, stats: new StatsStore(), nowMs: () => now });
  const match = config.getLimit('d', { entries: [{ key: 'multi', value: 'v' }] })!;
  const decide = async (hits = 1) => (await limiter.doLimit('d', [match], [hits]))[0]!;

  // The bucket (burst 3) admits 3 at once; the 4th is rejected by it, not by the fixed window (4/min).
  for (let i = 0; i < 3; i++) t.equal((await decide()).code, 'OK');
  const rejected = await decide();
  t.equal(rejected.code, 'OVER_LIMIT');
  t.same(
    rejected.currentLimit,
    { requestsPerUnit: 6, unit: 'MINUTE' },
    'the status names the limit that rejected',
  );
  const ws = Math.floor(now / 60_000) * 60;
  const fixedKey = `{d_multi_v_}fw:60:${ws}`;
  const slidingKey = `{d_multi_v_}sw:3600:${Math.floor(now / 3_600_000) * 3600}`;
  t.equal(await redis.client().get(fixedKey), '3', 'the fixed-window counter holds only the admitted hits');
  t.equal(await redis.client().get(slidingKey), '3', 'so does the sliding window');
  const start = now;
  t.equal(
    await redis.client().get('{d_multi_v_}tb:60'),
    `${start + 30_000}:0:6`,
    'the bucket TAT (ms:ticks:rate) advanced by 3 emission intervals',
  );
  t.equal(slotOf(fixedKey), slotOf(slidingKey), 'one hash slot');
  t.equal(slotOf(fixedKey), slotOf('{d_multi_v_}tb:60'), 'one hash slot');
  t.ok((await redis.client().pttl(fixedKey)) > 0, 'keys expire');

  // 20 s later the bucket has two tokens again; the fixed window (4/min) admits its 4th hit.
  now += 20_000;
  const fourth = await decide();
  t.equal(fourth.code, 'OK');
  t.equal(fourth.limitRemaining, 0, 'the fixed window is now exhausted and is the limit shown');
  t.same(fourth.currentLimit, { requestsPerUnit: 4, unit: 'MINUTE' });
  now += 20_000;
  const fifth = await decide();
  t.equal(fifth.code, 'OVER_LIMIT', 'rejected by the fixed window although the bucket has tokens');
  t.same(fifth.currentLimit, { requestsPerUnit: 4, unit: 'MINUTE' });
  t.equal(
    await redis.client().get('{d_multi_v_}tb:60'),
    `${start + 40_000}:0:6`,
    'the bucket did not pay for it',
  );

  // NOSCRIPT: after SCRIPT FLUSH the next call reloads the script and still decides.
  await respCommand({ port: redis.port }, 'SCRIPT', 'FLUSH');
  now += 60_000;
  t.equal((await decide()).code, 'OK', 'decided after SCRIPT FLUSH');
});

t.test('a single fixed window keeps the reference commands (INCRBY/EXPIRE, no script)', async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const store = new RedisCounterStore({ settings: redisSettings({ REDIS_URL: redis.url }), tlsFiles: noTls });
  await store.start(10_000);
  t.teardown(() => store.close());
  const now = START_MS;
  const limiter = new Limiter({
    store,
    stats: new StatsStore(),
    nowSeconds: () => Math.floor(now / 1000),
  });
  const match = config.getLimit('d', { entries: [{ key: 'fixed', value: 'v' }] })!;
  await limiter.doLimit('d', [match], [2]);
  t.equal(await redis.client().get(`d_fixed_v_${Math.floor(now / 60_000) * 60}`), '2', "the reference's key");
  const stats = await redisInfoStats(redis.port);
  t.equal(stats.evalsha + stats.eval, 0, 'no script');
});

t.test('script calls of one event-loop turn reach Redis in one write, each decided alone', async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const store = new RedisCounterStore({ settings: redisSettings({ REDIS_URL: redis.url }), tlsFiles: noTls });
  await store.start(10_000);
  t.teardown(() => store.close());
  // As the service stacks it: the batcher sends the turn's checks in one batch (coalescing.ts).
  const storeCalls: number[] = [];
  const send = store.send.bind(store);
  store.send = (batch) => {
    storeCalls.push(batch.checks.length);
    return send(batch);
  };
  let now = START_MS;
  const limiter = new Limiter({
    store: new CoalescingCounterStore(store),
    stats: new StatsStore(),
    nowMs: () => now,
  });
  const tb = config.getLimit('d', { entries: [{ key: 'tb', value: 'turn' }] })!;
  await limiter.doLimit('d', [tb], [0]); // the connection has loaded the script (EVAL) before we count
  now += 1;
  storeCalls.length = 0;
  // The writes of every socket to this Redis, counted on our side: what the kernel or a busy Redis then
  // does with them (one read or several) does not change how many writes the turn took.
  let writes = 0;
  const proto = Socket.prototype as unknown as Record<'write' | '_writev', (...a: unknown[]) => unknown>;
  const write = proto.write;
  const writev = proto._writev;
  const mine = (sock: Socket) => sock.remotePort === redis.port;
  proto.write = function (this: Socket, ...a: unknown[]) {
    if (mine(this) && !this.writableCorked) writes++;
    return write.apply(this, a);
  };
  proto._writev = function (this: Socket, ...a: unknown[]) {
    if (mine(this)) writes++;
    return writev.apply(this, a);
  };
  t.teardown(() => {
    proto.write = write;
    proto._writev = writev;
  });
  // 12 calls from one callback, as the gRPC listener hands the service the calls of one socket read.
  const calls: Promise<{ code: string }[]>[] = [];
  for (let i = 0; i < 12; i++) calls.push(limiter.doLimit('d', [tb], [1]));
  const codes = (await Promise.all(calls)).map((s) => s[0]!.code);
  // burst 4: the calls are decided one after the other, in order, as if sent alone.
  t.same(
    codes,
    [...Array<string>(4).fill('OK'), ...Array<string>(8).fill('OVER_LIMIT')],
    'each call decided alone',
  );
  t.same(storeCalls, [12], 'the 12 checks of the turn reach the store in one call');
  t.equal(writes, 1, 'and leave for Redis in one socket write');

  // A lone call leaves at the end of its callback, not of the event-loop turn: it is written before
  // the turn's setImmediate callbacks run. Calls that come in later ticks while it is in flight wait
  // for the turn's end and leave together.
  now += 60_000;
  storeCalls.length = 0;
  writes = 0;
  let atTurnEnd: [number[], number] | undefined;
  setImmediate(() => (atTurnEnd = [[...storeCalls], writes]));
  const lone = limiter.doLimit('d', [tb], [1]);
  const later: Promise<{ code: string }[]>[] = [];
  await new Promise<void>((done) => {
    const step = () => {
      later.push(limiter.doLimit('d', [tb], [1]));
      if (later.length < 3) process.nextTick(step);
      else done();
    };
    process.nextTick(step);
  });
  await Promise.all([lone, ...later]);
  proto.write = write;
  proto._writev = writev;
  t.same(atTurnEnd, [[1], 1], 'the lone call reached the store and Redis before the turn ended');
  t.same(storeCalls, [1, 3], 'the three calls that came while it was in flight went in one store call');
  t.equal(writes, 2, 'and in one socket write');
});

t.test('REDIS_PERSECOND: a descriptor whose limits are all per second is counted there', async (t) => {
  const [main, perSecond] = await Promise.all([startRedis(), startRedis()]);
  t.teardown(() => Promise.all([main.stop(), perSecond.stop()]));
  const store = new RedisCounterStore({
    settings: redisSettings({ REDIS_URL: main.url }),
    tlsFiles: noTls,
    perSecond: { settings: redisSettings({ REDIS_URL: perSecond.url }), tlsFiles: noTls },
  });
  await store.start(10_000);
  t.teardown(() => store.close());
  const c = loadConfig([
    {
      name: 'ps.yaml',
      yaml: `domain: ps
descriptors:
  - key: s
    rate_limit: { unit: second, requests_per_unit: 5, algorithm: sliding_window }
  - key: m
    rate_limits: [{ unit: second, requests_per_unit: 5, algorithm: token_bucket }, { unit: day, requests_per_unit: 9 }]
`,
    },
  ]);
  const limiter = new Limiter({ store, stats: new StatsStore() });
  const s = c.getLimit('ps', { entries: [{ key: 's', value: 'v' }] });
  const m = c.getLimit('ps', { entries: [{ key: 'm', value: 'v' }] });
  const statuses = await limiter.doLimit('ps', [s, m], [1, 1]);
  t.same(
    statuses.map((x) => x.code),
    ['OK', 'OK'],
  );
  t.equal(
    (await perSecond.client().keys('{ps_s_v_}sw:1:*')).length,
    1,
    'the per-second limit: per-second Redis',
  );
  t.equal((await main.client().keys('{ps_s_v_}*')).length, 0);
  t.equal((await main.client().keys('{ps_m_v_}*')).length, 2, 'a mixed list stays on the main Redis');
  t.equal((await perSecond.client().keys('{ps_m_v_}*')).length, 0);
});

t.test(
  'extreme limits stay valid commands (a bucket refilling for 317 years, a year-long window)',
  async (t) => {
    const redis = await startRedis();
    t.teardown(() => redis.stop());
    const store = new RedisCounterStore({
      settings: redisSettings({ REDIS_URL: redis.url }),
      tlsFiles: noTls,
    });
    await store.start(10_000);
    t.teardown(() => store.close());
    const c = loadConfig([
      {
        name: 'x.yaml',
        yaml: `domain: x
descriptors:
  - key: b
    rate_limit: { unit: year, requests_per_unit: 1, algorithm: token_bucket, burst: 317 }
  - key: s
    rate_limit: { unit: year, requests_per_unit: 4294967295, algorithm: sliding_window }
`,
      },
    ]);
    const limiter = new Limiter({ store, stats: new StatsStore() });
    const b = c.getLimit('x', { entries: [{ key: 'b', value: 'v' }] });
    const s = c.getLimit('x', { entries: [{ key: 's', value: 'v' }] });
    const r = await limiter.doLimit('x', [b, s], [317, 4294967295]);
    t.same(
      r.map((x) => x.code),
      ['OK', 'OK'],
    );
    t.ok((await redis.client().pttl('{x_b_v_}tb:31536000')) > 0, 'the bucket key has a finite TTL');
    t.equal(
      r[0]!.durationUntilReset?.seconds,
      317 * 31_536_000,
      'reset: the whole refill, not an overflowed integer',
    );
  },
);
