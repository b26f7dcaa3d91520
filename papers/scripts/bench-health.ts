// How long /health waits while the service answers a burst of concurrent nD queries: searches in the worker
// thread (what the service does) vs in the server thread (the full scan on the event loop, as before). A second
// client polls /health in a loop during each burst; rounds alternate between the two servers.
//
//   npx tsx papers/scripts/bench-health.ts [--n 60000] [--clients 8] [--queries 5] [--rounds 3]
import { cpus, loadavg } from 'node:os';
import { type Paper, Store, normalizeRecords } from '../data.js';
import { GloveVectors } from '../embed.js';
import { startApp } from '../fixtures.js';
import { rng } from '../text.js';

const arg = (name: string, dflt: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
};
const n = arg('n', 60_000);
const clients = arg('clients', 8);
const perClient = arg('queries', 5);
const rounds = arg('rounds', 3);

const r = rng(5);
const g = () => Math.sqrt(-2 * Math.log(r() || 1e-12)) * Math.cos(2 * Math.PI * r());
const centres = Array.from({ length: 50 }, () => Array.from({ length: 768 }, g));
const papers: Paper[] = normalizeRecords(
  Array.from({ length: n }, (_, i) => ({
    ID: `G${i}`,
    Title: `Generated paper ${i}`,
    glove_embedding: Array.from({ length: 100 }, g),
    specter_embedding: centres[i % 50].map((c) => c + 0.5 * g()),
    glove_umap: [g(), g()],
    specter_umap: [g(), g()],
  })),
  () => GloveVectors.load(),
);

const t0 = performance.now();
const workerApp = await startApp({ load: async () => new Store(papers) });
const threadApp = await startApp({ load: async () => new Store(papers), searchWorker: false });
for (const url of [workerApp.url, threadApp.url]) {
  while (((await (await fetch(`${url}/health`)).json()) as { state: string }).state !== 'ready')
    await new Promise((res) => setTimeout(res, 50));
}
console.log(`two stores ready in ${((performance.now() - t0) / 1000).toFixed(1)} s (${n} papers x 768)`);

const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))];

async function burst(url: string) {
  let left = clients;
  const queryMs: number[] = [];
  const work = Array.from({ length: clients }, async (_, c) => {
    for (let j = 0; j < perClient; j++) {
      const s = performance.now();
      const res = await fetch(`${url}/getSimilarPapers`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          input_data: [`G${(c * 7919 + j * 104_729) % n}`],
          input_type: 'ID',
          limit: 10,
          embedding: 'specter',
          dimensions: 'nD',
        }),
      });
      if (res.status !== 200) throw new Error(`query answered ${res.status}`);
      await res.arrayBuffer();
      queryMs.push(performance.now() - s);
    }
    left--;
  });
  const healthMs: number[] = [];
  const started = performance.now();
  while (left > 0) {
    const s = performance.now();
    await (await fetch(`${url}/health`)).arrayBuffer();
    healthMs.push(performance.now() - s);
  }
  await Promise.all(work);
  return { healthMs, queryMs, wall: performance.now() - started };
}

const results = {
  worker: [] as Awaited<ReturnType<typeof burst>>[],
  thread: [] as Awaited<ReturnType<typeof burst>>[],
};
await burst(workerApp.url); // warm up both
await burst(threadApp.url);
for (let i = 0; i < rounds; i++) {
  results.worker.push(await burst(workerApp.url));
  results.thread.push(await burst(threadApp.url));
}
const f = (x: number) => x.toFixed(1);
console.log(
  `${clients} clients x ${perClient} queries (k = 10), ${rounds} rounds each, interleaved; load average ${loadavg()
    .map((x) => x.toFixed(2))
    .join(' ')} (${cpus().length} cores)`,
);
for (const [name, rs] of Object.entries(results)) {
  const h = rs.flatMap((x) => x.healthMs);
  const q = rs.flatMap((x) => x.queryMs);
  console.log(
    `${name.padEnd(6)}: /health polls ${h.length}, median ${f(pct(h, 0.5))} ms, p99 ${f(pct(h, 0.99))} ms, max ${f(Math.max(...h))} ms; query median ${f(pct(q, 0.5))} ms; burst ${f(
      pct(
        rs.map((x) => x.wall),
        0.5,
      ),
    )} ms`,
  );
}
await workerApp.close();
await threadApp.close();
