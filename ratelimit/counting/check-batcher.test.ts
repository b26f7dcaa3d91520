// The checks of one turn go to the store in one call per shard; each request gets its own verdicts in
// order; a failed shard fails only the requests with a check there. The inner store is the real memory
// store, wrapped to count calls and to give each key a shard (one shard made to fail).
import t from 'tap';
import { MemoryCounterStore } from '../memory/index.js';
import type { LimitCheck, LimitVerdict } from './store.js';
import { CheckBatcher } from './check-batcher.js';
import type { CounterOp, CounterStore } from './store.js';

/** Fixed window, limit 2 per minute, on key k (the script's argument layout). */
const check = (k: string): LimitCheck => ({ keys: [k], args: [0, 1, 0, 2, 60_000, 0], perSecond: false });

function sharded(memory: MemoryCounterStore, failing: string) {
  const calls: string[][] = [];
  const store: CounterStore = {
    increment: (ops) => memory.increment(ops),
    get: (ops) => memory.get(ops),
    isHealthy: () => true,
    close: () => memory.close(),
    shardOf: (op: CounterOp) => op.key.slice(0, 1),
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
  const b = new CheckBatcher(store);
  const [r1, r2, r3] = await Promise.all([
    b.evaluate([check('a1'), check('b1')]),
    b.evaluate([check('a1')]),
    b.evaluate([check('b2'), check('a1'), check('a2')]),
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
  const b = new CheckBatcher(store);
  const [ok, bad, mixed] = await Promise.allSettled([
    b.evaluate([check('a1')]),
    b.evaluate([check('z1')]),
    b.evaluate([check('a2'), check('z2')]),
  ]);
  t.equal(ok.status, 'fulfilled');
  t.match(bad, { status: 'rejected', reason: { message: 'shard z is down' } });
  t.match(mixed, { status: 'rejected', reason: { message: 'shard z is down' } }, 'failed as a whole');
  t.same(await b.evaluate([]), [], 'no checks, no call');
});
