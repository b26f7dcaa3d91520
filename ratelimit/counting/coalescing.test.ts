import t from 'tap';
import { MemoryCounterStore } from '../memory/index.js';
import { CoalescingCounterStore } from './coalescing.js';
import {
  CacheError,
  MAX_OP_HITS,
  type CounterOp,
  type CounterStore,
  type LimitCheck,
  type LimitVerdict,
} from './store.js';

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

// The checks of one flush go to the store in one call per shard; each request gets its own verdicts in
// order; a failed shard fails only the requests with a check there.
/** Fixed window, limit 2 per minute, on key k (the script's argument layout). */
const check = (k: string): LimitCheck => ({ keys: [k], args: [0, 1, 0, 2, 60_000, 0], perSecond: false });

function sharded(memory: MemoryCounterStore, failing: string) {
  const calls: string[][] = [];
  const store: CounterStore = {
    increment: (ops) => memory.increment(ops),
    get: (ops) => memory.get(ops),
    isHealthy: () => true,
    close: () => memory.close(),
    shardOf: (key: string) => key.slice(0, 1),
    evaluate: (checks): Promise<LimitVerdict[]> => {
      calls.push(checks.map((c) => c.keys[0]!));
      if (checks.some((c) => c.keys[0]!.startsWith(failing)))
        return Promise.reject(new Error(`shard ${failing} is down`));
      return memory.evaluate(checks);
    },
  };
  return { store, calls };
}

t.test('one store call per shard per turn; each request its own verdicts, in order', async (t) => {
  const memory = new MemoryCounterStore(() => 0);
  t.teardown(() => memory.close());
  const { store, calls } = sharded(memory, 'z');
  const b = new CoalescingCounterStore(store);
  const [r1, r2, r3] = await Promise.all([
    b.evaluate!([check('a1'), check('b1')]),
    b.evaluate!([check('a1')]),
    b.evaluate!([check('b2'), check('a1'), check('a2')]),
  ]);
  t.same(
    calls.map((c) => c.join(',')).sort(),
    ['a1,a1,a1,a2', 'b1,b2'],
    'two calls, one per shard, for three requests',
  );
  // a1 is checked three times with a limit of 2: admitted, admitted, rejected, in request order.
  t.equal(r1[0]![0], 0);
  t.equal(r2[0]![0], 0);
  t.equal(r3[1]![0], 1, 'the third check of a1 is rejected by its first limit');
  t.equal(r1.length, 2);
  t.equal(r3.length, 3);
  t.equal(r3[0]![0], 0, 'b2 admitted');
  t.equal(r3[2]![0], 0, 'a2 admitted');
});

t.test('a failed shard fails the requests with a check there, the others are answered', async (t) => {
  const memory = new MemoryCounterStore(() => 0);
  t.teardown(() => memory.close());
  const { store } = sharded(memory, 'z');
  const b = new CoalescingCounterStore(store);
  const [ok, bad, mixed] = await Promise.allSettled([
    b.evaluate!([check('a1')]),
    b.evaluate!([check('z1')]),
    b.evaluate!([check('a2'), check('z2')]),
  ]);
  t.equal(ok.status, 'fulfilled');
  t.match(bad, { status: 'rejected', reason: { message: 'shard z is down' } });
  t.match(mixed, { status: 'rejected', reason: { message: 'shard z is down' } }, 'failed as a whole');
  t.same(await b.evaluate!([]), [], 'no checks, no call');
});

t.test('increments and checks of one turn share one flush: one store call per shard for both', async (t) => {
  const memory = new MemoryCounterStore(() => 0);
  t.teardown(() => memory.close());
  const sent: string[] = [];
  const store: CounterStore = {
    increment: (ops) => memory.increment(ops),
    get: (ops) => memory.get(ops),
    isHealthy: () => true,
    close: () => memory.close(),
    shardOf: (key: string) => key.slice(0, 1),
    send: async (batch) => {
      sent.push(
        `${batch.shard}: ${batch.ops.map((o) => o.key).join(',')} | ${batch.checks.map((c) => c.keys[0]).join(',')}`,
      );
      return { counts: await memory.increment(batch.ops), verdicts: await memory.evaluate(batch.checks) };
    },
    evaluate: (checks) => memory.evaluate(checks),
  };
  const b = new CoalescingCounterStore(store);
  const [i1, c1, i2] = await Promise.all([
    b.increment([op('a1'), op('b1')]),
    b.evaluate!([check('a2'), check('b2')]),
    b.increment([op('a1')]),
  ]);
  t.same(sent.sort(), ['a: a1 | a2', 'b: b1 | b2'], 'each shard named once, with its ops and checks');
  t.same(i1, [1, 1]);
  t.same(i2, [2], 'merged with the first request');
  t.same(
    c1.map((v) => v[0]),
    [0, 0],
  );
});

t.test('a pipeline window flushes when it elapses or at its limit of commands', async (t) => {
  const mem = new MemoryCounterStore();
  t.teardown(() => mem.close());
  const { store, calls } = recording(mem);
  const windowed = new CoalescingCounterStore(store, { flush: { windowMs: 5, limit: 0 } });
  const seen = new Promise<number>((resolve) => setImmediate(() => resolve(calls.length)));
  const counts = Promise.all(Array.from({ length: 20 }, (_, i) => windowed.increment([op(`w${i}`)])));
  t.equal(await seen, 0, 'nothing sent at the end of the turn: the window holds it');
  t.same(
    await counts,
    Array.from({ length: 20 }, () => [1]),
  );
  t.equal(calls.length, 1, 'one store call for 20 requests');
  calls.length = 0;
  const limited = new CoalescingCounterStore(store, { flush: { windowMs: 1000, limit: 8 } });
  const started = Date.now();
  await Promise.all(Array.from({ length: 21 }, (_, i) => limited.increment([op(`l${i}`)])));
  t.equal(calls.length, 6, 'limit 8 commands: 42 commands in 5 full calls and the rest at the window');
  t.ok(Date.now() - started >= 900, 'the last, partial one waited for the window');
});

t.test('per-second items follow their own flush policy; merging off sends every op', async (t) => {
  const mem = new MemoryCounterStore();
  t.teardown(() => mem.close());
  const { store, calls } = recording(mem);
  const b = new CoalescingCounterStore(store, {
    merge: false,
    perSecondFlush: { windowMs: 5, limit: 0 },
  });
  const sec = (key: string): CounterOp => ({ ...op(key), perSecond: true });
  const [a, s] = await Promise.all([b.increment([op('m'), op('m')]), b.increment([sec('s')])]);
  t.same(a, [1, 2]);
  t.same(s, [1]);
  t.same(
    calls.map((c) => c.map((o) => o.key).join(',')),
    ['m,m', 's'],
    "the turn's ops first, not merged; the per-second one after its window",
  );
});
