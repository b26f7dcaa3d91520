// Accuracy, measured: for each algorithm, the worst-case over-admission against an exact sliding log
// (the most hits admitted in any interval of one unit, divided by requests_per_unit), under bounded
// synthetic loads that cross window boundaries. The figures printed here are the README's table
// (run: npx tap ratelimit/limiter/accuracy.test.ts, and read the "accuracy" comments).
// Decided through the real limiter on the memory backend (the same computation as the Redis
// script, whose agreement is tested in ratelimit/redis/limit-script.integration.test.ts).
import t from 'tap';
import { loadConfig } from '../config/index.js';
import { MemoryCounterStore } from '../memory/index.js';
import { StatsStore } from '../stats/index.js';
import { Limiter } from './limiter.js';

const L = 100;
const P = 60_000;
const CONFIG = `
domain: d
descriptors:
  - key: fixed_window
    rate_limit: { unit: minute, requests_per_unit: ${L} }
  - key: sliding_window
    rate_limit: { unit: minute, requests_per_unit: ${L}, algorithm: sliding_window }
  - key: token_bucket_burst_1
    rate_limit: { unit: minute, requests_per_unit: ${L}, algorithm: token_bucket, burst: 1 }
  - key: token_bucket_burst_10
    rate_limit: { unit: minute, requests_per_unit: ${L}, algorithm: token_bucket, burst: 10 }
  - key: token_bucket_default_burst
    rate_limit: { unit: minute, requests_per_unit: ${L}, algorithm: token_bucket }
`;
const config = loadConfig([{ name: 'c', yaml: CONFIG }]);
const START = 1_700_000_040_000; // a minute boundary

/** Attempt times (ms) of one load; one hit each. Bounded: 20 windows. */
type Load = (rnd: () => number) => number[];

const LOADS: Record<string, Load> = {
  // Greedy client: tries every 10 ms for 20 windows (6x the limit).
  greedy: () => Array.from({ length: (20 * P) / 10 }, (_, i) => START + i * 10),
  // The fixed-window attack: idle, then tries every 5 ms for the last and first 3 s of each window.
  'edge bursts': () => {
    const out: number[] = [];
    for (let w = 1; w < 20; w++) for (let d = -3000; d < 3000; d += 5) out.push(START + w * P + d);
    return out;
  },
  // Idle most of each window, greedy in its last quarter and then through the next half.
  'late then greedy': () => {
    const out: number[] = [];
    for (let w = 0; w < 20; w += 2) for (let d = 0.75 * P; d < 1.5 * P; d += 10) out.push(START + w * P + d);
    return out;
  },
  // The sliding window's adversary: a burst in the last 200 ms of a window (the estimate later
  // assumes those hits were spread evenly), then tries every 10 ms through the next window.
  'end burst then steady': () => {
    const out: number[] = [];
    for (let w = 1; w < 20; w += 2) {
      for (let d = -200; d < 0; d += 1) out.push(START + w * P + d);
      for (let d = 0; d < P; d += 10) out.push(START + w * P + d);
    }
    return out;
  },
  // Random bursts: 400 bursts of 1-60 attempts 2 ms apart at uniformly random times.
  'random bursts': (rnd) => {
    const out: number[] = [];
    for (let b = 0; b < 400; b++) {
      const at = START + Math.floor(rnd() * 20 * P);
      const n = 1 + Math.floor(rnd() * 60);
      for (let i = 0; i < n; i++) out.push(at + i * 2);
    }
    return out.sort((a, b) => a - b);
  },
};

/** The most admitted hits in any interval [x, x + span): two pointers over the sorted admission log. */
function worstWindow(admitted: number[], span = P): number {
  let best = 0;
  let lo = 0;
  for (let hi = 0; hi < admitted.length; hi++) {
    while (admitted[hi]! - admitted[lo]! >= span) lo++;
    best = Math.max(best, hi - lo + 1);
  }
  return best;
}

async function admittedTimes(key: string, times: number[]): Promise<number[]> {
  let now = 0;
  const store = new MemoryCounterStore(() => now);
  const limiter = new Limiter({
    store,
    stats: new StatsStore(),
    nowMs: () => now,
    nowSeconds: () => Math.floor(now / 1000),
  });
  const match = config.getLimit('d', { entries: [{ key, value: 'v' }] });
  const out: number[] = [];
  for (const at of times) {
    now = at;
    const [s] = await limiter.doLimit('d', [match], [1]);
    if (s!.code === 'OK') out.push(at);
  }
  await store.close();
  return out;
}

t.test('worst-case admitted hits in any one-unit interval, per algorithm and load', async (t) => {
  let x = 42;
  const rnd = () => (x = (x * 1103515245 + 12345) % 2147483648) / 2147483648;
  const loads = Object.entries(LOADS).map(([name, load]) => [name, load(rnd)] as const);
  const worst: Record<string, number> = {};
  /** Worst in any 6 s interval (a tenth of the unit), against the 10 hits a smooth limit allows. */
  const worstShort: Record<string, number> = {};
  const rows: string[] = [];
  for (const key of [
    'fixed_window',
    'sliding_window',
    'token_bucket_burst_1',
    'token_bucket_burst_10',
    'token_bucket_default_burst',
  ]) {
    const cells: string[] = [];
    for (const [name, times] of loads) {
      const admitted = await admittedTimes(key, times);
      const w = worstWindow(admitted);
      worst[key] = Math.max(worst[key] ?? 0, w);
      worstShort[key] = Math.max(worstShort[key] ?? 0, worstWindow(admitted, P / 10));
      cells.push(`${name} ${(w / L).toFixed(2)}`);
    }
    rows.push(
      `accuracy ${key}: worst ${(worst[key]! / L).toFixed(2)}x (${cells.join(', ')}); ` +
        `worst in any 6 s: ${worstShort[key]} hits`,
    );
  }
  for (const r of rows) t.comment(r);

  t.ok(worst.fixed_window! > 1.9 * L, 'the load does cross boundaries: fixed windows admit ~2x there');
  t.ok(worst.fixed_window! <= 2 * L, 'fixed windows never exceed 2x');
  // The weighted estimate assumes the previous window's hits were spread evenly: a burst at its very
  // end followed by a steady stream approaches 2x over one unit, but never in a short interval.
  t.ok(worst.sliding_window! < 2 * L, `sliding window below 2x (${worst.sliding_window})`);
  t.ok(
    worstShort.sliding_window! <= L + L / 10 + 1,
    `sliding window: no boundary spike (${worstShort.sliding_window})`,
  );
  t.ok(worstShort.fixed_window! > 1.9 * L, 'while fixed windows admit ~2x within seconds at a boundary');
  t.equal(worst.token_bucket_burst_1, L, 'GCRA with burst 1: exactly the limit in any unit-long interval');
  t.ok(worst.token_bucket_burst_10! <= L + 10, 'GCRA with burst B: at most the limit plus B');
  t.ok(worst.token_bucket_default_burst! <= 2 * L, 'GCRA with burst = limit: at most 2x');
});
