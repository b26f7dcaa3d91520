// The memory backend's table is keyed by request values: bounded in bytes (MEMORY_MAX_BYTES), oldest
// keys evicted first, the heap growing with the accounted bytes and no more.
import t from 'tap';
import { flatKey, heapGrowth } from '../../harness/heap.js';
import type { CounterOp } from '../counting/index.js';
import { loadSettings } from '../settings/index.js';
import { MemoryCounterStore } from './memory-store.js';

const op = (key: string): CounterOp => ({ key, hits: 1, expireSeconds: 60, perSecond: false });

t.test('long distinct keys stay within MEMORY_MAX_BYTES; the oldest are evicted', async (t) => {
  const maxBytes = 4 * 1024 * 1024;
  const now = 1_000_000;
  const store = new MemoryCounterStore(() => now, 60_000, maxBytes);
  t.teardown(() => store.close());
  const pad = 'v'.repeat(2000);
  let over = 0;
  const grown = await heapGrowth(async () => {
    for (let i = 0; i < 20_000; i++) {
      await store.increment([op(flatKey(`d_header_${i}_${pad}`))]);
      if (store.accountedBytes > maxBytes) over++;
    }
  });
  t.equal(over, 0, 'the accounted bytes never exceed the budget (40 MB of keys offered)');
  t.ok(store.size > 1000, `${store.size} keys kept`);
  t.equal(store.evicted, 20_000 - store.size, 'every key not kept was evicted');
  t.ok(
    grown < store.accountedBytes * 1.25 + 4 * 1024 * 1024,
    `heap grown ${(grown / 1048576).toFixed(1)} MB for ${(store.accountedBytes / 1048576).toFixed(1)} MB accounted`,
  );
  t.same(await store.get([op(`d_header_19999_${pad}`)]), [1], 'the newest key is kept');
  t.same(await store.get([op(`d_header_0_${pad}`)]), [0], 'the oldest was evicted: it starts again from 0');
  t.same(await store.increment([op(`d_header_19999_${pad}`)]), [2], 'a kept key counts on');
});

t.test('MEMORY_MAX_BYTES: 256 MiB by default, at least 4096', async (t) => {
  t.equal(loadSettings({}).memoryMaxBytes, 256 * 1024 * 1024);
  t.equal(loadSettings({ MEMORY_MAX_BYTES: '1048576' }).memoryMaxBytes, 1048576);
  t.throws(() => loadSettings({ MEMORY_MAX_BYTES: '100' }), /^MEMORY_MAX_BYTES: must be >= 4096/);
});
