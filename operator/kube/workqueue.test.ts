// The work queue: dedup, never two workers on one key, a key added while processing comes back once
// after done(), per-key exponential backoff that forget() resets, shutdown.
import t from 'tap';
import { WorkQueue } from './workqueue.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// Retry timers are unref'd (they must not keep an operator alive): keep the test process up.
const keepAlive = setInterval(() => {}, 1000);
t.teardown(() => clearInterval(keepAlive));

t.test('a key queued several times is processed once', async (t) => {
  const q = new WorkQueue();
  q.add('a');
  q.add('b');
  q.add('a');
  q.add('a');
  t.equal(q.length, 2);
  t.equal(await q.get(), 'a');
  t.equal(await q.get(), 'b');
  t.equal(q.length, 0);
  q.done('a');
  q.done('b');
  t.equal(q.length, 0, 'nothing comes back');
  q.shutDown();
});

t.test('keys come out in the order they were first added', async (t) => {
  const q = new WorkQueue();
  for (const k of ['x', 'y', 'x', 'z', 'y']) q.add(k);
  const got = [await q.get(), await q.get(), await q.get()];
  t.same(got, ['x', 'y', 'z']);
  q.shutDown();
});

t.test('a key added while processing is not handed out again until done(), then once', async (t) => {
  const q = new WorkQueue();
  q.add('a');
  const first = await q.get();
  t.equal(first, 'a');
  q.add('a');
  q.add('a');
  t.equal(q.length, 0, 'not queued while a worker holds it');
  // A second worker waiting for work does not get the key being processed.
  let second: string | undefined | null = null;
  void q.get().then((k) => (second = k));
  await sleep(10);
  t.equal(second, null, 'the second worker still waits');
  q.done('a');
  await sleep(0);
  t.equal(second, 'a', 'the re-added key is handed out once after done()');
  q.done('a');
  t.equal(q.length, 0, 'and only once');
  q.shutDown();
});

t.test('several workers never process one key at the same time', async (t) => {
  const q = new WorkQueue();
  const active = new Set<string>();
  let overlaps = 0;
  const processed: string[] = [];
  let stop = false;
  const worker = async () => {
    for (;;) {
      const key = await q.get();
      if (key === undefined) return;
      if (active.has(key)) overlaps++;
      active.add(key);
      await sleep(Math.random() * 3);
      processed.push(key);
      active.delete(key);
      q.done(key);
    }
  };
  const workers = [worker(), worker(), worker(), worker()];
  const producer = (async () => {
    for (let i = 0; i < 300 && !stop; i++) {
      q.add(`k${i % 5}`);
      if (i % 7 === 0) await sleep(1);
    }
  })();
  await producer;
  stop = true;
  while (q.length > 0 || active.size > 0) await sleep(5);
  q.shutDown();
  await Promise.all(workers);
  t.equal(overlaps, 0, 'no key was held by two workers at once');
  t.ok(processed.length >= 5 && processed.length < 300, `dedup: ${processed.length} runs for 300 adds`);
  t.same(new Set(processed), new Set(['k0', 'k1', 'k2', 'k3', 'k4']), 'every key processed');
});

t.test('failures back off exponentially per key, capped; forget() resets', async (t) => {
  const q = new WorkQueue({ baseDelayMs: 20, maxDelayMs: 100 });
  t.same(
    [1, 2, 3, 4, 5, 6].map(() => q.addRateLimited('a')),
    [20, 40, 80, 100, 100, 100],
  );
  t.equal(q.failuresOf('a'), 6);
  t.equal(q.addRateLimited('b'), 20, 'per key');
  q.forget('a');
  t.equal(q.failuresOf('a'), 0);
  t.equal(q.addRateLimited('a'), 20, 'after forget() the backoff starts over');
  q.shutDown();
});

t.test('a rate-limited key comes back after its delay, not before', async (t) => {
  const q = new WorkQueue({ baseDelayMs: 80 });
  const started = Date.now();
  q.addRateLimited('a');
  t.equal(q.length, 0, 'not queued at once');
  const key = await q.get();
  const waited = Date.now() - started;
  t.equal(key, 'a');
  t.ok(waited >= 70, `came back after ${waited} ms (delay 80 ms)`);
  q.done('a');
  q.shutDown();
});

t.test('a failing key retried by a worker loop backs off, then succeeds and is forgotten', async (t) => {
  const q = new WorkQueue({ baseDelayMs: 10, maxDelayMs: 1000 });
  const attempts: number[] = [];
  let failuresLeft = 4;
  q.add('flaky');
  const started = Date.now();
  for (;;) {
    const key = (await q.get())!;
    attempts.push(Date.now() - started);
    if (failuresLeft-- > 0) {
      q.addRateLimited(key);
      q.done(key);
      continue;
    }
    q.forget(key);
    q.done(key);
    break;
  }
  t.equal(attempts.length, 5);
  const gaps = attempts.slice(1).map((a, i) => a - attempts[i]);
  // 10, 20, 40, 80 ms (timers fire no earlier than asked)
  t.ok(
    gaps.every((g, i) => g >= 10 * 2 ** i - 2),
    `gaps ${gaps.join(', ')} ms grow with the failures`,
  );
  t.equal(q.failuresOf('flaky'), 0);
  q.shutDown();
});

t.test('a key added again while its retry is pending is processed once', async (t) => {
  const q = new WorkQueue({ baseDelayMs: 30 });
  q.addRateLimited('a');
  q.add('a');
  t.equal(await q.get(), 'a');
  await sleep(50); // the retry timer fires while the key is held: queued for after done()
  t.equal(q.length, 0);
  q.done('a');
  t.equal(q.length, 1, 'the retry comes after done()');
  t.equal(await q.get(), 'a');
  q.done('a');
  t.equal(q.length, 0);
  q.shutDown();
});

t.test('shutDown wakes waiting workers, drops pending retries and refuses new keys', async (t) => {
  const q = new WorkQueue({ baseDelayMs: 10 });
  const waiting = q.get();
  q.addRateLimited('later');
  q.shutDown();
  t.equal(await waiting, undefined);
  t.equal(await q.get(), undefined);
  q.add('x');
  t.equal(q.length, 0);
  await sleep(30);
  t.equal(q.length, 0, 'the pending retry never fires');
});
