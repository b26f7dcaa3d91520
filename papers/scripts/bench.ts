// Benchmark of the exact index: 60,000 papers x 768 dimensions (and the 2-D points): the int8 first pass with exact
// re-rank (what the service runs for nD) vs the full float32 scan it must equal vs the naive scan (arrays of
// numbers, norms recomputed per row, full sort). Interleaved runs, medians.
//
//   npx tsx papers/scripts/bench.ts [--n 60000] [--dim 768] [--runs 15] [--random 1]
// --random 1: unclustered Gaussian rows and queries (the int8 bound's hardest common case) instead of 50 clusters.
import { Int8Index } from '../int8.js';
import { ExactIndex, naiveSearch } from '../knn.js';
import { rng } from '../text.js';
import { cpus, loadavg } from 'node:os';

const arg = (name: string, dflt: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
};
const n = arg('n', 60_000);
const dim = arg('dim', 768);
const runs = arg('runs', 15);
const random = arg('random', 0) === 1;
const k = 10;

const r = rng(1);
const gauss = () => Math.sqrt(-2 * Math.log(r() || 1e-12)) * Math.cos(2 * Math.PI * r());
// 50 clusters, so neighbours are meaningful.
const centres = Array.from({ length: 50 }, () => Array.from({ length: dim }, gauss));
const rows = random
  ? Array.from({ length: n }, () => Array.from({ length: dim }, gauss))
  : Array.from({ length: n }, (_, i) => centres[i % 50].map((c) => c + 0.5 * gauss()));
const flat = rows.map((v) => [v[0], v[1]]);
const queries = random
  ? Array.from({ length: runs }, () => Array.from({ length: dim }, gauss))
  : Array.from({ length: runs }, (_, i) => rows[(i * 7919) % n]);

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const time = (f: () => void) => {
  const t0 = process.hrtime.bigint();
  f();
  return Number(process.hrtime.bigint() - t0) / 1e6;
};

let index!: ExactIndex;
const build = time(() => (index = new ExactIndex(rows, dim, 'cosine')));
let int8!: Int8Index;
const build8 = time(() => (int8 = new Int8Index(index)));
const flatIndex = new ExactIndex(flat, 2, 'euclidean');
index.search(queries[0], k); // warm up
int8.search(queries[0], k);
flatIndex.search(flat[0], k);
naiveSearch(rows, queries[0], k, 'cosine');
// Interleaved, so load from other processes on a shared machine hits both alike.
const q8: number[] = [];
const q8Excl: number[] = [];
const cands: number[] = [];
const fast: number[] = [];
const fastExcl: number[] = [];
const naive: number[] = [];
const fast2d: number[] = [];
const naive2d: number[] = [];
queries.forEach((q, i) => {
  const p = flat[(i * 7919) % n];
  q8.push(time(() => int8.search(q, k)));
  cands.push(int8.lastCandidates);
  fast.push(time(() => index.search(q, k)));
  q8Excl.push(time(() => int8.search(q, k, new Set([0, 1, 2]))));
  naive.push(time(() => naiveSearch(rows, q, k, 'cosine')));
  fastExcl.push(time(() => index.search(q, k, new Set([0, 1, 2]))));
  fast2d.push(time(() => flatIndex.search(p, k)));
  naive2d.push(time(() => naiveSearch(flat, p, k, 'euclidean')));
});
const naiveRuns = runs;

// Same answers: int8 + re-rank equals the full scan exactly (every query), and the naive scan's ranking.
queries.forEach((q) => {
  const x = JSON.stringify(int8.search(q, k));
  const y = JSON.stringify(index.search(q, k));
  if (x !== y) throw new Error(`int8 and full scan disagree: ${x} vs ${y}`);
});
const a = index.search(queries[1], k).map((h) => h.index);
const b = naiveSearch(rows, queries[1], k, 'cosine').map((h) => h.index);
if (a.join() !== b.join()) throw new Error(`index and naive disagree: ${a} vs ${b}`);

const f = (x: number) => x.toFixed(1);
console.log(
  `papers=${n} dim=${dim} k=${k} data=${random ? 'random' : '50 clusters'} node=${process.version}`,
);
console.log(
  `load average at the end: ${loadavg()
    .map((x) => x.toFixed(2))
    .join(' ')} (${cpus().length} cores)`,
);
console.log(`index build: ${f(build)} ms (${((n * dim * 4) / 2 ** 20).toFixed(0)} MiB Float32Array)`);
console.log(
  `int8 first pass build: ${f(build8)} ms (+${(int8.bytes / 2 ** 20).toFixed(1)} MiB: codes, per-row bounds, scratch)`,
);
console.log(
  `nD query, int8 + exact re-rank: median ${f(median(q8))} ms over ${runs} runs (with 3 exclusions: ${f(median(q8Excl))} ms); rows re-scored: median ${median(cands)}, max ${Math.max(...cands)} -> ${f(median(fast) / median(q8))}x faster than the full scan`,
);
console.log(
  `nD query, typed-array scan: median ${f(median(fast))} ms over ${runs} runs (with 3 exclusions: ${f(median(fastExcl))} ms)`,
);
console.log(
  `nD query, naive:            median ${f(median(naive))} ms over ${naiveRuns} runs -> ${f(median(naive) / median(fast))}x slower`,
);
console.log(
  `2D query, typed-array scan: median ${f(median(fast2d))} ms; naive ${f(median(naive2d))} ms -> ${f(median(naive2d) / median(fast2d))}x`,
);
