// Micro-benchmark: the memory and CPU of the local over-limit cache (ratelimit/limiter/local-cache.ts),
// the figures docs/configuration.md quotes for LOCAL_CACHE_SIZE_IN_BYTES (bytes of RSS per key). It stays
// because no other measurement sees the cache alone: the benchmark's RSS phase measures the whole service.
// Each round runs in a fresh process pinned to one core; medians (min–max) of the rounds are reported.
//
//   npx tsx bench/micro/local-cache.ts [--keys 1000000] [--rounds 5] [--budget 268435456]
//
// Memory after `keys` over-limit keys shaped as the limiter builds them (has() then
// set(), as a highcard request does), after a full GC: RSS, V8 heap used, array buffers; and
// nanoseconds of CPU per call (key building included; keyOnlyNs is that part) of has() on an empty cache (every request of a workload with no over-limit
// key), has() missing and hitting in the full cache, and set() of a new key.
import { execFileSync } from 'node:child_process';
import { parseArgs } from 'node:util';
import { LocalOverLimitCache } from '../../ratelimit/limiter/index.js';

const { values: args } = parseArgs({
  options: {
    keys: { type: 'string', default: '1000000' },
    rounds: { type: 'string', default: '5' },
    budget: { type: 'string', default: String(256 * 1024 * 1024) },
    child: { type: 'boolean', default: false },
    cpu: { type: 'string', default: '0' },
  },
});
const KEYS = Number(args.keys);
const BUDGET = Number(args.budget);

// Keys as cacheKey() builds them: concatenated per request, so each is a fresh (cons) string.
const PREFIX = 'bench_highcard';
const entryKey = 'ip';
const WINDOW = '1763942400';
function key(n: number): string {
  let k = PREFIX + '_';
  k += entryKey + '_' + '10.' + n + '_';
  return k + WINDOW;
}

const MiB = 1024 * 1024;
function nsPerCall(calls: number, fn: (i: number) => number): number {
  let sink = 0;
  const c0 = process.cpuUsage();
  for (let i = 0; i < calls; i++) sink += fn(i);
  const c = process.cpuUsage(c0);
  const ns = ((c.user + c.system) * 1000) / calls; // CPU time, not wall clock: the machine is shared
  if (sink === -1) console.log(sink);
  return ns;
}

function runRound(): Record<string, number> {
  const gc = globalThis.gc!;
  const make = () => new LocalOverLimitCache(BUDGET);
  // Building the key alone (in every has/set figure below: subtract it for the cache's own cost).
  nsPerCall(200_000, (i) => key(i).length);
  const keyOnlyNs = nsPerCall(1_000_000, (i) => key(i).length);
  // Hot path on an empty cache (warm-up included).
  const empty = make();
  nsPerCall(200_000, (i) => (empty.has(key(i)) ? 1 : 0));
  const hasEmptyNs = nsPerCall(1_000_000, (i) => (empty.has(key(i)) ? 1 : 0));
  gc();
  const m0 = process.memoryUsage();
  const cache = make();
  const fillNs = nsPerCall(KEYS, (i) => {
    const k = key(i);
    if (!cache.has(k)) cache.set(k, 3600);
    return 0;
  });
  const beforeGc = process.memoryUsage();
  gc();
  const m1 = process.memoryUsage();
  const hasMissNs = nsPerCall(1_000_000, (i) => (cache.has(key(KEYS + i)) ? 1 : 0));
  const hasHitNs = nsPerCall(1_000_000, (i) => (cache.has(key((i * 7919) % KEYS)) ? 1 : 0));
  const setNs = nsPerCall(200_000, (i) => {
    cache.set(key(KEYS * 2 + i), 3600);
    return 0;
  });
  if (cache.size < Math.min(KEYS, 1000)) throw new Error(`only ${cache.size} kept`);
  return {
    rssBeforeMiB: m0.rss / MiB,
    rssAfterMiB: m1.rss / MiB,
    rssPeakMiB: beforeGc.rss / MiB,
    heapUsedMiB: (m1.heapUsed - m0.heapUsed) / MiB,
    heapTotalMiB: m1.heapTotal / MiB,
    arrayBuffersMiB: (m1.arrayBuffers - m0.arrayBuffers) / MiB,
    bytesPerKeyRss: (m1.rss - m0.rss) / KEYS,
    fillNsPerKey: fillNs,
    keyOnlyNs,
    hasEmptyNs,
    hasMissNs,
    hasHitNs,
    setNs,
  };
}

if (args.child) {
  process.stdout.write(JSON.stringify(runRound()));
} else {
  const rounds = Number(args.rounds);
  const samples: Record<string, number>[] = [];
  for (let r = 0; r < rounds; r++) {
    const out = execFileSync(
      'taskset',
      [
        '-c',
        args.cpu!,
        process.execPath,
        '--expose-gc',
        ...process.execArgv,
        process.argv[1],
        '--child',
        '--keys',
        String(KEYS),
        '--budget',
        String(BUDGET),
      ],
      { encoding: 'utf8', maxBuffer: 1 << 20 },
    );
    samples.push(JSON.parse(out) as Record<string, number>);
    process.stderr.write(`round ${r + 1}: ${out}\n`);
  }
  const sorted = (f: string) => samples.map((x) => x[f]).sort((a, b) => a - b);
  console.log(
    `| ${KEYS.toLocaleString('en-US')} keys, budget ${BUDGET / MiB} MiB, ${rounds} rounds | median | min–max |`,
  );
  console.log('|---|---|---|');
  for (const f of Object.keys(samples[0])) {
    const xs = sorted(f);
    const mid = xs[Math.floor(xs.length / 2)];
    console.log(`| ${f} | ${mid.toFixed(1)} | ${xs[0].toFixed(1)}–${xs[xs.length - 1].toFixed(1)} |`);
  }
}
