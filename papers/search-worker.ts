// The search worker's entry (started by searcher.ts): wraps the shared float32 rows, builds the int8 first pass
// for each cosine index, says it is ready, then answers one search per message, in order.
import { parentPort, workerData } from 'node:worker_threads';
import { Int8Index } from './int8.js';
import { ExactIndex, type Hit } from './knn.js';
import type { IndexSpec, SearchReply, SearchRequest } from './searcher.js';

type Searchable = { search(q: ArrayLike<number>, k: number, exclude?: ReadonlySet<number>): Hit[] };

const indexes = new Map<string, Searchable>();
for (const s of workerData as IndexSpec[]) {
  const exact = ExactIndex.fromData(s.data, s.dim, s.metric, s.extent);
  indexes.set(s.name, s.metric === 'cosine' ? new Int8Index(exact) : exact);
}
const port = parentPort!;
port.postMessage({ ready: true });

port.on('message', (m: SearchRequest) => {
  let reply: SearchReply;
  try {
    const index = indexes.get(m.name);
    if (!index) throw new Error(`no index ${m.name}`);
    const hits = index.search(m.query, m.k, m.exclude.length ? new Set(m.exclude) : undefined);
    const ids = new Int32Array(hits.length);
    const distance = new Float64Array(hits.length);
    hits.forEach((h, i) => {
      ids[i] = h.index;
      distance[i] = h.distance;
    });
    reply = { id: m.id, index: ids, distance };
    port.postMessage(reply, [ids.buffer, distance.buffer]);
  } catch (e) {
    reply = { id: m.id, error: (e as Error).message };
    port.postMessage(reply);
  }
});
