// Searches run in the worker thread, off the server's event loop: a burst of concurrent queries with /health polled
// beside it, the worker's answers against the in-thread full scan, a dying worker, and a full queue.
import t from 'tap';
import { type Paper, Store, normalizeRecords } from './data.js';
import { GloveVectors } from './embed.js';
import { post, ready, startApp } from './fixtures.js';
import { rng } from './text.js';

/** n generated papers in 20 clusters, with every vector given (nothing computed at load). */
function generatedStore(n: number): Store {
  const r = rng(11);
  const g = () => Math.sqrt(-2 * Math.log(r() || 1e-12)) * Math.cos(2 * Math.PI * r());
  const centres = Array.from({ length: 20 }, () => Array.from({ length: 768 }, g));
  const records = Array.from({ length: n }, (_, i) => ({
    ID: `G${i}`,
    Title: `Generated paper ${i}`,
    Abstract: 'generated',
    glove_embedding: Array.from({ length: 100 }, g),
    specter_embedding: centres[i % 20].map((c) => c + 0.5 * g()),
    glove_umap: [g(), g()],
    specter_umap: [g(), g()],
  }));
  const papers: Paper[] = normalizeRecords(records, () => GloveVectors.load());
  return new Store(papers);
}

const until = async (cond: () => boolean, what: string, ms = 60_000) => {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
};

t.test(
  'a burst of queries runs in the worker; /health answers meanwhile; answers equal the full scan',
  async (t) => {
    const store = generatedStore(6000);
    const svc = await startApp({ load: async () => store });
    t.teardown(svc.close);
    await ready(svc.url);
    await until(() => store.searcher.inWorker, 'the worker');
    t.ok(store.searcher.inWorker, 'searches go to the worker');

    const ids = Array.from({ length: 40 }, (_, i) => `G${(i * 149) % 6000}`);
    let done = 0;
    const burst = ids.map((id, i) =>
      post(`${svc.url}/getSimilarPapers`, {
        input_data: [id],
        input_type: 'ID',
        limit: i % 2 ? 10 : 1000,
        embedding: 'specter',
        dimensions: 'nD',
      }).then((r) => {
        done++;
        return r;
      }),
    );
    // A second client polls /health until the burst is over; its longest wait is reported (not asserted: the
    // machine may be busy), and at least one answer must come while queries are still waiting.
    const health: { ms: number; doneBefore: number }[] = [];
    while (done < ids.length) {
      const t0 = performance.now();
      const h = await fetch(`${svc.url}/health`);
      t.equal(h.status, 200);
      await h.json();
      health.push({ ms: performance.now() - t0, doneBefore: done });
    }
    const answers = await Promise.all(burst);
    t.ok(
      health.some((h) => h.doneBefore < ids.length),
      `/health answered while queries were waiting (${health.length} polls)`,
    );
    t.comment(`longest /health wait during the burst: ${Math.max(...health.map((h) => h.ms)).toFixed(1)} ms`);
    t.equal(store.searcher.counts.worker, ids.length, 'every query answered by the worker');
    t.equal(store.searcher.counts.thread, 0, 'none in the server thread');

    // Same papers, same order, same distances as the in-thread full scan.
    answers.forEach((a, i) => {
      t.equal(a.status, 200);
      const self = store.byId.get(ids[i])!;
      const want = store.index.specter.nD.search(
        store.papers[self].specter_embedding,
        i % 2 ? 10 : 1000,
        new Set([self]),
      );
      const got = a.body.results as { ID: string; distance: number }[];
      if (
        got.length !== want.length ||
        got.some((x, j) => x.ID !== store.papers[want[j].index].ID || x.distance !== want[j].distance)
      )
        t.fail(`query ${i} differs from the full scan`);
    });
    t.pass('all answers equal the full scan');
  },
);

t.test(
  'a dead worker: waiting and later searches are answered in the server thread, then it is started again',
  async (t) => {
    const store = generatedStore(500);
    const svc = await startApp({ load: async () => store });
    t.teardown(svc.close);
    await ready(svc.url);
    await until(() => store.searcher.inWorker, 'the worker');
    const q = store.papers[3].specter_embedding;
    const want = store.index.specter.nD.search(q, 5);
    const pending = store.search('specter', 'nD', q, 5);
    // Kill it with the query in flight.
    void (store.searcher as unknown as { worker: { terminate(): Promise<number> } }).worker.terminate();
    t.same(await pending, want, 'the query in flight is answered');
    await until(() => !store.searcher.inWorker, 'the fallback');
    const r = await post(`${svc.url}/getSimilarPapersByAbstract`, {
      input_data: { title: 'Generated paper 3', abstract: 'generated' },
      limit: 3,
    });
    t.equal(r.status, 200, 'the service still answers');
    t.ok(store.searcher.counts.thread >= 1, 'in the server thread');
    // Started again after RESTART_MIN_MS: later searches go to the new worker.
    await until(() => store.searcher.inWorker, 'the restarted worker');
    t.ok(store.searcher.counts.restarts >= 1, 'restarted');
    const before = store.searcher.counts.worker;
    t.same(await store.search('specter', 'nD', q, 5), want, 'the restarted worker answers alike');
    t.equal(store.searcher.counts.worker, before + 1, 'in the worker');
  },
);

t.test('more searches waiting than allowed: 503, other routes unaffected', async (t) => {
  const store = generatedStore(200);
  const svc = await startApp({ load: async () => store, maxPendingSearches: 0 });
  t.teardown(svc.close);
  await ready(svc.url);
  await until(() => store.searcher.inWorker, 'the worker');
  const r = await post(`${svc.url}/getSimilarPapers`, {
    input_data: ['G1'],
    input_type: 'ID',
    limit: 3,
    embedding: 'glove',
    dimensions: '2D',
  });
  t.equal(r.status, 503);
  t.match(r.body.message, /too many searches waiting/);
  t.equal((await fetch(`${svc.url}/health`)).status, 200);
});
