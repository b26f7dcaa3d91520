// counters get|reset: settings the service reads (REDIS_PERSECOND routing, REDIS_TLS) and clear errors.
import { readFileSync } from 'node:fs';
import t from 'tap';
import { startRedis } from '../../harness/redis/index.js';
import { roomInWindow, startTestApp } from '../../ratelimit/test-support.js';
import {
  COUNTERS_CONFIG as CONFIG,
  COUNTERS_DESCRIPTOR as DESCRIPTOR,
  hitCounter as hit,
  readings,
  runInProcess,
} from './testing.js';

t.test(
  'a descriptor without a counter, a wrong backend and an unreachable Redis are clear errors',
  async (t) => {
    const base = ['counters', 'get', '--config', CONFIG, '--domain', 'example'];
    const none = await runInProcess([...base, '--descriptor', 'path=/api,user=admin', '--timeout', '1'], {
      REDIS_SOCKET_TYPE: 'tcp',
      REDIS_URL: '127.0.0.1:1',
    });
    t.equal(none.code, 2, 'Redis is still required');
    const memory = await runInProcess([...base, '--descriptor', DESCRIPTOR], { BACKEND_TYPE: 'memory' });
    t.equal(memory.code, 2);
    t.match(memory.stderr, /BACKEND_TYPE is memory/);
    const down = await runInProcess([...base, '--descriptor', DESCRIPTOR, '--timeout', '1'], {
      REDIS_SOCKET_TYPE: 'tcp',
      REDIS_URL: '127.0.0.1:1',
    });
    t.equal(down.code, 2);
    t.match(down.stderr, /^ratelimit-config counters: cannot reach Redis at 127\.0\.0\.1:1 within 1 s/);
    // REDIS_SOCKET_TYPE left at the service's default (unix) with a host:port address: the message says so.
    const unix = await runInProcess([...base, '--descriptor', DESCRIPTOR, '--timeout', '1'], {
      REDIS_URL: '127.0.0.1:1',
    });
    t.equal(unix.code, 2);
    t.match(
      unix.stderr,
      /REDIS_SOCKET_TYPE=unix, the service's default: .*for host:port set REDIS_SOCKET_TYPE=tcp\)\n$/,
    );
    const noConfig = await runInProcess([
      'counters',
      'get',
      '--domain',
      'example',
      '--descriptor',
      DESCRIPTOR,
    ]);
    t.equal(noConfig.code, 2);
    t.match(noConfig.stderr, /a config is required: its paths or --config/);
  },
);

t.test(
  'REDIS_PERSECOND: a second-unit counter is read from the per-second deployment, as the service routes it',
  async (t) => {
    const [main, perSecond] = await Promise.all([startRedis(), startRedis()]);
    t.teardown(() => Promise.all([main.stop(), perSecond.stop()]));
    const env = {
      REDIS_SOCKET_TYPE: 'tcp',
      REDIS_URL: main.url,
      REDIS_PERSECOND: 'true',
      REDIS_PERSECOND_SOCKET_TYPE: 'tcp',
      REDIS_PERSECOND_URL: perSecond.url,
    };
    const app = await startTestApp({
      env: { BACKEND_TYPE: 'redis', ...env },
      files: { 'example.yaml': readFileSync(CONFIG, 'utf8') },
    });
    t.teardown(() => app.close());
    // path=/api,user=bob: 10 per second. Decide and read in the same second (retry across a boundary).
    const request = {
      domain: 'example',
      descriptors: [
        {
          entries: [
            { key: 'path', value: '/api' },
            { key: 'user', value: 'bob' },
          ],
        },
      ],
    };
    const args = ['counters', 'get', '--format', 'json', '--config', CONFIG, '--domain', 'example'];
    // A call that crossed into the next second counted there, so a retry first waits for a second no
    // earlier attempt touched.
    let untouched = 0;
    for (let attempt = 0; ; attempt++) {
      while (Math.floor(Date.now() / 1000) < untouched) await roomInWindow(1, 1000);
      await roomInWindow(1, 700);
      const second = Math.floor(Date.now() / 1000);
      const s = (await app.call(request)).statuses[0]!;
      const [got] = readings(await runInProcess([...args, '--descriptor', 'path=/api,user=bob'], env));
      const end = Math.floor(Date.now() / 1000);
      if (end !== second) {
        untouched = end + 1;
        if (attempt < 10) continue;
        throw new Error('could not read within one second');
      }
      t.match(got, {
        count: 1,
        limit: 10,
        unit: 'SECOND',
        deployment: 'REDIS_PERSECOND',
        remaining: s.limitRemaining,
      });
      t.equal(await perSecond.client().get(got!.key), '1', 'the key is in the per-second deployment');
      t.equal(await main.client().get(got!.key), null, 'and not in the main one');
      break;
    }
    const [minute] = readings(await runInProcess([...args, '--descriptor', DESCRIPTOR], env));
    t.equal(minute!.deployment, 'REDIS', 'other units stay in the main deployment');
  },
);

t.test(
  'REDIS_TLS with a client certificate: the service and the command line read the same TLS settings',
  async (t) => {
    const redis = await startRedis({ tls: true });
    t.teardown(() => redis.stop());
    const tls = redis.tls!;
    const env = {
      REDIS_SOCKET_TYPE: 'tcp',
      REDIS_URL: redis.url,
      REDIS_TLS: 'true',
      REDIS_TLS_CACERT: tls.caPath,
      REDIS_TLS_CLIENT_CERT: tls.clientCertPath,
      REDIS_TLS_CLIENT_KEY: tls.clientKeyPath,
    };
    const app = await startTestApp({
      env: { BACKEND_TYPE: 'redis', ...env },
      files: { 'example.yaml': readFileSync(CONFIG, 'utf8') },
    });
    t.teardown(() => app.close());
    await roomInWindow(60, 10_000);
    const status = await hit(app, 2);
    const args = ['counters', 'get', '--format', 'json', '--config', CONFIG, '--domain', 'example'];
    const [got] = readings(await runInProcess([...args, '--descriptor', DESCRIPTOR], env));
    t.match(got, { count: 2, remaining: status.limitRemaining });
    const { REDIS_TLS: _tls, ...plain } = env;
    const refused = await runInProcess([...args, '--descriptor', DESCRIPTOR, '--timeout', '1'], plain);
    t.equal(refused.code, 2, 'without REDIS_TLS the TLS port does not answer');
  },
);

t.test(
  'a Redis that accepts connections but never answers ends the command with exit 2, no hang',
  async (t) => {
    const redis = await startRedis();
    t.teardown(async () => {
      process.kill(redis.pid, 'SIGCONT');
      await redis.stop();
    });
    process.kill(redis.pid, 'SIGSTOP');
    const started = Date.now();
    const r = await runInProcess(
      [
        'counters',
        'get',
        '--config',
        CONFIG,
        '--domain',
        'example',
        '--descriptor',
        DESCRIPTOR,
        '--timeout',
        '1',
      ],
      { REDIS_SOCKET_TYPE: 'tcp', REDIS_URL: redis.url },
    );
    t.equal(r.code, 2, r.stderr);
    t.match(r.stderr, /cannot reach Redis at .* within 1 s|no answer from Redis at .* within 1 s/);
    t.ok(Date.now() - started < 30_000, `ended after ${Date.now() - started} ms`);
  },
);
