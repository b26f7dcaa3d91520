// Figures for "Redis down", on a real redis-server: `npx tsx bench/micro/redis-down.ts [runs]`.
//  1. time from SIGSTOP to the circuit opening, under a fixed load (in-process decisions at RATE/s);
//  2. service time per decision while the circuit is open (p50/p99/max, measured around
//     RateLimitService.shouldRateLimit, so without gRPC or the load generator), in `local` mode;
//  3. time from SIGCONT until a decision is counted by Redis again;
//  4. `local` mode over-admission across 3 service instances (limit / 3 each), with requests sent to a
//     random instance each, against the configured limit.
// Prints one JSON line per run and a markdown table of the medians.
import { startRedis } from '../../harness/redis/index.js';
import { startTestApp, descriptor, type TestApp } from '../../ratelimit/test-support.js';
import type { CircuitBreakerStore } from '../../ratelimit/counting/index.js';

const RATE = 1000; // decisions per second during the outage
const REDIS_TIMEOUT = '200ms';
const LIMIT = 300;
const CONFIG = `
domain: down
descriptors:
  - key: k
    rate_limit: { unit: minute, requests_per_unit: ${LIMIT} }
`;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function pct(v: number[], q: number): number {
  const s = [...v].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(s.length * q))];
}

function env(url: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    BACKEND_TYPE: 'redis',
    REDIS_SOCKET_TYPE: 'tcp',
    REDIS_URL: url,
    REDIS_TIMEOUT,
    CACHE_FAILURE_MODE: 'local',
    CACHE_KEY_PREFIX: `down${Date.now()}_`,
    ...extra,
  };
}

function state(svc: TestApp): string {
  return (svc.app.store as CircuitBreakerStore).states().REDIS ?? 'none';
}

/** Decisions at RATE/s on 50 keys until stop(); each one's service time is recorded. */
function fixedLoad(svc: TestApp) {
  const samples: { at: number; ms: number }[] = [];
  let i = 0;
  const perTick = RATE / 100;
  const timer = setInterval(() => {
    for (let j = 0; j < perTick; j++) {
      const at = performance.now();
      const req = { domain: 'down', descriptors: [descriptor(['k', `v${i++ % 50}`])] };
      svc.app.service.shouldRateLimit(req).then(
        () => samples.push({ at, ms: performance.now() - at }),
        () => samples.push({ at, ms: performance.now() - at }),
      );
    }
  }, 10);
  return { samples, stop: () => clearInterval(timer) };
}

async function oneRun() {
  const redis = await startRedis();
  const svc = await startTestApp({ files: { 'down.yaml': CONFIG }, env: env(redis.url) });
  try {
    const load = fixedLoad(svc);
    await sleep(1500);
    process.kill(redis.pid, 'SIGSTOP');
    const stoppedAt = performance.now();
    while (state(svc) === 'closed') await sleep(1);
    const openedAt = performance.now();
    await sleep(100);
    const cpuFrom = process.cpuUsage();
    const countFrom = load.samples.length;
    await sleep(3000);
    const cpu = process.cpuUsage(cpuFrom);
    const cpuPerDecisionUs = (cpu.user + cpu.system) / (load.samples.length - countFrom);
    const open = load.samples.filter((s) => s.at > openedAt + 100).map((s) => s.ms);
    process.kill(redis.pid, 'SIGCONT');
    const contAt = performance.now();
    let backMs = -1;
    for (let n = 0; n < 2000; n++) {
      const r = await svc.app.service.shouldRateLimit({
        domain: 'down',
        descriptors: [descriptor(['k', `back${n}`])],
      });
      if (r.dynamicMetadata === undefined) {
        backMs = performance.now() - contAt;
        break;
      }
      await sleep(5);
    }
    load.stop();
    await sleep(300);
    return {
      openMs: Math.round(openedAt - stoppedAt),
      openDecisions: open.length,
      openP50Us: Math.round(pct(open, 0.5) * 1000),
      openP99Us: Math.round(pct(open, 0.99) * 1000),
      openMaxUs: Math.round(Math.max(...open) * 1000),
      cpuPerDecisionUs: Math.round(cpuPerDecisionUs),
      backMs: Math.round(backMs),
    };
  } finally {
    await svc.close();
    await redis.stop();
  }
}

async function fleetRun() {
  const redis = await startRedis();
  const pods: TestApp[] = [];
  try {
    for (let i = 0; i < 3; i++) {
      pods.push(
        await startTestApp({
          files: { 'down.yaml': CONFIG },
          env: env(redis.url, { CACHE_FAILURE_MODE_LOCAL_PODS: '3' }),
        }),
      );
    }
    // A counter half used in Redis before the outage: the pods do not know that count.
    const half = `half${Date.now()}`;
    for (let i = 0; i < LIMIT / 2; i++) {
      await pods[i % 3].app.service.shouldRateLimit({
        domain: 'down',
        descriptors: [descriptor(['k', half])],
      });
    }
    await redis.kill();
    // Open every circuit first.
    for (const p of pods) {
      while (state(p) !== 'open' && state(p) !== 'half_open') {
        await p.app.service.shouldRateLimit({ domain: 'down', descriptors: [descriptor(['k', 'trip'])] });
        await sleep(5);
      }
    }
    const value = `fleet${Date.now()}`;
    let admitted = 0;
    const requests = LIMIT * 3;
    for (let i = 0; i < requests; i++) {
      const p = pods[Math.floor(Math.random() * pods.length)];
      const r = await p.app.service.shouldRateLimit({
        domain: 'down',
        descriptors: [descriptor(['k', value])],
      });
      if (r.overallCode === 'OK') admitted++;
    }
    let admittedAfterHalf = LIMIT / 2;
    for (let i = 0; i < requests; i++) {
      const p = pods[Math.floor(Math.random() * pods.length)];
      const r = await p.app.service.shouldRateLimit({
        domain: 'down',
        descriptors: [descriptor(['k', half])],
      });
      if (r.overallCode === 'OK') admittedAfterHalf++;
    }
    return {
      limit: LIMIT,
      requests,
      admitted,
      ratio: Number((admitted / LIMIT).toFixed(3)),
      admittedInWindowHalfUsedBefore: admittedAfterHalf,
    };
  } finally {
    for (const p of pods) await p.close();
    await redis.stop();
  }
}

/**
 * `--overhead`: CPU per decision with Redis up, circuit breaker on vs off (a pass-through), in
 * interleaved rounds of 20 000 in-process decisions, 16 in flight, 50 keys.
 */
async function overhead(rounds: number) {
  const redis = await startRedis();
  const on = await startTestApp({ files: { 'down.yaml': CONFIG }, env: env(redis.url) });
  const off = await startTestApp({
    files: { 'down.yaml': CONFIG },
    env: env(redis.url, { REDIS_CIRCUIT_BREAKER_ENABLED: 'false' }),
  });
  const cpuPer = async (svc: TestApp) => {
    let next = 0;
    const n = 20_000;
    const from = process.cpuUsage();
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next < n) {
          const i = next++;
          await svc.app.service.shouldRateLimit({
            domain: 'down',
            descriptors: [descriptor(['k', `o${i % 50}`])],
          });
        }
      }),
    );
    const c = process.cpuUsage(from);
    return (c.user + c.system) / n;
  };
  const a: number[] = [];
  const b: number[] = [];
  try {
    for (let r = 0; r < rounds; r++) {
      a.push(await cpuPer(on));
      b.push(await cpuPer(off));
    }
  } finally {
    await on.close();
    await off.close();
    await redis.stop();
  }
  console.log(
    JSON.stringify({
      breakerOnUs: a.map(Math.round),
      breakerOffUs: b.map(Math.round),
      medianOnUs: Math.round(pct(a, 0.5)),
      medianOffUs: Math.round(pct(b, 0.5)),
    }),
  );
}

async function main() {
  if (process.argv[2] === '--overhead') return overhead(Number(process.argv[3] ?? 5));
  const runs = Number(process.argv[2] ?? 3);
  const results: ({ run: number } & Awaited<ReturnType<typeof oneRun>> & {
      fleet: Awaited<ReturnType<typeof fleetRun>>;
    })[] = [];
  for (let r = 0; r < runs; r++) {
    const single = await oneRun();
    const fleet = await fleetRun();
    const line = { run: r + 1, ...single, fleet };
    console.log(JSON.stringify(line));
    results.push(line);
  }
  const med = (f: (x: (typeof results)[number]) => number) => pct(results.map(f), 0.5);
  console.log(`
| figure (median of ${runs} runs; REDIS_TIMEOUT=${REDIS_TIMEOUT}, ${RATE} decisions/s, 5 failures) | value |
|---|---|
| SIGSTOP → circuit open | ${med((x) => x.openMs)} ms |
| service time per decision while open, p50 / p99 | ${med((x) => x.openP50Us)} / ${med((x) => x.openP99Us)} µs |
| process CPU per decision while open (everything: decisions, load loop, timers) | ${med((x) => x.cpuPerDecisionUs)} µs |
| SIGCONT → first decision counted by Redis | ${med((x) => x.backMs)} ms |
| local mode, 3 instances, random spread: admitted / limit (fresh window) | ${med((x) => x.fleet.admitted)} / ${LIMIT} (${med((x) => x.fleet.ratio)}x) |
| same, window half used in Redis before the outage: admitted in that window | ${med((x) => x.fleet.admittedInWindowHalfUsedBefore)} / ${LIMIT} |`);
}

void main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
