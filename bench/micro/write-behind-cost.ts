// Write-behind counting (CACHE_WRITE_BEHIND_*) measured below the gRPC layer: the real limiter over
// WriteBehindCounterStore -> CoalescingCounterStore -> CircuitBreakerStore -> RedisCounterStore against a
// real redis-server, stacked by the service's own builder (ratelimit/counter-stack.ts).
//   1. Redis commands per decision on 10k uniform keys (random, 64 decisions in flight), without the mode
//      and with several intervals. Pending hits are flushed before each INFO reading, so every hit the
//      window decided is paid for inside it.
//   2. Over-admission: two stores ("pods", one connection each) on one Redis, one key limited to L per
//      minute, 32 decisions in flight per pod at full speed for 3x L decisions; admitted minus L, beside
//      the bound min((pods - 1) x L, fleet rate x (interval + flush round trip)).
//
//   npx tsx bench/micro/write-behind-cost.ts [seconds per setting, default 15]
import { loadConfig } from '../../ratelimit/config/index.js';
import { Limiter } from '../../ratelimit/limiter/index.js';
import { buildCounterStack } from '../../ratelimit/counter-stack.js';
import { loadSettings } from '../../ratelimit/settings/index.js';
import { StatsStore } from '../../ratelimit/stats/index.js';
import { redisInfo, respCommand, startRedis, type RedisServer } from '../../harness/redis/index.js';

const L = 20_000;
const config = loadConfig([
  {
    name: 'wb.yaml',
    yaml: `domain: wb
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 1000000000 }
  - key: limited
    rate_limit: { unit: minute, requests_per_unit: ${L} }
`,
  },
]);

/**
 * A local decision resolves without I/O: a worker looping on it would starve the event loop (no timer, so
 * no flush, would ever run). In the service every decision arrives from a socket; each worker here waits
 * for the next event-loop turn between decisions to behave the same.
 */
function nextTurn(): Promise<void> {
  return new Promise((r) => setImmediate(r));
}

async function commands(port: number): Promise<number> {
  const info = await redisInfo({ port }, 'commandstats');
  let n = 0;
  for (const c of ['incrby', 'expire', 'get'])
    n += Number(/calls=(\d+)/.exec(info[`cmdstat_${c}`] ?? '')?.[1] ?? 0);
  return n;
}

function chain(redis: RedisServer, intervalMs: number | undefined) {
  const loaded = loadSettings({ REDIS_SOCKET_TYPE: 'tcp', REDIS_URL: redis.url });
  const s = {
    ...loaded,
    coalesceIncrements: true,
    writeBehind: {
      enabled: intervalMs !== undefined,
      intervalMs: intervalMs ?? 1000,
      maxKeys: 100_000,
      maxBytes: 1 << 24,
    },
  };
  const stats = new StatsStore();
  const { base, writeBehind: wb, store } = buildCounterStack(s, { stats });
  return { base, wb, store, limiter: new Limiter({ store, stats }) };
}

async function uniform(redis: RedisServer, intervalMs: number | undefined, seconds: number): Promise<string> {
  const c = chain(redis, intervalMs);
  await c.base.start?.();
  const matches = Array.from({ length: 10_000 }, (_, i) =>
    config.getLimit('wb', { entries: [{ key: 'user', value: `u${i}` }] }),
  );
  let stop = false;
  let decisions = 0;
  const worker = async () => {
    while (!stop) {
      await c.limiter.doLimit('wb', [matches[Math.floor(Math.random() * 10_000)]], [1]);
      decisions++;
      await nextTurn();
    }
  };
  const workers = Array.from({ length: 64 }, worker);
  await new Promise((r) => setTimeout(r, 2000)); // warm-up
  await c.wb?.flush();
  const before = await commands(redis.port);
  const d0 = decisions;
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, seconds * 1000));
  const d1 = decisions;
  const t1 = performance.now();
  await c.wb?.flush();
  const after = await commands(redis.port);
  stop = true;
  await Promise.all(workers);
  await (c.wb ?? c.base).close();
  const n = d1 - d0;
  const rate = n / ((t1 - t0) / 1000);
  const perKey = intervalMs === undefined ? '' : ((rate * intervalMs) / 1000 / 10_000).toFixed(2);
  return `| ${intervalMs === undefined ? 'off' : `${intervalMs} ms`} | ${Math.round(rate)} | ${perKey} | ${((after - before) / n).toFixed(3)} |`;
}

async function overAdmission(redis: RedisServer, intervalMs: number): Promise<string> {
  await respCommand({ port: redis.port }, 'FLUSHALL');
  const pods = [chain(redis, intervalMs), chain(redis, intervalMs)];
  for (const p of pods) await p.base.start?.();
  const match = config.getLimit('wb', { entries: [{ key: 'limited', value: 'x' }] });
  // Stay inside one minute window.
  const left = 60_000 - (Date.now() % 60_000);
  if (left < 25_000) await new Promise((r) => setTimeout(r, left + 50));
  let sent = 0;
  let admitted = 0;
  const t0 = performance.now();
  await Promise.all(
    pods.flatMap((p) =>
      Array.from({ length: 32 }, async () => {
        while (sent < 3 * L) {
          sent++;
          const [s] = await p.limiter.doLimit('wb', [match], [1]);
          if (s.code === 'OK') admitted++;
          await nextTurn();
        }
      }),
    ),
  );
  const seconds = (performance.now() - t0) / 1000;
  for (const p of pods) await p.wb!.close();
  const rate = sent / seconds;
  const bound = Math.min(L, Math.round(rate * (intervalMs / 1000)));
  return `| ${intervalMs} ms | ${Math.round(rate)} | ${admitted} | ${admitted - L} (${((100 * (admitted - L)) / L).toFixed(1)}% of L) | ${bound} (+ a round trip) |`;
}

async function main(): Promise<void> {
  const seconds = Number(process.argv[2] ?? 15);
  const redis = await startRedis({ args: ['--save', '', '--appendonly', 'no'] });
  try {
    console.log(
      '| write-behind interval | decisions/s | hits per key per interval | Redis commands per decision |',
    );
    console.log('|---|---|---|---|');
    for (const interval of [undefined, 1000, 2000, 5000])
      console.log(await uniform(redis, interval, seconds));
    console.log(
      `\n| interval | fleet decisions/s | admitted (L = ${L}) | over-admission | R x interval, capped at (pods - 1) x L |`,
    );
    console.log('|---|---|---|---|---|');
    for (const interval of [100, 1000]) console.log(await overAdmission(redis, interval));
  } finally {
    await redis.stop();
  }
}

await main();
