import t from 'tap';
import { MemoryCounterStore } from '../memory/index.js';
import { CoalescingCounterStore } from './coalescing.js';
import { CacheError, MAX_OP_HITS, type CounterOp, type CounterStore } from './store.js';

const op = (key: string, hits = 1): CounterOp => ({ key, hits, expireSeconds: 60, perSecond: false });

function recording(inner: CounterStore) {
  const calls: CounterOp[][] = [];
  const store: CounterStore = {
    increment: (ops) => {
      calls.push([...ops]);
      return inner.increment(ops);
    },
    get: (ops) => inner.get(ops),
    isHealthy: () => true,
    close: () => inner.close(),
  };
  return { store, calls };
}

t.test(
  'concurrent hits on one key become one increment; each caller gets its sequential count',
  async (t) => {
    const mem = new MemoryCounterStore();
    t.teardown(() => mem.close());
    const { store, calls } = recording(mem);
    const c = new CoalescingCounterStore(store);
    const results = await Promise.all([
      c.increment([op('hot')]),
      c.increment([op('hot', 3)]),
      c.increment([op('hot'), op('other')]),
      c.increment([op('hot')]),
    ]);
    t.same(results, [[1], [4], [5, 1], [6]], 'arrival order, exact totals');
    t.equal(calls.length, 1, 'one store call for the whole turn');
    t.same(calls[0], [op('hot', 6), op('other', 1)], 'one merged op per key');
    const next = await c.increment([op('hot')]);
    t.same(next, [7], 'the next turn continues from the stored total');
  },
);

t.test('a duplicate key inside one request counts in order', async (t) => {
  const mem = new MemoryCounterStore();
  t.teardown(() => mem.close());
  const c = new CoalescingCounterStore(mem);
  t.same(await c.increment([op('k'), op('k', 2)]), [1, 3]);
});

t.test('a store failure rejects every request of the batch, once', async (t) => {
  const failing: CounterStore = {
    increment: () => Promise.reject(new CacheError('down')),
    get: () => Promise.resolve([]),
    isHealthy: () => false,
    close: async () => {},
  };
  const c = new CoalescingCounterStore(failing);
  const r = await Promise.allSettled([c.increment([op('a'), op('b')]), c.increment([op('a')])]);
  t.same(
    r.map((x) => x.status),
    ['rejected', 'rejected'],
  );
  t.match((r[0] as PromiseRejectedResult).reason, CacheError);
});

t.test(
  'a store that throws instead of rejecting fails its batch, and the next call is not held',
  async (t) => {
    const mem = new MemoryCounterStore();
    t.teardown(() => mem.close());
    let calls = 0;
    const throwing: CounterStore = {
      increment: (ops) => {
        if (++calls === 1) throw new CacheError('thrown');
        return mem.increment(ops);
      },
      get: () => Promise.resolve([]),
      isHealthy: () => true,
      close: async () => {},
    };
    const c = new CoalescingCounterStore(throwing);
    const r = await Promise.allSettled([c.increment([op('a')]), c.increment([op('a')])]);
    t.same(
      r.map((x) => x.status),
      ['rejected', 'rejected'],
      'both callers of the batch get the error',
    );
    t.match((r[0] as PromiseRejectedResult).reason, { message: 'thrown' });
    // Nothing in flight any more: a lone call goes at the end of its callback, before the turn's end.
    const seen = new Promise<number>((resolve) => setImmediate(() => resolve(calls)));
    const next = c.increment([op('a')]);
    t.equal(await seen, 2, 'the next call went out before the rest of the turn');
    t.same(await next, [1]);
  },
);

t.test('the longest expiry of merged ops is kept', async (t) => {
  const mem = new MemoryCounterStore();
  t.teardown(() => mem.close());
  const { store, calls } = recording(mem);
  const c = new CoalescingCounterStore(store);
  await Promise.all([
    c.increment([{ ...op('j'), expireSeconds: 61 }]),
    c.increment([{ ...op('j'), expireSeconds: 65 }]),
  ]);
  t.equal(calls[0][0].expireSeconds, 65);
});

t.test('with per-op settlement, a failed key fails only the requests that touch it', async (t) => {
  const mem = new MemoryCounterStore();
  t.teardown(() => mem.close());
  const store: CounterStore = {
    increment: (ops) => mem.increment(ops),
    incrementEach: async (ops) => {
      const counts = await mem.increment(ops.filter((o) => o.key !== 'broken'));
      let k = 0;
      return ops.map((o) => (o.key === 'broken' ? new CacheError('shard down') : counts[k++]));
    },
    get: (ops) => mem.get(ops),
    isHealthy: () => true,
    close: async () => {},
  };
  const c = new CoalescingCounterStore(store);
  const r = await Promise.allSettled([
    c.increment([op('fine')]),
    c.increment([op('broken')]),
    c.increment([op('fine'), op('broken')]),
    c.increment([op('fine')]),
  ]);
  t.same(
    r.map((x) => x.status),
    ['fulfilled', 'rejected', 'rejected', 'fulfilled'],
  );
  t.same((r[0] as PromiseFulfilledResult<number[]>).value, [1]);
  t.same(
    (r[3] as PromiseFulfilledResult<number[]>).value,
    [3],
    "counts include the failed request's applied op",
  );
});

t.test(
  'merged hits saturate at MAX_OP_HITS: no store call carries more, callers past it are over any limit',
  async (t) => {
    const mem = new MemoryCounterStore();
    t.teardown(() => mem.close());
    const { store, calls } = recording(mem);
    const c = new CoalescingCounterStore(store);
    const huge = 2 ** 53 - 1;
    // 1,025 identical descriptors at 2^53 - 1 in one request, plus a caller after them on the same key.
    const [flood, next] = await Promise.all([
      c.increment(new Array<CounterOp>(1025).fill(op('k', huge))),
      c.increment([op('k', 1)]),
    ]);
    t.equal(calls.length, 1);
    t.same(calls[0], [op('k', MAX_OP_HITS)], 'one op, saturated');
    t.equal(flood[0], MAX_OP_HITS, 'the first caller is over any limit');
    t.ok(
      flood.every((n) => n === MAX_OP_HITS),
      'so is every caller past the saturation',
    );
    t.equal(next[0], MAX_OP_HITS);
    t.ok(
      flood.every((n) => Number.isSafeInteger(n)),
      'counts stay exact JS integers',
    );
  },
);

t.test('with nothing in flight a call goes at the end of its callback, not of the loop turn', async (t) => {
  const mem = new MemoryCounterStore();
  t.teardown(() => mem.close());
  const { store, calls } = recording(mem);
  const c = new CoalescingCounterStore(store);
  // Queued before the increment: runs later in this turn; a flush left for the turn's end (setImmediate)
  // would not have run by then.
  const seen = new Promise<number>((resolve) => setImmediate(() => resolve(calls.length)));
  const counted = c.increment([op('hot')]);
  t.equal(await seen, 1, 'the store was called before the rest of the turn');
  t.same(await counted, [1]);
});

t.test("with a store call in flight, the turn's increments wait and go as one", async (t) => {
  const mem = new MemoryCounterStore();
  t.teardown(() => mem.close());
  const calls: CounterOp[][] = [];
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const slow: CounterStore = {
    increment: async (ops) => {
      calls.push([...ops]);
      if (calls.length === 1) await gate;
      return mem.increment(ops);
    },
    get: (ops) => mem.get(ops),
    isHealthy: () => true,
    close: async () => {},
  };
  const c = new CoalescingCounterStore(slow);
  const first = c.increment([op('hot')]);
  await new Promise((r) => process.nextTick(r));
  t.equal(calls.length, 1, 'the first call is in flight');
  // Two callbacks of one turn (two socket reads, say): merged while the first call is out.
  const later = await new Promise<Promise<number[]>[]>((resolve) => {
    const out: Promise<number[]>[] = [];
    setImmediate(() => out.push(c.increment([op('hot')])));
    setImmediate(() => {
      out.push(c.increment([op('hot', 2)]));
      resolve(out);
    });
  });
  release();
  t.same(await first, [1]);
  t.same(await Promise.all(later), [[2], [4]], 'exact counts in arrival order');
  t.equal(calls.length, 2, 'one more store call for both');
  t.same(calls[1], [op('hot', 3)]);
});

t.test('a refund (negative hits) is never merged into the increments of its key', async (t) => {
  const mem = new MemoryCounterStore();
  t.teardown(() => mem.close());
  await mem.increment([op('k', 2)]);
  const { store, calls } = recording(mem);
  const c = new CoalescingCounterStore(store);
  const results = await Promise.all([
    c.increment([op('k', 3)]),
    c.increment([op('k', -10)]),
    c.increment([op('k', 1)]),
  ]);
  t.equal(calls.length, 1, 'one store call for the turn');
  t.same(calls[0], [op('k', 4), op('k', -10)], 'the increments merged, the refund its own op');
  // The memory store runs ops in order: +4 (to 6), then the refund floored at 0.
  t.same(results, [[5], [0], [6]], 'each caller the count of its own op');
  t.same(await mem.get([op('k')]), [0], 'the refund was clamped at 0, not netted against the increments');
});
