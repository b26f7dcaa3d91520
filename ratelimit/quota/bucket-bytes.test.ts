// Bucket ids are bounded in bytes, per stream (RLQS_MAX_BUCKET_BYTES_PER_STREAM) and per pod
// (RLQS_MAX_BUCKET_BYTES), not only by count: hostile streams reporting many buckets with long ids are
// refused past the bounds, the heap they hold stays within a small multiple of the pod's bound, and it
// is returned when the streams close. The QuotaServer runs in-process on the memory store.
import t from 'tap';
import pino from 'pino';
import { flatKey, heapGrowth } from '../../harness/heap.js';
import { loadConfig } from '../config/index.js';
import { MemoryCounterStore } from '../memory/index.js';
import { loadSettings } from '../settings/index.js';
import { StatsStore } from '../stats/index.js';
import { QuotaServer } from './server.js';
import type { QuotaStream } from './state.js';

const CONFIG = `domain: rlqs
descriptors:
  - key: tenant
    rate_limit: { unit: second, requests_per_unit: 100 }
`;
const PER_STREAM = 256 * 1024;
const PER_POD = 4 * 1024 * 1024;
const VALUE_BYTES = 8000;

t.test('bucket ids are bounded in bytes per stream and per pod, and freed when streams close', async (t) => {
  const store = new MemoryCounterStore();
  t.teardown(() => store.close());
  const s = loadSettings({
    RLQS_ENABLED: 'true',
    RLQS_REPORTING_INTERVAL: '1s',
    RLQS_MAX_BUCKET_BYTES_PER_STREAM: String(PER_STREAM),
    RLQS_MAX_BUCKET_BYTES: String(PER_POD),
  });
  const server = new QuotaServer({
    settings: s.quota,
    bounds: s.requestBounds,
    store,
    keyPrefix: '',
    stats: new StatsStore(),
    logger: pino({ level: 'silent' }),
  });
  server.apply(server.prepare(loadConfig([{ name: 'q.yaml', yaml: CONFIG }])));
  t.teardown(() => server.shutdown());

  const ends: { code: string; message: string }[] = [];
  let serial = 0;
  /** A hostile stream: `messages` messages of 30 buckets with 8000-byte values (240 kB of ids each). */
  const hostile = (messages: number): QuotaStream => {
    let closed = false;
    const stream = server.open({
      send: () => undefined,
      end: (code, message) => {
        closed = true;
        ends.push({ code, message: message ?? '' });
      },
      get closed() {
        return closed;
      },
      queuedBytes: 0,
    });
    for (let m = 0; m < messages && !closed; m++) {
      const usages = [];
      for (let i = 0; i < 30; i++) {
        const value = flatKey(`${serial++}:`.padEnd(VALUE_BYTES, 'x'));
        usages.push({
          bucketId: { bucket: { tenant: value } },
          timeElapsed: { seconds: 1 },
          numRequestsAllowed: 1,
        });
      }
      server.report(stream, { domain: m === 0 ? 'rlqs' : '', bucketQuotaUsages: usages });
    }
    return stream;
  };

  /** Buckets the pod tracks (the snapshot is dropped at once: it holds the ids). */
  const tracked = () => (server.snapshot(100_000) as { buckets: unknown[] }).buckets.length;
  let streams: QuotaStream[] = [];
  const fill = async () => {
    // One stream past its own bound (480 kB), then 80 within it (19 MB together).
    streams.push(hostile(2));
    for (let i = 0; i < 80; i++) streams.push(hostile(1));
    await new Promise((r) => setImmediate(r));
  };
  const release = async () => {
    for (const st of streams) server.close(st);
    streams = [];
    await new Promise((r) => setImmediate(r));
  };
  // A first round leaves what is kept once for good (the store's tables, compiled code); the second is
  // measured.
  await fill();
  await release();
  ends.length = 0;
  const filled = await heapGrowth(fill);
  const perStream = ends.filter((e) => /RLQS_MAX_BUCKET_BYTES_PER_STREAM/.test(e.message));
  const perPod = ends.filter((e) => /RLQS_MAX_BUCKET_BYTES\b/.test(e.message));
  t.equal(perStream.length, 1, 'the stream past the per-stream bytes ended');
  t.ok(
    perStream.every((e) => e.code === 'invalid'),
    'with INVALID_ARGUMENT (the caller asked too much)',
  );
  t.ok(perPod.length > 0, `streams past the pod's bytes ended (${perPod.length})`);
  t.ok(
    perPod.every((e) => e.code === 'exhausted'),
    "with RESOURCE_EXHAUSTED (the pod's bound)",
  );
  const idBytes = tracked() * VALUE_BYTES;
  t.ok(idBytes <= PER_POD, `the pod tracks ${tracked()} buckets: ${idBytes} bytes of ids`);
  t.ok(idBytes > PER_POD / 2, 'the pod was filled to its bound');
  // 81 streams asked for 19 MB of ids; the pod's bound admits 4 MiB, each id kept about twice (the
  // bucket's key and its pairs) with small objects around it.
  t.ok(filled < 4 * PER_POD, `heap held by the buckets: ${(filled / 1048576).toFixed(1)} MiB`);

  const released = await heapGrowth(release);
  const left = filled + released;
  t.equal(tracked(), 0, 'every bucket forgotten');
  t.ok(left < 1024 * 1024, `heap returned when the streams closed (${(left / 1024).toFixed(0)} KiB left)`);
});
