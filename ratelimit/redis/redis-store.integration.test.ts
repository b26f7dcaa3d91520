// RedisCounterStore and the service on real redis-server: URL forms, implicit pipelining batches,
// the active-connection health check, the startup wait, TLS hostname checks, per-second auth.
import t from 'tap';
import { Writable } from 'node:stream';
import pino from 'pino';
import { makeCerts } from '../../harness/tls.js';
import { startRedis } from '../../harness/redis/index.js';
import {
  CoalescingCounterStore,
  CounterRefusedError,
  MAX_OP_HITS,
  SATURATED_COUNT,
  type CounterOp,
} from '../counting/index.js';
import { batcherOptions } from '../counter-stack.js';
import { loadSettings, SettingsError } from '../settings/index.js';
import { descriptor, eventually, startTestApp } from '../test-support.js';
import { parseRedisTarget, RedisCounterStore, RedisDeployment } from './index.js';

const CONFIG = `
domain: d
descriptors:
  - key: s
    rate_limit: { unit: second, requests_per_unit: 100 }
  - key: m
    rate_limit: { unit: minute, requests_per_unit: 100 }
`;

const redisEnv = (env: Record<string, string>) =>
  loadSettings({ REDIS_SOCKET_TYPE: 'tcp', ...env }).redis.main;

t.test('REDIS_URL forms: single, unix, sentinel (master name first), cluster; bad forms named', async (t) => {
  t.same(parseRedisTarget(redisEnv({ REDIS_URL: 'h:1' }), 'REDIS_URL'), {
    type: 'single',
    host: 'h',
    port: 1,
  });
  t.same(parseRedisTarget(redisEnv({ REDIS_SOCKET_TYPE: 'unix', REDIS_URL: '/s.sock' }), 'REDIS_URL'), {
    type: 'single',
    path: '/s.sock',
  });
  t.same(
    parseRedisTarget(redisEnv({ REDIS_TYPE: 'sentinel', REDIS_URL: 'mymaster, a:1,b:2' }), 'REDIS_URL'),
    {
      type: 'sentinel',
      masterName: 'mymaster',
      sentinels: [
        { host: 'a', port: 1 },
        { host: 'b', port: 2 },
      ],
    },
  );
  t.same(parseRedisTarget(redisEnv({ REDIS_TYPE: 'cluster', REDIS_URL: 'a:1,b:2,[::1]:3' }), 'REDIS_URL'), {
    type: 'cluster',
    nodes: [
      { host: 'a', port: 1 },
      { host: 'b', port: 2 },
      { host: '::1', port: 3 },
    ],
  });
  t.throws(() => parseRedisTarget(redisEnv({ REDIS_TYPE: 'sentinel', REDIS_URL: 'mymaster' }), 'REDIS_URL'), {
    constructor: SettingsError,
    message: /REDIS_URL.*master name/,
  });
  t.throws(
    () => parseRedisTarget(redisEnv({ REDIS_URL: 'nohost' }), 'REDIS_PERSECOND_URL'),
    /REDIS_PERSECOND_URL/,
  );
});

const op = (key: string, hits = 1): CounterOp => ({ key, hits, expireSeconds: 60, perSecond: false });

t.test(
  "implicit pipelining: the window and limit are the batcher's flush; counts and TTLs as without",
  async (t) => {
    const redis = await startRedis();
    t.teardown(() => redis.stop());
    const count = async (env: Record<string, string>) => {
      const settings = loadSettings({ REDIS_SOCKET_TYPE: 'tcp', REDIS_URL: redis.url, ...env });
      const noTls = { caCert: '', clientCert: '', clientKey: '', skipHostnameVerification: false };
      const store = new RedisCounterStore({ settings: settings.redis.main, tlsFiles: noTls });
      await store.start(5000);
      let sends = 0;
      const send = store.send.bind(store);
      store.send = (batch) => (sends++, send(batch));
      // Unmerged (as with COALESCE_INCREMENTS=false), so every request is one op of its own.
      const batcher = new CoalescingCounterStore(store, { ...batcherOptions(settings), merge: false });
      const key = `pl${JSON.stringify(env)}`;
      const counts = await Promise.all(Array.from({ length: 20 }, () => batcher.increment([op(key)])));
      await batcher.close();
      return { sends, counts: counts.map((c) => c[0]).sort((a, b) => a - b) };
    };
    const off = await count({});
    t.equal(off.sends, 1, "window 0: the turn's 20 requests in one send");
    const on = await count({ REDIS_PIPELINE_WINDOW: '5ms' });
    t.equal(on.sends, 1, 'window 5ms: one send for 20 concurrent requests');
    const limited = await count({ REDIS_PIPELINE_WINDOW: '5ms', REDIS_PIPELINE_LIMIT: '8' });
    t.equal(limited.sends, 5, 'limit 8 commands: 40 commands in 5 sends');
    const noWindow = await count({ REDIS_PIPELINE_LIMIT: '8' });
    t.equal(noWindow.sends, 1, 'a limit without a window does nothing (a zero window disables pipelining)');
    const sub = await count({ REDIS_PIPELINE_WINDOW: '150us' });
    t.ok(sub.sends <= 2, `sub-millisecond window batches too (${sub.sends} sends)`);
    for (const r of [off, on, limited, noWindow, sub])
      t.same(
        r.counts,
        Array.from({ length: 20 }, (_, i) => i + 1),
      );
    // EXPIRE 60 was sent; on a loaded machine a second may pass before the TTL is read.
    const ttl = (env: object) => redis.client().ttl(`pl${JSON.stringify(env)}`);
    const without = await ttl({});
    t.ok(without > 55 && without <= 60, `EXPIRE sent without a window (ttl ${without})`);
    const within = await ttl({ REDIS_PIPELINE_WINDOW: '5ms' });
    t.ok(within > 55 && within <= 60, `EXPIRE sent in a window (ttl ${within})`);
  },
);

t.test(
  'REDIS_HEALTH_CHECK_ACTIVE_CONNECTION: unhealthy while redis is down, healthy when back',
  async (t) => {
    const redis = await startRedis();
    t.teardown(() => redis.stop());
    const svc = await startTestApp({
      files: { 'd.yaml': CONFIG },
      env: {
        BACKEND_TYPE: 'redis',
        REDIS_SOCKET_TYPE: 'tcp',
        REDIS_URL: redis.url,
        REDIS_HEALTH_CHECK_ACTIVE_CONNECTION: 'true',
      },
    });
    t.teardown(() => svc.close());
    const health = async () => (await fetch(`${svc.httpUrl}/healthcheck`)).status;
    t.equal(await health(), 200);
    await redis.kill();
    const downAt = Date.now();
    while ((await health()) !== 500 && Date.now() - downAt < 5000)
      await new Promise((r) => setTimeout(r, 50));
    t.equal(await health(), 500, `unhealthy ${Date.now() - downAt} ms after the kill`);
    await t.rejects(svc.call({ domain: 'd', descriptors: [descriptor(['m', 'x'])] }), { code: 14 });
    t.ok(
      svc.app.stats.snapshot()['ratelimit.service.call.should_rate_limit.redis_error'] >= 1,
      'redis_error',
    );
    await redis.restart();
    const upAt = Date.now();
    while ((await health()) !== 200 && Date.now() - upAt < 10_000)
      await new Promise((r) => setTimeout(r, 50));
    t.equal(await health(), 200, `healthy ${Date.now() - upAt} ms after the restart`);
    const r = await svc.call({ domain: 'd', descriptors: [descriptor(['m', 'x'])] });
    t.equal(r.statuses[0].limitRemaining, 99, 'counting again (the restarted redis is empty)');
  },
);

t.test('startup waits for redis, says so in the log, and opens no port before it answers', async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  await redis.kill();
  const lines: string[] = [];
  const logger = pino(
    { level: 'warn' },
    new Writable({
      write(chunk, _enc, cb) {
        lines.push(String(chunk));
        cb();
      },
    }),
  );
  const starting = startTestApp({
    files: { 'd.yaml': CONFIG },
    env: { BACKEND_TYPE: 'redis', REDIS_SOCKET_TYPE: 'tcp', REDIS_URL: redis.url },
    appOptions: { logger },
  });
  let started = false;
  void starting.then(() => (started = true));
  const until = Date.now() + 5000;
  while (!lines.some((l) => l.includes('waiting for redis')) && Date.now() < until) {
    await new Promise((r) => setTimeout(r, 50));
  }
  t.ok(
    lines.some((l) => l.includes(`waiting for redis at REDIS_URL=${redis.url}`)),
    'logs what it waits for',
  );
  await new Promise((r) => setTimeout(r, 300));
  t.equal(started, false, 'not started while redis is down');
  await redis.restart();
  const svc = await starting;
  t.teardown(() => svc.close());
  const r = await svc.call({ domain: 'd', descriptors: [descriptor(['m', 'y'])] });
  t.equal(r.statuses[0].limitRemaining, 99);
});

t.test('TLS: the server name is checked unless REDIS_TLS_SKIP_HOSTNAME_VERIFICATION', async (t) => {
  // The certificate names 127.0.0.1 only; the service dials the same server as 'localhost'.
  const certs = await makeCerts(undefined, { serverNames: ['127.0.0.1'] });
  t.teardown(() => certs.remove());
  const redis = await startRedis({ tls: { certs, authClients: 'no' } });
  t.teardown(() => redis.stop());
  const env = {
    REDIS_URL: `localhost:${redis.port}`,
    REDIS_TLS: 'true',
    REDIS_TLS_CACERT: certs.caPath,
    REDIS_TIMEOUT: '1s',
  };
  const tlsFiles = (skip: boolean) => ({
    caCert: certs.caPath,
    clientCert: '',
    clientKey: '',
    skipHostnameVerification: skip,
  });
  const strict = new RedisCounterStore({ settings: redisEnv(env), tlsFiles: tlsFiles(false) });
  await t.rejects(strict.start(1500), /could not connect to redis.*(altnames|hostname|IP)/i);
  await strict.close();
  const skip = new RedisCounterStore({ settings: redisEnv(env), tlsFiles: tlsFiles(true) });
  await skip.start(5000);
  t.same(await skip.increment([op('tls-skip')]), [1]);
  await skip.close();
});

t.test(
  'REDIS_PERSECOND_AUTH and REDIS_AUTH are separate: ACL user on one, password on the other',
  async (t) => {
    const [main, perSecond] = await Promise.all([
      startRedis({ users: [{ name: 'rl', password: 'main-pass' }] }),
      startRedis({ password: 'ps-pass' }),
    ]);
    t.teardown(() => Promise.all([main.stop(), perSecond.stop()]));
    const svc = await startTestApp({
      files: { 'd.yaml': CONFIG },
      env: {
        BACKEND_TYPE: 'redis',
        REDIS_SOCKET_TYPE: 'tcp',
        REDIS_URL: main.url,
        REDIS_AUTH: 'rl:main-pass',
        REDIS_PERSECOND: 'true',
        REDIS_PERSECOND_SOCKET_TYPE: 'tcp',
        REDIS_PERSECOND_URL: perSecond.url,
        REDIS_PERSECOND_AUTH: 'ps-pass',
        REDIS_PERSECOND_PIPELINE_WINDOW: '1ms',
      },
    });
    t.teardown(() => svc.close());
    const r = await svc.call({ domain: 'd', descriptors: [descriptor(['s', 'a']), descriptor(['m', 'a'])] });
    t.same(
      r.statuses.map((s) => s.limitRemaining),
      [99, 99],
    );
    t.same(
      await perSecond
        .client()
        .keys('d_s_a_*')
        .then((k) => k.length),
      1,
      'second key on the per-second one',
    );
    t.same(
      await main
        .client()
        .keys('d_m_a_*')
        .then((k) => k.length),
      1,
      'minute key on the main one',
    );
    t.same(await main.client().keys('d_s_*'), [], 'no second key on the main one');
    // The per-second instance down fails only requests that need it.
    await perSecond.kill();
    const minuteOnly = await svc.call({ domain: 'd', descriptors: [descriptor(['m', 'b'])] });
    t.equal(minuteOnly.overallCode, 'OK', 'minute limits keep working');
    await t.rejects(svc.call({ domain: 'd', descriptors: [descriptor(['s', 'b'])] }), { code: 14 });
  },
);

t.test(
  'REDIS_TIMEOUT: a hung redis fails the decision within the timeout; it resumes when redis does',
  async (t) => {
    const redis = await startRedis();
    let stopped = false;
    t.teardown(async () => {
      if (stopped) process.kill(redis.pid, 'SIGCONT');
      await redis.stop();
    });
    const svc = await startTestApp({
      files: { 'd.yaml': CONFIG },
      env: { BACKEND_TYPE: 'redis', REDIS_SOCKET_TYPE: 'tcp', REDIS_URL: redis.url, REDIS_TIMEOUT: '500ms' },
    });
    t.teardown(() => svc.close());
    const req = { domain: 'd', descriptors: [descriptor(['m', 'hung']), descriptor(['s', 'hung'])] };
    t.equal((await svc.call(req)).overallCode, 'OK');
    process.kill(redis.pid, 'SIGSTOP'); // the connection stays open, nothing answers
    stopped = true;
    const started = Date.now();
    const err = (await svc.call(req).catch((e: unknown) => e)) as { code?: number; details?: string };
    const took = Date.now() - started;
    t.equal(err.code, 14, 'UNAVAILABLE (a cache error)');
    t.match(err.details, /timed out after 500 ms/);
    t.ok(took >= 450 && took < 2000, `failed after ${took} ms (timeout 500 ms, swept every 50 ms)`);
    process.kill(redis.pid, 'SIGCONT');
    stopped = false;
    await eventually(
      async () =>
        (await svc
          .call(req)
          .then((r) => r.overallCode === 'OK')
          .catch(() => false)) === true,
      5000,
      'decisions again',
    );
    t.pass('decisions resume');
  },
);

for (const env of <Record<string, string>[]>[
  { REDIS_DIRECT_COUNTING: 'true' },
  { REDIS_DIRECT_COUNTING: 'false' },
  { REDIS_PIPELINE_WINDOW: '2ms' },
]) {
  t.test(
    `an error reply fails only its own op; an overflow is that key saturated (${JSON.stringify(env)})`,
    async (t) => {
      const redis = await startRedis();
      t.teardown(() => redis.stop());
      const admin = redis.client();
      t.teardown(() => admin.disconnect());
      await admin.set('text', 'abc');
      await admin.set('near', '9223372036854775000');
      const noTls = { caCert: '', clientCert: '', clientKey: '', skipHostnameVerification: false };
      const d = new RedisDeployment('REDIS', redisEnv({ REDIS_URL: redis.url, ...env }), noTls);
      t.teardown(() => d.close());
      await d.connect(5000);
      const results = await d.incrementEach([op('a'), op('text'), op('near', 5000), op('b', 2 ** 60)]);
      t.equal(results[0], 1, 'the op before it counted');
      t.ok(results[1] instanceof CounterRefusedError, `the refused op: ${String(results[1])}`);
      t.equal(results[2], SATURATED_COUNT, 'INCRBY past 2^63 - 1: saturated, over any limit');
      t.equal(results[3], MAX_OP_HITS, 'hits past 2^32 sent saturated');
      t.equal(await admin.get('b'), String(MAX_OP_HITS));
      t.equal(await admin.get('a'), '1', 'counted once');
    },
  );
}
