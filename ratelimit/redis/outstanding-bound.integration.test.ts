// REDIS_MAX_OUTSTANDING_COMMANDS on a real redis-server stopped with SIGSTOP (a hung server: the
// connection stays open, nothing is answered). Commands waiting on one connection never pass the bound;
// a call that would pass it fails at once with CacheBusyError (a cache error: its failure mode answers
// it) and is never sent, so Redis counts only what was sent; the circuit breaker counts the refusals as
// nothing; a timed-out call keeps its place until its reply arrives (ioredis) or the connection is
// dropped (the direct connection, after twice REDIS_TIMEOUT); and after SIGCONT the waiting calls are
// answered and new ones are sent again. On both paths: the direct counting connection and ioredis.
import t from 'tap';
import { startRedis, respCommand } from '../../harness/redis/index.js';
import { CacheBusyError, CacheError, CircuitBreakerStore, type CounterOp } from '../counting/index.js';
import { loadSettings } from '../settings/index.js';
import { RedisCounterStore } from './redis-store.js';
import { descriptor, eventually, startTestApp } from '../test-support.js';

const noTls = { caCert: '', clientCert: '', clientKey: '', skipHostnameVerification: false };
const MAX = 40;
const op = (key: string): CounterOp => ({ key, hits: 1, expireSeconds: 60, perSecond: false });

/** A promise's outcome once it settles, readable synchronously meanwhile. */
function track<T>(p: Promise<T>) {
  const s: { done: boolean; value?: T; error?: unknown } = { done: false };
  p.then(
    (v) => Object.assign(s, { done: true, value: v }),
    (e: unknown) => Object.assign(s, { done: true, error: e }),
  );
  return s;
}

const flush = () => new Promise((r) => setImmediate(r));

for (const direct of [true, false]) {
  t.test(
    `the bound holds on a hung Redis and lets go when it answers (direct counting ${direct})`,
    async (t) => {
      const redis = await startRedis();
      t.teardown(() => redis.stop());
      const settings = loadSettings({
        REDIS_SOCKET_TYPE: 'tcp',
        REDIS_URL: redis.url,
        REDIS_DIRECT_COUNTING: String(direct),
        // No deadline: every call sent waits for its reply, so what is outstanding is exactly what was sent.
        REDIS_TIMEOUT: '0',
        REDIS_MAX_OUTSTANDING_COMMANDS: String(MAX),
      }).redis.main;
      const store = new CircuitBreakerStore(new RedisCounterStore({ settings, tlsFiles: noTls }), {
        enabled: true,
        failureThreshold: 1,
        probeIntervalMs: 60_000,
      });
      t.teardown(() => store.close());
      await store.start(5000);
      const key = `bound${direct}`;
      t.same(await store.incrementEach([op(key)]), [1], 'counted before the stop');

      process.kill(redis.pid, 'SIGSTOP');
      let stopped = true;
      t.teardown(() => {
        if (stopped) process.kill(redis.pid, 'SIGCONT');
      });
      // 100 calls of one op each (INCRBY + EXPIRE: 2 commands): MAX / 2 fit.
      const calls = Array.from({ length: 100 }, () => track(store.incrementEach([op(key)])));
      await flush();
      await flush();
      const refused = calls.filter((c) => c.done);
      t.equal(calls.length - refused.length, MAX / 2, `${MAX / 2} calls (${MAX} commands) wait on Redis`);
      t.ok(
        refused.every((c) => (c.value as unknown[])[0] instanceof CacheBusyError),
        'every other call failed at once with CacheBusyError',
      );
      t.ok(CacheBusyError.prototype instanceof CacheError, 'a cache error: the failure mode answers it');
      const later = await store.incrementEach([op(key)]);
      t.ok(later[0] instanceof CacheBusyError, 'a new call while Redis is stopped fails at once');
      t.same(store.states(), { REDIS: 'closed' }, 'refusals are no failure of the shard');

      process.kill(redis.pid, 'SIGCONT');
      stopped = false;
      await eventually(() => calls.every((c) => c.done), 10_000, 'the waiting calls answered');
      const counts = calls.filter((c) => !refused.includes(c)).map((c) => (c.value as number[])[0]);
      t.same(
        counts.sort((a, b) => a - b),
        Array.from({ length: MAX / 2 }, (_, i) => i + 2),
        'the waiting calls counted in order',
      );
      t.same(await store.incrementEach([op(key)]), [MAX / 2 + 2], 'new calls are sent again');
      t.equal(
        await respCommand({ port: Number(redis.url.split(':')[1]) }, 'GET', key),
        String(MAX / 2 + 2),
        'Redis counted exactly the calls sent',
      );
    },
  );
}

t.test('a timed-out call keeps its place until its reply arrives (ioredis)', async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const settings = loadSettings({
    REDIS_SOCKET_TYPE: 'tcp',
    REDIS_URL: redis.url,
    REDIS_DIRECT_COUNTING: 'false',
    REDIS_TIMEOUT: '200ms',
    REDIS_MAX_OUTSTANDING_COMMANDS: String(MAX),
  }).redis.main;
  const store = new RedisCounterStore({ settings, tlsFiles: noTls });
  t.teardown(() => store.close());
  await store.start(5000);
  process.kill(redis.pid, 'SIGSTOP');
  let stopped = true;
  t.teardown(() => {
    if (stopped) process.kill(redis.pid, 'SIGCONT');
  });
  const sent = await Promise.all(Array.from({ length: MAX / 2 }, () => store.incrementEach([op('late')])));
  t.ok(
    sent.every((r) => r[0] instanceof CacheError && !(r[0] instanceof CacheBusyError)),
    'the calls sent time out (REDIS_TIMEOUT)',
  );
  t.equal(store.main.client.status, 'ready', 'the connection is still up');
  const after = await store.incrementEach([op('late')]);
  t.ok(after[0] instanceof CacheBusyError, 'their commands still count: a new call is not sent');
  process.kill(redis.pid, 'SIGCONT');
  stopped = false;
  // Their replies arrive (and are dropped): the bound frees, new calls are counted after them.
  await eventually(
    async () => {
      const r = await store.incrementEach([op('late')]);
      return typeof r[0] === 'number';
    },
    10_000,
    'a call counted again',
  );
  t.equal(
    await respCommand({ port: Number(redis.url.split(':')[1]) }, 'GET', 'late'),
    String(MAX / 2 + 1),
    'the timed-out increments ran when Redis resumed; the refused one never did',
  );
});

t.test('a timed-out call on the direct connection counts until the connection is dropped', async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const settings = loadSettings({
    REDIS_SOCKET_TYPE: 'tcp',
    REDIS_URL: redis.url,
    REDIS_DIRECT_COUNTING: 'true',
    REDIS_TIMEOUT: '200ms',
    REDIS_MAX_OUTSTANDING_COMMANDS: String(MAX),
  }).redis.main;
  const store = new RedisCounterStore({ settings, tlsFiles: noTls });
  t.teardown(() => store.close());
  await store.start(5000);
  t.same(await store.incrementEach([op('drop')]), [1], 'counted on the direct connection');
  process.kill(redis.pid, 'SIGSTOP');
  let stopped = true;
  t.teardown(() => {
    if (stopped) process.kill(redis.pid, 'SIGCONT');
  });
  const sent = await Promise.all(Array.from({ length: MAX / 2 }, () => store.incrementEach([op('drop')])));
  t.ok(
    sent.every((r) => r[0] instanceof CacheError && !(r[0] instanceof CacheBusyError)),
    'the calls sent time out (REDIS_TIMEOUT)',
  );
  // Refused while their commands wait; once the oldest has waited twice REDIS_TIMEOUT, the next call
  // drops the connection, and what waited on it no longer counts.
  let busy = 0;
  await eventually(
    async () => {
      const r = (await store.incrementEach([op('drop')]))[0];
      if (r instanceof CacheBusyError) busy++;
      return r instanceof CacheError && /connection dropped/.test(r.message);
    },
    10_000,
    'the direct connection dropped',
  );
  t.comment(`${busy} calls refused before the drop`);
  process.kill(redis.pid, 'SIGCONT');
  stopped = false;
  await eventually(
    async () => typeof (await store.incrementEach([op('drop')]))[0] === 'number',
    10_000,
    'a call counted again',
  );
  t.pass('counting again after SIGCONT');
});

t.test('the service answers refused calls from the failure mode, and counts again after', async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const svc = await startTestApp({
    files: {
      'd.yaml':
        'domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: minute, requests_per_unit: 100 }\n',
    },
    env: {
      BACKEND_TYPE: 'redis',
      REDIS_SOCKET_TYPE: 'tcp',
      REDIS_URL: redis.url,
      REDIS_TIMEOUT: '0',
      REDIS_MAX_OUTSTANDING_COMMANDS: '4',
      CACHE_FAILURE_MODE: 'allow',
    },
  });
  t.teardown(() => svc.close());
  const call = (v: string) => svc.call({ domain: 'd', descriptors: [descriptor(['k', v])] });
  t.equal((await call('a')).statuses[0]!.limitRemaining, 99, 'counted in Redis');
  process.kill(redis.pid, 'SIGSTOP');
  let stopped = true;
  t.teardown(() => {
    if (stopped) process.kill(redis.pid, 'SIGCONT');
  });
  // Two calls on other keys fill the bound (2 commands each) and wait. A call made in the same turn
  // joins their Redis call (the coalescing layer) and waits with them: such a call is left behind.
  const waiting = [track(call('w1')), track(call('w2'))];
  let n = 0;
  await eventually(async () => {
    const r = track(call(`probe${n++}`));
    await eventually(() => r.done, 500).catch(() => undefined);
    return r.done && (r.value as { overallCode: string }).overallCode === 'OK';
  }, 10_000);
  t.ok(
    waiting.every((w) => !w.done),
    'the calls sent wait for Redis',
  );
  for (let i = 0; i < 20; i++)
    t.equal((await call(`r${i}`)).statuses[0]!.limitRemaining, 100, `refused ${i}: allow`);
  t.ok(
    svc.app.stats.snapshot()['ratelimit.service.failure_mode.allow']! >= 21,
    'answered by the failure mode (failure_mode.allow)',
  );
  process.kill(redis.pid, 'SIGCONT');
  stopped = false;
  await eventually(() => waiting.every((w) => w.done), 10_000, 'the waiting calls answered');
  t.same(
    waiting.map((w) => (w.value as { statuses: { limitRemaining: number }[] }).statuses[0]!.limitRemaining),
    [99, 99],
    'the waiting calls were counted',
  );
  t.equal((await call('a')).statuses[0]!.limitRemaining, 98, 'counted in Redis again');
});
