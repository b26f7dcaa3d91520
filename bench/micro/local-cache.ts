// Micro-benchmark: the local over-limit cache, the typed-array one (ratelimit/limiter/local-cache.ts)
// against the Map<string, number> it replaced (copied below as the baseline). Each (variant, round)
// runs in a fresh process pinned to one core; rounds interleave the variants; medians are reported.
//
//   npx tsx bench/micro/local-cache.ts [--keys 1000000] [--rounds 5] [--budget 268435456]
//
// Per variant: memory after `keys` over-limit keys shaped as the limiter builds them (has() then
// set(), as a highcard request does), after a full GC: RSS, V8 heap used, array buffers; and
// nanoseconds of CPU per call (key building included; keyOnlyNs is that part) of has() on an empty cache (every request of a workload with no over-limit
// key), has() missing and hitting in the full cache, and set() of a new key.
import { execFileSync } from 'node:child_process';
import { parseArgs } from 'node:util';
import { LocalOverLimitCache } from '../../ratelimit/limiter/local-cache.js';

const { values: args } = parseArgs({
  options: {
    keys: { type: 'string', default: '1000000' },
    rounds: { type: 'string', default: '5' },
    budget: { type: 'string', default: String(256 * 1024 * 1024) },
    variant: { type: 'string' },
    cpu: { type: 'string', default: '0' },
  },
});
const KEYS = Number(args.keys);
const BUDGET = Number(args.budget);

/** The Map-based cache before the typed-array one (kept only as this benchmark's baseline). */
class MapOverLimitCache {
  private readonly entries = new Map<string, number>();
  private bytes = 0;
  constructor(
    readonly maxBytes: number,
    private readonly nowMs: () => number = Date.now,
  ) {}
  get size(): number {
    return this.entries.size;
  }
  has(key: string): boolean {
    const exp = this.entries.get(key);
    if (exp === undefined) return false;
    if (exp <= this.nowMs()) {
      this.delete(key);
      return false;
    }
    return true;
  }
  set(key: string, ttlSeconds: number): void {
    const cost = key.length * 2 + 64;
    if (cost > this.maxBytes) return;
    if (this.entries.has(key)) this.delete(key);
    while (this.bytes + cost > this.maxBytes && this.entries.size > 0) {
      this.delete(this.entries.keys().next().value as string);
    }
    this.entries.set(key, this.nowMs() + ttlSeconds * 1000);
    this.bytes += cost;
  }
  private delete(key: string): void {
    if (this.entries.delete(key)) this.bytes -= key.length * 2 + 64;
  }
}

interface Cache {
  has(key: string): boolean;
  set(key: string, ttlSeconds: number): void;
  readonly size: number;
}

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

function runVariant(variant: string): Record<string, number> {
  const gc = globalThis.gc!;
  const make = (): Cache =>
    variant === 'map' ? new MapOverLimitCache(BUDGET) : new LocalOverLimitCache(BUDGET);
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
  if (cache.size < Math.min(KEYS, 1000)) throw new Error(`${variant}: only ${cache.size} kept`);
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

if (args.variant) {
  process.stdout.write(JSON.stringify(runVariant(args.variant)));
} else {
  const rounds = Number(args.rounds);
  const samples: Record<string, Record<string, number>[]> = { map: [], typed: [] };
  for (let r = 0; r < rounds; r++) {
    for (const variant of ['map', 'typed'] as const) {
      const out = execFileSync(
        'taskset',
        [
          '-c',
          args.cpu!,
          process.execPath,
          '--expose-gc',
          ...process.execArgv,
          process.argv[1],
          '--variant',
          variant,
          '--keys',
          String(KEYS),
          '--budget',
          String(BUDGET),
        ],
        { encoding: 'utf8', maxBuffer: 1 << 20 },
      );
      samples[variant].push(JSON.parse(out) as Record<string, number>);
      process.stderr.write(`round ${r + 1} ${variant}: ${out}\n`);
    }
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const fields = Object.keys(samples.map[0]);
  console.log(
    `| ${KEYS.toLocaleString('en-US')} keys, budget ${BUDGET / MiB} MiB, median of ${rounds} | Map | typed | typed/Map |`,
  );
  console.log('|---|---|---|---|');
  for (const f of fields) {
    const a = median(samples.map.map((s) => s[f]));
    const b = median(samples.typed.map((s) => s[f]));
    console.log(`| ${f} | ${a.toFixed(1)} | ${b.toFixed(1)} | ${(b / a).toFixed(2)} |`);
  }
}
