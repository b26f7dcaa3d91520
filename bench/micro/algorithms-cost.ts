// Cost of the counting algorithms beside the fixed window, measured below the gRPC layer: the real
// limiter and RedisCounterStore against a real redis-server, 10k uniform keys, 64 decisions in
// flight. Per algorithm: decisions per second of this process's CPU (limiter + ioredis), Redis
// commands per decision and Redis CPU per decision (INFO commandstats usec). Rough figures: the
// machine is shared, so compare algorithms within one run, not across runs.
//
//   npx tsx bench/micro/algorithms-cost.ts [decisions per algorithm, default 40000]
import { loadConfig } from '../../ratelimit/config/index.js';
import { Limiter } from '../../ratelimit/limiter/index.js';
import { createRedisBackend } from '../../ratelimit/counter-stack.js';
import { loadSettings } from '../../ratelimit/settings/index.js';
import { StatsStore } from '../../ratelimit/stats/index.js';
import { redisInfo, startRedis } from '../../harness/redis/index.js';

const HUGE = 1_000_000_000;
const config = loadConfig([
  {
    name: 'cost.yaml',
    yaml: `domain: cost
descriptors:
  - key: fixed_window
    rate_limit: { unit: minute, requests_per_unit: ${HUGE} }
  - key: sliding_window
    rate_limit: { unit: minute, requests_per_unit: ${HUGE}, algorithm: sliding_window }
  - key: token_bucket
    rate_limit: { unit: minute, requests_per_unit: ${HUGE}, algorithm: token_bucket }
  - key: two_limits
    rate_limits:
      - { unit: second, requests_per_unit: ${HUGE}, algorithm: token_bucket }
      - { unit: day, requests_per_unit: ${HUGE} }
`,
  },
]);

/** Per command: calls and µs (INFO commandstats). Commands run inside a script are counted too. */
async function commandStats(port: number): Promise<Map<string, { calls: number; usec: number }>> {
  const info = await redisInfo({ port }, 'commandstats');
  const out = new Map<string, { calls: number; usec: number }>();
  for (const [k, v] of Object.entries(info)) {
    if (!k.startsWith('cmdstat_')) continue;
    out.set(k.slice(8), {
      calls: Number(/calls=(\d+)/.exec(v)?.[1] ?? 0),
      usec: Number(/usec=(\d+)/.exec(v)?.[1] ?? 0),
    });
  }
  return out;
}

/**
 * What the client sent and what Redis spent on it: EVALSHA/EVAL (whose µs include the commands the
 * script runs) when the script ran, else INCRBY + EXPIRE.
 */
function delta(
  before: Map<string, { calls: number; usec: number }>,
  after: Map<string, { calls: number; usec: number }>,
): { sent: number; usec: number } {
  const d = (c: string) => ({
    calls: (after.get(c)?.calls ?? 0) - (before.get(c)?.calls ?? 0),
    usec: (after.get(c)?.usec ?? 0) - (before.get(c)?.usec ?? 0),
  });
  const scripted = ['evalsha', 'eval'].map(d);
  const used = scripted[0]!.calls + scripted[1]!.calls > 0 ? scripted : ['incrby', 'expire'].map(d);
  return { sent: used.reduce((a, x) => a + x.calls, 0), usec: used.reduce((a, x) => a + x.usec, 0) };
}

async function main(): Promise<void> {
  const n = Number(process.argv[2] ?? 40_000);
  const redis = await startRedis();
  const store = createRedisBackend(loadSettings({ REDIS_SOCKET_TYPE: 'tcp', REDIS_URL: redis.url }));
  await store.start(10_000);
  const limiter = new Limiter({ store, stats: new StatsStore() });
  const rows: string[] = [];
  try {
    // Every algorithm twice: the first pass warms the process up (JIT of each path, ioredis' script
    // command), which costs the first scripted algorithm measured ~2x; only the second pass is shown.
    const keys = ['fixed_window', 'sliding_window', 'token_bucket', 'two_limits'];
    for (const [round, key] of [...keys, ...keys].entries()) {
      const matches = Array.from({ length: 10_000 }, (_, i) =>
        config.getLimit('cost', { entries: [{ key, value: `u${i}` }] }),
      );
      // Warm-up (script load, JIT), then measure.
      for (let i = 0; i < 2000; i++) await limiter.doLimit('cost', [matches[i % 10_000]], [1]);
      const before = await commandStats(redis.port);
      const cpu = process.cpuUsage();
      let next = 0;
      const worker = async () => {
        while (next < n) {
          const i = next++;
          await limiter.doLimit('cost', [matches[(i * 7919) % 10_000]], [1]);
        }
      };
      await Promise.all(Array.from({ length: 64 }, worker));
      const used = process.cpuUsage(cpu);
      const after = await commandStats(redis.port);
      if (round < keys.length) continue;
      const cpuSeconds = (used.user + used.system) / 1e6;
      const { sent, usec } = delta(before, after);
      rows.push(
        `| ${key} | ${Math.round(n / cpuSeconds)} | ${(sent / n).toFixed(2)} | ${(usec / n).toFixed(2)} |`,
      );
    }
  } finally {
    await store.close();
    await redis.stop();
  }
  console.log(
    '| limit | decisions per core-second (limiter + ioredis) | commands sent per descriptor | Redis µs per decision (EVALSHA, or INCRBY + EXPIRE) |',
  );
  console.log('|---|---|---|---|');
  for (const r of rows) console.log(r);
}

await main();
