// The direct counting connection (direct-counter.ts) on real redis-server: it is used (a second client
// connection sends the INCRBY/EXPIRE pairs), counts exactly under concurrency with any key bytes, keeps
// replies aligned after an error reply, follows a killed connection and a hung server without hanging,
// authenticates as ioredis does, and REDIS_DIRECT_COUNTING=false turns it off.
import t, { type Test } from 'tap';
import type { Redis } from 'ioredis';
import { startRedis, type RedisServer } from '../../harness/redis/index.js';
import { CacheError, CounterRefusedError, type CounterOp, type LimitCheck } from '../counting/index.js';
import { loadSettings } from '../settings/index.js';
import { eventually } from '../test-support.js';
import { RedisDeployment } from './index.js';

const noTls = { caCert: '', clientCert: '', clientKey: '', skipHostnameVerification: false };
const op = (key: string, hits = 1, expireSeconds = 60): CounterOp => ({
  key,
  hits,
  expireSeconds,
  perSecond: false,
});

/** One client per server for the test's own questions, so they do not add connections. */
const admins = new WeakMap<RedisServer, Redis>();
function admin(redis: RedisServer): Redis {
  let c = admins.get(redis);
  if (!c) admins.set(redis, (c = redis.client()));
  return c;
}

async function deployment(
  t: Test,
  redis: RedisServer,
  env: Record<string, string> = {},
): Promise<RedisDeployment> {
  const s = loadSettings({ REDIS_SOCKET_TYPE: 'tcp', REDIS_URL: redis.url, ...env }).redis.main;
  const d = new RedisDeployment('REDIS', s, noTls);
  t.teardown(() => d.close());
  await d.connect(5000);
  return d;
}

/**
 * Which connection ran `cmd` for `act`: ioredis' own is marked by a CLIENT ID sent through it, then `act`
 * runs, and CLIENT LIST tells which connection's last command was `cmd`.
 */
async function ranOn(
  d: RedisDeployment,
  redis: RedisServer,
  act: () => Promise<unknown>,
  cmd: string,
): Promise<'direct' | 'ioredis' | 'none'> {
  const id = String(await d.client.call('CLIENT', 'ID'));
  await act();
  const list = (await admin(redis).call('CLIENT', 'LIST')) as string;
  const conns = list
    .split('\n')
    .map((l) => ({ id: /^id=(\d+)/.exec(l)?.[1], cmd: / cmd=(\S+)/.exec(l)?.[1] }));
  if (conns.find((c) => c.id === id)?.cmd === cmd) return 'ioredis';
  return conns.some((c) => c.id !== id && c.cmd === cmd) ? 'direct' : 'none';
}

/** Which connection the deployment counts a fixed window on. */
const countedOn = (d: RedisDeployment, redis: RedisServer) =>
  ranOn(d, redis, () => d.increment([op('countedOn')]), 'expire');

async function commandCalls(redis: RedisServer, name: string): Promise<number> {
  const info = await admin(redis).info('commandstats');
  const m = new RegExp(`cmdstat_${name}:calls=(\\d+)`).exec(info);
  return m ? Number(m[1]) : 0;
}

t.test('counts exactly on a connection of its own, with the same commands as the ioredis path', async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const d = await deployment(t, redis);
  const clients = async () => Number(/connected_clients:(\d+)/.exec(await admin(redis).info('clients'))![1]);
  const clientsBefore = await clients();
  // 200 concurrent requests of 8 descriptors each over 4 keys, hits 1..3, keys with any bytes.
  const keys = ['plain', 'ümlaut_ключ', 'with\r\nnewline', 'space key'];
  const expected = new Map<string, number>();
  const results = await Promise.all(
    Array.from({ length: 200 }, (_, i) => {
      const ops = Array.from({ length: 8 }, (_, j) => op(keys[(i + j) % 4]!, 1 + ((i + j) % 3)));
      for (const o of ops) expected.set(o.key, (expected.get(o.key) ?? 0) + o.hits);
      return d.increment(ops);
    }),
  );
  t.equal(results.length, 200);
  for (const r of results) t.equal(r.length, 8);
  const probe = admin(redis);
  for (const [k, v] of expected) {
    t.equal(await probe.get(k), String(v), `count of ${JSON.stringify(k)}`);
    // EXPIRE 60 was sent; on a loaded machine a second may pass before the probe reads it.
    const ttl = await probe.ttl(k);
    t.ok(ttl > 55 && ttl <= 60, `EXPIRE sent (ttl ${ttl})`);
  }
  // Every count a request saw is one the key passed through: the highest is the total.
  for (const k of keys) {
    const seen = results.flatMap((r, i) => r.filter((_, j) => keys[(i + j) % 4] === k));
    t.equal(Math.max(...seen), expected.get(k), `the last increment of ${JSON.stringify(k)} saw the total`);
  }
  t.equal(await commandCalls(redis, 'incrby'), 1600, 'one INCRBY per descriptor');
  t.equal(await commandCalls(redis, 'expire'), 1600, 'one EXPIRE per descriptor');
  const clientsAfter = await clients();
  t.equal(clientsAfter, clientsBefore + 1, 'a connection of its own');
  t.equal(await countedOn(d, redis), 'direct');
});

t.test('REDIS_DIRECT_COUNTING=false: ioredis sends the commands', async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const d = await deployment(t, redis, { REDIS_DIRECT_COUNTING: 'false' });
  t.same(await d.increment([op('k', 2)]), [2]);
  t.equal(await countedOn(d, redis), 'ioredis');
});

t.test('an error reply fails its own request only; the others stay aligned', async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const d = await deployment(t, redis);
  await admin(redis).set('text', 'abc');
  const [before, bad, after] = await Promise.allSettled([
    d.increment([op('a'), op('b')]),
    d.increment([op('a'), op('text'), op('b')]),
    d.increment([op('a'), op('b')]),
  ]);
  t.same(before, { status: 'fulfilled', value: [1, 1] });
  t.equal(bad.status, 'rejected');
  const err = (bad as PromiseRejectedResult).reason as Error;
  t.ok(err instanceof CacheError, 'a cache error, never the transport error');
  t.match(err.message, /INCRBY failed: ERR value is not an integer/);
  t.ok(err instanceof CounterRefusedError, "the op's own refusal, not a shard failure");
  t.same(
    after,
    { status: 'fulfilled', value: [3, 3] },
    'the bad request counted its good keys, as Redis ran them',
  );
});

t.test('a killed connection fails what was in flight, then counting resumes', async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const d = await deployment(t, redis);
  t.same(await d.increment([op('k')]), [1]);
  t.equal(await countedOn(d, redis), 'direct');
  await admin(redis).call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
  // ioredis reconnects by itself; every request is answered (a count or a CacheError), none hangs.
  await eventually(
    async () => {
      const r = await d.increment([op('k')]).catch((e: unknown) => e);
      if (r instanceof Error) {
        t.ok(r instanceof CacheError, `a cache error while reconnecting: ${r.message}`);
        return false;
      }
      return true;
    },
    15_000,
    'counting after CLIENT KILL',
  );
  // And the direct connection comes back (after a second on ioredis).
  await eventually(
    async () => {
      await d.increment([op('k')]);
      return (await countedOn(d, redis)) === 'direct';
    },
    15_000,
    'a direct connection again',
  );
  const total = Number(await admin(redis).get('k'));
  t.ok(total >= 3, `counting went on (${total})`);
});

t.test('a hung Redis: requests end with a cache error at REDIS_TIMEOUT, and counting resumes', async (t) => {
  const redis = await startRedis();
  t.teardown(async () => {
    process.kill(redis.pid, 'SIGCONT');
    await redis.stop();
  });
  const d = await deployment(t, redis, { REDIS_TIMEOUT: '300ms' });
  t.same(await d.increment([op('k')]), [1]);
  process.kill(redis.pid, 'SIGSTOP');
  const started = Date.now();
  const r = await d.increment([op('k')]).catch((e: unknown) => e);
  t.ok(r instanceof CacheError, 'a cache error');
  t.match((r as Error).message, /timed out after 300 ms/);
  t.ok(Date.now() - started < 3000, 'no hang');
  process.kill(redis.pid, 'SIGCONT');
  await eventually(
    async () => (await d.increment([op('k')]).catch(() => null)) !== null,
    15_000,
    'counting after SIGCONT',
  );
});

t.test('REDIS_AUTH: password and ACL user, as ioredis authenticates', async (t) => {
  const withPassword = await startRedis({ password: 'sëcret' });
  t.teardown(() => withPassword.stop());
  const d1 = await deployment(t, withPassword, { REDIS_AUTH: 'sëcret' });
  t.same(await d1.increment([op('p', 2)]), [2]);
  t.equal(await countedOn(d1, withPassword), 'direct');

  const withUser = await startRedis({ users: [{ name: 'rl', password: 'pw' }] });
  t.teardown(() => withUser.stop());
  const d2 = await deployment(t, withUser, { REDIS_AUTH: 'rl:pw' });
  t.same(await d2.increment([op('u', 3)]), [3]);
  t.equal(await countedOn(d2, withUser), 'direct');
});

t.test(
  'a master demoted to replica (READONLY): a cache error, no crash; counting resumes when it is a master again',
  async (t) => {
    const [a, b] = await Promise.all([startRedis(), startRedis()]);
    t.teardown(() => Promise.all([a.stop(), b.stop()]));
    const d = await deployment(t, a, { REDIS_TIMEOUT: '2s' });
    t.same(await d.increment([op('k')]), [1]);
    await admin(a).call('REPLICAOF', b.host, String(b.port));
    const r = await d.increment([op('k')]).catch((e: unknown) => e);
    t.ok(r instanceof CacheError, `a cache error: ${(r as Error).message}`);
    await admin(a).call('REPLICAOF', 'NO', 'ONE');
    await eventually(
      async () => (await d.increment([op('k')]).catch(() => null)) !== null,
      15_000,
      'counting on the master again',
    );
    await eventually(async () => (await countedOn(d, a)) === 'direct', 15_000, 'the direct connection again');
  },
);

t.test(
  'limit script checks: EVALSHA on the direct connection, the verdicts of the ioredis path; NOSCRIPT resent',
  async (t) => {
    const redis = await startRedis();
    t.teardown(() => redis.stop());
    const direct = await deployment(t, redis);
    const viaIoredis = await deployment(t, redis, { REDIS_DIRECT_COUNTING: 'false' });
    const now = Date.now();
    // Fixed window, sliding window and token bucket, limit 3 per minute (burst 3), keys per deployment.
    const checks = (p: string): LimitCheck[] => [
      { keys: [`{${p}}fw`], args: [now, 1, 0, 3, 60_000, 0], perSecond: false },
      { keys: [`{${p}}sw:c`, `{${p}}sw:p`], args: [now, 1, 1, 3, 60_000, 0], perSecond: false },
      { keys: [`{${p}}tb`], args: [now, 1, 2, 3, 60_000, 3], perSecond: false },
    ];
    // The first call meets NOSCRIPT (nothing loaded yet) and is resent through ioredis, which loads it.
    for (let i = 0; i < 5; i++) {
      const [a, b] = await Promise.all([direct.evaluate(checks('a')), viaIoredis.evaluate(checks('b'))]);
      t.same(a, b, `call ${i + 1}: the same verdicts`);
      t.equal(a[0]![0], i < 3 ? 0 : 1, i < 3 ? 'admitted' : 'rejected by the limit');
    }
    t.equal(await ranOn(direct, redis, () => direct.evaluate(checks('e')), 'evalsha'), 'direct');
    t.equal(await ranOn(viaIoredis, redis, () => viaIoredis.evaluate(checks('f')), 'evalsha'), 'ioredis');
    await admin(redis).call('SCRIPT', 'FLUSH');
    const [c, d] = await Promise.all([direct.evaluate(checks('c')), viaIoredis.evaluate(checks('d'))]);
    t.same(c, d, 'decided after SCRIPT FLUSH (NOSCRIPT resent through ioredis)');
    t.equal(c[0]![0], 0);
    t.equal(
      await ranOn(direct, redis, () => direct.evaluate(checks('g')), 'evalsha'),
      'direct',
      'and direct again',
    );
  },
);
