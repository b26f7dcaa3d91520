// REDIS_TIMEOUT per request: every request in flight is bounded by one shared sweep timer; settled ones
// leave at once, late ones are rejected with a CacheError naming the setting, in any mix and any number
// (the ring the requests wait in grows and wraps around).
import t from 'tap';
import { CacheError } from '../counting/index.js';
import { RequestDeadlines } from './deadlines.js';

// The sweep timer is unref'd (it never keeps a process alive); this one keeps the test's alive.
const keepAlive = setInterval(() => undefined, 1000);
t.teardown(() => clearInterval(keepAlive));

function deferred<T>(): { promise: Promise<T>; resolve: (v: T) => void } {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

t.test('settled requests pass through; late ones are rejected, in any mix across ring growth', async (t) => {
  const d = new RequestDeadlines(100, 'redis request (REDIS_TIMEOUT)');
  t.teardown(() => d.stop());
  // 300 requests (the ring starts at 64 slots): every third never settles, the rest settle at once or
  // after a turn, so the ring wraps and grows with holes in it.
  const outcomes: Promise<string>[] = [];
  const pending: { resolve: (v: number) => void }[] = [];
  for (let i = 0; i < 300; i++) {
    const src = deferred<number>();
    if (i % 3 === 1) src.resolve(i);
    else if (i % 3 === 2) pending.push(src);
    outcomes.push(
      d.bound(src.promise).then(
        (v) => `ok ${v}`,
        (e: unknown) => (e instanceof CacheError ? `timeout: ${(e as Error).message}` : `other ${String(e)}`),
      ),
    );
    if (i % 50 === 0) await new Promise((r) => setImmediate(r));
  }
  for (const p of pending) p.resolve(-1);
  await new Promise((r) => setImmediate(r));
  t.equal(d.inFlight, 100, 'the 100 unsettled requests are in flight');
  const results = await Promise.all(outcomes);
  for (let i = 0; i < 300; i++) {
    const want =
      i % 3 === 0
        ? 'timeout: redis request (REDIS_TIMEOUT) timed out after 100 ms'
        : i % 3 === 1
          ? `ok ${i}`
          : 'ok -1';
    if (results[i] !== want) t.fail(`request ${i}: ${results[i]}, want ${want}`);
  }
  t.equal(d.inFlight, 0, 'nothing left in flight');
  t.pass('every request ended as it should');
});

t.test('a sweep stops at the first live request and picks up the rest later', async (t) => {
  const d = new RequestDeadlines(200, 'x');
  t.teardown(() => d.stop());
  const early = d.bound(new Promise<number>(() => undefined)).catch((e: Error) => e.message);
  await new Promise((r) => setTimeout(r, 120));
  const late = d.bound(new Promise<number>(() => undefined)).catch((e: Error) => e.message);
  const t0 = performance.now();
  t.equal(await early, 'x timed out after 200 ms');
  t.equal(d.inFlight, 1, 'the later request is still waiting');
  t.equal(await late, 'x timed out after 200 ms');
  t.ok(performance.now() - t0 >= 60, 'the later one ran its own time');
});

t.test('the ring grows after it has wrapped around: every request still ends as it should', async (t) => {
  const d = new RequestDeadlines(100, 'x');
  t.teardown(() => d.stop());
  // 40 requests that settle at once, then a sweep: the ring's head moves to slot 40.
  for (let i = 0; i < 40; i++) await d.bound(Promise.resolve(i));
  await new Promise((r) => setTimeout(r, 40));
  // 100 more: they wrap past slot 63 and make the ring grow; every other one never settles, the rest
  // settle only after the growth.
  const later: ((v: number) => void)[] = [];
  const outcomes: Promise<string>[] = [];
  for (let i = 0; i < 100; i++) {
    const src = deferred<number>();
    if (i % 2 === 1) later.push(src.resolve);
    outcomes.push(
      d.bound(src.promise).then(
        (v) => `ok ${v}`,
        (e: Error) => e.message,
      ),
    );
  }
  for (const r of later) r(7);
  const all = Promise.all(outcomes);
  const hung = new Promise<string[]>((r) => setTimeout(() => r(['hung']), 5000));
  const results = await Promise.race([all, hung]);
  t.same(
    results,
    Array.from({ length: 100 }, (_, i) => (i % 2 === 1 ? 'ok 7' : 'x timed out after 100 ms')),
    'the unsettled ones timed out, the settled ones passed',
  );
  t.equal(d.inFlight, 0);
});
