// Write-behind counting (CACHE_WRITE_BEHIND_ENABLED) on a real redis-server: two service instances
// on one Redis (over-admission measured against the documented bound, counts converge, fewer Redis
// commands than decisions), window rollover, Redis killed mid-flight (no crash, no hang, the failure
// mode applies), and shutdown sending the pending hits.
import t from 'tap';
import { redisInfo, respCommand, startRedis, type RedisServer } from '../harness/redis/index.js';
import { loadConfig } from './config/index.js';
import { Limiter } from './limiter/index.js';
import { CoalescingCounterStore, WriteBehindCounterStore, CircuitBreakerStore } from './counting/index.js';
import { RedisCounterStore } from './redis/index.js';
import { loadSettings } from './settings/index.js';
import { StatsStore } from './stats/index.js';
import { descriptor, eventually, roomInWindow, startTestApp, type TestApp } from './test-support.js';

const LIMIT = 1000;
const INTERVAL_MS = 100;
const CONFIG = `
domain: wb
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: ${LIMIT} }
  - key: small
    rate_limit: { unit: hour, requests_per_unit: 3 }
  - key: day
    rate_limit: { unit: day, requests_per_unit: 1000000 }
`;

function env(redis: RedisServer, extra: Record<string, string> = {}): Record<string, string> {
  return {
    BACKEND_TYPE: 'redis',
    REDIS_SOCKET_TYPE: 'tcp',
    REDIS_URL: redis.url,
    CACHE_WRITE_BEHIND_ENABLED: 'true',
    CACHE_WRITE_BEHIND_INTERVAL: `${INTERVAL_MS}ms`,
    ...extra,
  };
}

function windowKey(domain: string, key: string, value: string, unitSeconds: number): string {
  const now = Math.floor(Date.now() / 1000);
  return `${domain}_${key}_${value}_${now - (now % unitSeconds)}`;
}

async function redisCount(redis: RedisServer, key: string): Promise<number> {
  return Number((await respCommand({ port: redis.port }, 'GET', key)) ?? 0);
}

async function incrbyCalls(redis: RedisServer): Promise<number> {
  const info = await redisInfo({ port: redis.port }, 'commandstats');
  return Number(/calls=(\d+)/.exec(info.cmdstat_incrby ?? '')?.[1] ?? 0);
}

/** The most of `times` (sorted ms) inside any span of `spanMs`. */
function mostWithin(times: number[], spanMs: number): number {
  let best = 0;
  for (let i = 0, j = 0; i < times.length; i++) {
    while (times[i] - times[j] > spanMs) j++;
    best = Math.max(best, i - j + 1);
  }
  return best;
}

t.test(
  'two instances on one Redis: over-admission within the bound, counts converge, < 0.5 INCRBY per decision',
  async (t) => {
    const redis = await startRedis();
    t.teardown(() => redis.stop());
    const pods: TestApp[] = [];
    t.teardown(() => Promise.all(pods.map((p) => p.close())));
    for (let i = 0; i < 2; i++)
      pods.push(await startTestApp({ env: env(redis), files: { 'wb.yaml': CONFIG } }));
    await roomInWindow(60, 20_000);

    const perPod = (LIMIT * 3) / 2; // about 3x the limit in total
    const times: number[][] = [[], []];
    let admitted = 0;
    const start = performance.now();
    // 8 calls in flight per pod, as fast as the machine answers (a few hundred per second here): the
    // traffic of one interval stays well under the limit, so the bound checked is the timing one.
    await Promise.all(
      pods.map(async (pod, p) => {
        for (let sent = 0; sent < perPod; sent += 8) {
          const batch = Array.from({ length: 8 }, () => {
            times[p].push(performance.now() - start);
            return pod.call({ domain: 'wb', descriptors: [descriptor(['user', 'u1'])] });
          });
          for (const r of await Promise.all(batch)) if (r.overallCode === 'OK') admitted++;
        }
      }),
    );
    const elapsed = performance.now() - start;
    const total = times[0].length + times[1].length;
    const incrby = await incrbyCalls(redis);
    // The bound (README): each pod's hits decided in one interval plus a flush's round trip, summed over
    // the pods, and never more than (pods - 1) x limit. A loaded machine gets 1 s of slack for the trip.
    const span = INTERVAL_MS + 1000;
    const bound = Math.min(LIMIT, mostWithin(times[0], span) + mostWithin(times[1], span));
    const over = admitted - LIMIT;
    t.comment(
      `write-behind, 2 pods, limit ${LIMIT}/min, interval ${INTERVAL_MS} ms: ${total} calls in ${Math.round(elapsed)} ms, ` +
        `admitted ${admitted} (over-admission ${over} = ${((100 * over) / LIMIT).toFixed(1)}% of the limit; bound ${bound}), ` +
        `${incrby} INCRBY (${(incrby / total).toFixed(3)} per decision)`,
    );
    t.ok(admitted >= LIMIT, `never fewer than the limit admitted (${admitted})`);
    t.ok(over <= bound, `over-admission ${over} within the bound ${bound}`);
    t.ok(incrby / total < 0.5, `INCRBY per decision ${(incrby / total).toFixed(3)} < 0.5`);

    const key = windowKey('wb', 'user', 'u1', 60);
    await Promise.all(pods.map((p) => p.app.writeBehind!.flush()));
    t.equal(await redisCount(redis, key), total, 'after a flush Redis holds every hit, exactly once');
  },
);

t.test(
  'window rollover: the new window starts from a synchronous count, the old one is still flushed',
  async (t) => {
    const redis = await startRedis();
    t.teardown(() => redis.stop());
    const s = loadSettings({ REDIS_SOCKET_TYPE: 'tcp', REDIS_URL: redis.url });
    const base = new CircuitBreakerStore(
      new RedisCounterStore({ settings: s.redis.main, tlsFiles: s.redis.tlsFiles }),
      s.redis.circuitBreaker,
    );
    await base.start();
    let clockMs = 1_000_000;
    const wb = new WriteBehindCounterStore(
      new CoalescingCounterStore(base),
      { intervalMs: 60_000, maxKeys: 100, maxBytes: 1 << 24 },
      undefined,
      () => clockMs,
    );
    t.teardown(() => wb.close());
    const W1 = 1_800_000_000 - (1_800_000_000 % 3600); // an hour boundary
    let now = W1 + 100;
    const limiter = new Limiter({
      store: wb,
      stats: new StatsStore(),
      expirationJitterMaxSeconds: 0,
      nowSeconds: () => now,
    });
    const match = loadConfig([{ name: 'c', yaml: CONFIG }]).getLimit('wb', descriptor(['small', 'x']));
    const codes: string[] = [];
    for (let i = 0; i < 5; i++) codes.push((await limiter.doLimit('wb', [match], [1]))[0].code);
    t.same(codes, ['OK', 'OK', 'OK', 'OVER_LIMIT', 'OVER_LIMIT'], 'decided locally, exactly (one pod)');
    t.equal(await redisCount(redis, `wb_small_x_${W1}`), 1, 'only the first hit reached Redis');

    now = W1 + 3600 + 5; // the next window
    const [s2] = await limiter.doLimit('wb', [match], [1]);
    t.equal(s2.code, 'OK');
    t.equal(s2.limitRemaining, 2, 'a fresh window');
    t.equal(await redisCount(redis, `wb_small_x_${W1 + 3600}`), 1, 'its first hit counted synchronously');
    await limiter.doLimit('wb', [match], [1]);
    t.equal(await redisCount(redis, `wb_small_x_${W1 + 3600}`), 1, 'the next one decided locally');
    await wb.flush();
    t.equal(await redisCount(redis, `wb_small_x_${W1}`), 5, 'the old window got its pending hits');
    t.equal(await redisCount(redis, `wb_small_x_${W1 + 3600}`), 2);
    const ttl = Number(await respCommand({ port: redis.port }, 'TTL', `wb_small_x_${W1}`));
    t.ok(ttl > 0 && ttl <= 3600, `the flushed key expires (ttl ${ttl})`);
    clockMs += 120_000 + 1;
    await limiter.doLimit('wb', [match], [1]);
    await wb.flush();
    t.equal(wb.size, 1, 'the ended window’s entry is dropped once idle (two intervals)');
  },
);

t.test(
  'Redis killed mid-flight: no crash, no hang, the failure mode decides, counting resumes',
  async (t) => {
    const redis = await startRedis();
    t.teardown(() => redis.stop());
    const pod = await startTestApp({
      env: env(redis, {
        CACHE_FAILURE_MODE: 'deny',
        REDIS_TIMEOUT: '300ms',
        REDIS_CIRCUIT_BREAKER_FAILURES: '2',
        REDIS_CIRCUIT_BREAKER_PROBE_INTERVAL: '100ms',
      }),
      files: { 'wb.yaml': CONFIG },
    });
    t.teardown(() => pod.close());
    const call = async () => {
      const at = performance.now();
      const r = await pod.call({ domain: 'wb', descriptors: [descriptor(['day', 'd'])] });
      return { r, ms: performance.now() - at };
    };
    for (let i = 0; i < 20; i++) t.equal((await call()).r.overallCode, 'OK');
    const wb = pod.app.writeBehind!;
    t.ok(wb.counters.local >= 19, 'decided locally before the kill');

    await redis.kill();
    // Every call answers (within REDIS_TIMEOUT and the interval), and soon from the failure mode.
    let denied = 0;
    let slowest = 0;
    await eventually(
      async () => {
        const { r, ms } = await call();
        slowest = Math.max(slowest, ms);
        if (r.overallCode === 'OVER_LIMIT' && r.dynamicMetadata !== undefined) denied++;
        return denied >= 5;
      },
      15_000,
      'decisions from the failure mode (deny)',
    );
    t.ok(slowest < 5000, `no call hung (slowest ${Math.round(slowest)} ms)`);
    t.ok(wb.counters.fallbacks >= 1, 'write-behind fell back to synchronous counting');
    t.ok(
      wb.counters.droppedHits >= 1,
      `the unsent hits were dropped and counted (${wb.counters.droppedHits})`,
    );

    await redis.restart();
    await eventually(
      async () => (await call()).r.dynamicMetadata === undefined,
      15_000,
      'counted in Redis again',
    );
    const localBefore = wb.counters.local;
    await call();
    await call();
    t.ok(wb.counters.local > localBefore, 'and decided locally again');
  },
);

t.test('shutdown sends the pending hits before closing Redis', async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const pod = await startTestApp({
    env: env(redis, { CACHE_WRITE_BEHIND_INTERVAL: '1m' }),
    files: { 'wb.yaml': CONFIG },
  });
  for (let i = 0; i < 10; i++) await pod.call({ domain: 'wb', descriptors: [descriptor(['day', 'z'])] });
  const key = windowKey('wb', 'day', 'z', 86400);
  t.equal(await redisCount(redis, key), 1, 'nine hits pending (interval 1m)');
  await pod.close();
  t.equal(await redisCount(redis, key), 10, 'close() flushed them');
});

t.test('off by default: every hit is counted in Redis at once', async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const pod = await startTestApp({
    env: { BACKEND_TYPE: 'redis', REDIS_SOCKET_TYPE: 'tcp', REDIS_URL: redis.url },
    files: { 'wb.yaml': CONFIG },
  });
  t.teardown(() => pod.close());
  t.equal(pod.app.writeBehind, undefined);
  for (let i = 0; i < 3; i++) await pod.call({ domain: 'wb', descriptors: [descriptor(['day', 'off'])] });
  t.equal(await redisCount(redis, windowKey('wb', 'day', 'off', 86400)), 3);
});
