// WriteBehindCounterStore over the memory store (the Redis behaviour is in
// write-behind.integration.test.ts): local decisions after a key's first synchronous count,
// batched flushes with read-back, bypasses, fallback on failure, bounds, and close().
import t from 'tap';
import { flatKey, heapGrowth } from '../../harness/heap.js';
import { MemoryCounterStore } from '../memory/index.js';
import { CacheError, type CounterOp, type CounterStore } from './store.js';
import { idleMs, WriteBehindCounterStore, writeBehindEntryBytes } from './write-behind.js';

const op = (key: string, hits = 1, perSecond = false): CounterOp => ({
  key,
  hits,
  expireSeconds: 60,
  perSecond,
});

/** A store that records every op it receives and can be made to fail or hang. */
function recording(inner: CounterStore) {
  const calls: CounterOp[][] = [];
  let mode: 'ok' | 'fail' | 'hang' = 'ok';
  const hung: (() => void)[] = [];
  const store: CounterStore = {
    increment: (ops) => {
      calls.push([...ops]);
      if (mode === 'fail') return Promise.reject(new CacheError('down'));
      if (mode === 'hang')
        return new Promise((_, reject) => hung.push(() => reject(new CacheError('timed out'))));
      return inner.increment(ops);
    },
    get: (ops) => inner.get(ops),
    isHealthy: () => mode === 'ok',
    close: () => inner.close(),
  };
  return {
    store,
    calls,
    setMode: (m: typeof mode) => (mode = m),
    releaseHung: () => hung.splice(0).forEach((f) => f()),
    ops: () => calls.reduce((n, c) => n + c.length, 0),
  };
}

const big = { intervalMs: 60_000, maxKeys: 1000, maxBytes: 1 << 24 };

t.test('first hit counted in the store, later hits decided locally; one op per key per flush', async (t) => {
  const mem = new MemoryCounterStore();
  const rec = recording(mem);
  const wb = new WriteBehindCounterStore(rec.store, big);
  t.teardown(() => wb.close());
  t.same(await wb.increment([op('k')]), [1], 'first sight: the store counts');
  t.equal(rec.ops(), 1);
  const counts: number[] = [];
  for (let i = 0; i < 9; i++) counts.push(...(await wb.increment([op('k')])));
  t.same(counts, [2, 3, 4, 5, 6, 7, 8, 9, 10], 'local estimates continue the count');
  t.equal(rec.ops(), 1, 'no store call for the local decisions');
  t.same(await mem.get([op('k')]), [1], 'the store has not seen them yet');
  await wb.flush();
  t.equal(rec.ops(), 2, 'one op for the 9 pending hits');
  t.same(rec.calls[1], [op('k', 9)]);
  t.same(await mem.get([op('k')]), [10], 'converged after the flush');
  t.same(wb.counters.local, 9);
  t.same(wb.counters.synchronous, 1);
});

t.test('the flush reply brings in the other pods’ hits', async (t) => {
  const mem = new MemoryCounterStore();
  const a = new WriteBehindCounterStore(mem, big);
  const b = new WriteBehindCounterStore(mem, big);
  t.teardown(async () => {
    await a.flush();
    await b.flush();
  });
  t.same(await a.increment([op('k')]), [1]);
  t.same(await b.increment([op('k')]), [2]);
  await a.increment([op('k', 3)]); // a: 4 locally
  await b.increment([op('k', 5)]); // b: 7 locally
  await a.flush(); // redis 5 -> a knows 5
  t.same(await a.increment([op('k', 0)]), [5], 'a learnt the global count from its flush reply');
  await b.flush(); // redis 10
  t.same(await b.increment([op('k', 0)]), [10]);
  t.same(await a.increment([op('k')]), [6], 'a is stale until its next flush: the bounded error');
  await a.flush();
  t.same(await a.increment([op('k', 0)]), [11]);
  t.same(await mem.get([op('k')]), [11], 'every hit reached the store exactly once');
});

t.test('a key pending at the flush interval is sent by the timer', async (t) => {
  const mem = new MemoryCounterStore();
  const rec = recording(mem);
  const wb = new WriteBehindCounterStore(rec.store, { intervalMs: 50, maxKeys: 10, maxBytes: 1 << 24 });
  t.teardown(() => wb.close());
  await wb.increment([op('k')]);
  await wb.increment([op('k')]);
  await wb.increment([op('k')]);
  const deadline = Date.now() + 10_000;
  while ((await mem.get([op('k')]))[0] !== 3 && Date.now() < deadline)
    await new Promise((r) => setTimeout(r, 20));
  t.same(await mem.get([op('k')]), [3]);
  t.equal(rec.ops(), 2);
});

t.test('second-unit keys and scripted algorithms are never decided locally', async (t) => {
  const mem = new MemoryCounterStore();
  const rec = recording(mem);
  const wb = new WriteBehindCounterStore(rec.store, big);
  t.teardown(() => wb.close());
  for (let i = 0; i < 3; i++) await wb.increment([op('s', 1, true)]);
  t.equal(rec.ops(), 3, 'every second-unit hit goes to the store');
  t.equal(wb.size, 0);
  t.equal(wb.evaluate, undefined, 'no evaluate when the inner store has none');
  const withEval = new WriteBehindCounterStore(mem, big);
  t.type(withEval.evaluate, 'function', 'forwarded when the inner store has it');
});

t.test('a failed flush drops its hits and falls back to synchronous counting', async (t) => {
  const mem = new MemoryCounterStore();
  const rec = recording(mem);
  const wb = new WriteBehindCounterStore(rec.store, big);
  t.teardown(() => wb.close());
  await wb.increment([op('a'), op('b')]);
  await wb.increment([op('a', 2), op('b')]);
  rec.setMode('fail');
  await wb.flush();
  t.equal(wb.counters.droppedHits, 3);
  t.ok(wb.isSynchronous);
  t.equal(wb.size, 0, 'the failed keys are forgotten');
  const r = await wb.incrementEach([op('a')]);
  t.type(r[0], CacheError, 'the store’s error reaches the limiter (failure mode)');
  await t.rejects(wb.increment([op('a')]), CacheError);
  rec.setMode('ok');
  t.same(await wb.increment([op('a')]), [2], 'counted by the store again');
  t.notOk(wb.isSynchronous, 'an answer ends the fallback');
  t.same(await wb.increment([op('a')]), [3], 'and the next hit is local again');
});

t.test('a flush still unanswered at the next interval switches to synchronous counting', async (t) => {
  const mem = new MemoryCounterStore();
  const rec = recording(mem);
  const wb = new WriteBehindCounterStore(rec.store, { intervalMs: 30, maxKeys: 10, maxBytes: 1 << 24 });
  await wb.increment([op('k')]);
  rec.setMode('hang');
  await wb.increment([op('k')]); // pending: the timer sends it into the hang
  const deadline = Date.now() + 10_000;
  while (!wb.isSynchronous && Date.now() < deadline) {
    await wb.increment([op('k')]);
    await new Promise((r) => setTimeout(r, 10));
  }
  t.ok(wb.isSynchronous, 'fell back while the flush hung');
  const sync = wb.incrementEach([op('k')]);
  rec.releaseHung();
  t.type((await sync)[0], CacheError);
  rec.setMode('ok');
  await wb.close();
});

t.test('entries are bounded by maxKeys and dropped when idle', async (t) => {
  const mem = new MemoryCounterStore();
  const rec = recording(mem);
  let now = 1_000_000;
  const wb = new WriteBehindCounterStore(
    rec.store,
    { intervalMs: 1000, maxKeys: 2, maxBytes: 1 << 24 },
    undefined,
    () => now,
  );
  t.teardown(() => wb.close());
  t.equal(idleMs(1000), 10_000, 'idle for at least 10 s');
  t.equal(idleMs(30_000), 60_000, 'and at least two intervals');
  await wb.increment([op('a'), op('b'), op('c')]);
  t.equal(wb.size, 2, 'the third key is not tracked');
  await wb.increment([op('c')]);
  t.equal(rec.ops(), 4, 'an untracked key is counted synchronously');
  now += 6000;
  await wb.increment([op('a')]);
  await wb.flush();
  t.equal(wb.size, 2, 'not idle long enough yet');
  now += 6000;
  await wb.increment([op('a')]);
  await wb.flush(); // b idle for 12 s
  t.equal(wb.size, 1, 'the idle key is dropped');
  const before = rec.ops();
  t.same(await wb.increment([op('b')]), [2], 'its next hit is counted synchronously');
  t.equal(rec.ops(), before + 1);
});

t.test('entries are bounded in bytes: long keys beyond maxBytes are counted synchronously', async (t) => {
  // A store that keeps no key (every count is the op's hits), so the heap measured is the layer's own.
  let storeCalls = 0;
  const stateless: CounterStore = {
    increment: async (ops) => {
      storeCalls += ops.length;
      return ops.map((o) => o.hits);
    },
    get: async (ops) => ops.map(() => 0),
    isHealthy: () => true,
    close: async () => undefined,
  };
  const maxBytes = 4 * 1024 * 1024;
  const wb = new WriteBehindCounterStore(stateless, { intervalMs: 60_000, maxKeys: 1_000_000, maxBytes });
  t.teardown(() => wb.close());
  const pad = 'v'.repeat(2000);
  let over = 0;
  const grown = await heapGrowth(async () => {
    for (let i = 0; i < 20_000; i++) {
      await wb.increment([op(flatKey(`d_header_${i}_${pad}`))]);
      if (wb.accountedBytes > maxBytes) over++;
    }
  });
  t.equal(over, 0, 'the accounted bytes never exceed CACHE_WRITE_BEHIND_MAX_BYTES');
  const perEntry = writeBehindEntryBytes(`d_header_10000_${pad}`);
  t.ok(wb.size <= maxBytes / (perEntry - 10), `${wb.size} keys kept (40 MB of keys offered)`);
  t.ok(wb.size > 0.9 * (maxBytes / perEntry), 'the budget is used');
  t.ok(
    grown < wb.accountedBytes * 1.25 + 4 * 1024 * 1024,
    `heap grown ${(grown / 1048576).toFixed(1)} MB for ${(wb.accountedBytes / 1048576).toFixed(1)} MB accounted`,
  );
  const calls = storeCalls;
  await wb.increment([op(`d_header_19999_${pad}`)]);
  t.equal(storeCalls, calls + 1, 'a key that did not fit is counted synchronously in the store');
  await wb.increment([op(`d_header_0_${pad}`)]);
  t.equal(storeCalls, calls + 1, 'a key that fit is decided locally');
});

t.test('a map full of ended windows makes room for new keys without a flush', async (t) => {
  const mem = new MemoryCounterStore();
  const rec = recording(mem);
  let now = 1_000_000;
  const wb = new WriteBehindCounterStore(
    rec.store,
    { intervalMs: 1000, maxKeys: 2, maxBytes: 1 << 24 },
    undefined,
    () => now,
  );
  t.teardown(() => wb.close());
  await wb.increment([op('old1'), op('old2')]);
  t.equal(wb.size, 2);
  now += 11_000; // both idle past idleMs; nothing is waiting, so no flush will sweep
  await wb.increment([op('new')]);
  t.equal(wb.size, 1, 'the idle entries were swept when the map was full');
  const before = rec.ops();
  t.same(await wb.increment([op('new')]), [2]);
  t.equal(rec.ops(), before, 'the new key is decided locally');
});

t.test('close() sends the pending hits', async (t) => {
  const mem = new MemoryCounterStore();
  const wb = new WriteBehindCounterStore(
    {
      increment: (ops) => mem.increment(ops),
      get: (ops) => mem.get(ops),
      isHealthy: () => true,
      close: async () => {},
    },
    big,
  );
  for (let i = 0; i < 5; i++) await wb.increment([op('k')]);
  t.same(await mem.get([op('k')]), [1]);
  await wb.close();
  t.same(await mem.get([op('k')]), [5]);
  await mem.close();
});

t.test('get adds the hits not yet sent', async (t) => {
  const mem = new MemoryCounterStore();
  const wb = new WriteBehindCounterStore(mem, big);
  t.teardown(() => wb.close());
  await wb.increment([op('k')]);
  await wb.increment([op('k', 4)]);
  t.same(await wb.get([op('k')]), [5], 'local estimate');
  t.same(await wb.get([op('k'), op('other')]), [5, 0], 'from the store plus unsent hits');
});

t.test('a refund takes back unsent hits first, then the store; the estimate follows', async (t) => {
  const mem = new MemoryCounterStore();
  const rec = recording(mem);
  const wb = new WriteBehindCounterStore(rec.store, big);
  t.teardown(() => wb.close());
  t.same(await wb.increment([op('k', 4)]), [4], 'first sight: the store counts');
  t.same(await wb.increment([op('k', 3)]), [7], 'decided locally, 3 unsent');
  t.same(await wb.increment([op('k', -2)]), [5], 'a refund of 2 taken from the unsent hits');
  t.same(rec.calls.at(-1), [op('k', 0)], 'nothing refunded in the store (a read of the key)');
  t.same(await wb.increment([op('k', -3)]), [2], 'the last unsent hit, then 2 from the store');
  t.same(rec.calls.at(-1), [op('k', -2)]);
  t.same(await mem.get([op('k')]), [2], 'the store holds 2');
  t.same(await wb.increment([op('k')]), [3], 'the estimate continues from the store after the refund');
  await wb.flush();
  t.same(await mem.get([op('k')]), [3], 'converged');
});

t.test("a fixed window's refund check (evaluate) is netted against unsent hits too", async (t) => {
  const mem = new MemoryCounterStore();
  const wb = new WriteBehindCounterStore(mem, big);
  t.teardown(() => wb.close());
  await wb.increment([op('k', 2)]);
  await wb.increment([op('k', 3)]);
  // buildFixedWindowRefund's layout: [now, -hits, code 0, limit, period, burst 0]
  const refund = (hits: number) => ({
    keys: ['k'],
    args: [Date.now(), -hits, 0, 10, 60_000, 0],
    perSecond: false,
  });
  const [v] = await wb.evaluate!([refund(4)]);
  t.equal(v![0], 0, 'admitted');
  t.equal(v![1], 9, 'remaining: 10 - (2 in the store - 1 refunded there)');
  t.same(await mem.get([op('k')]), [1], 'the store gave back what the unsent hits could not');
  t.same(await wb.increment([op('k')]), [2], 'the estimate is the store count plus the new hit');
});
