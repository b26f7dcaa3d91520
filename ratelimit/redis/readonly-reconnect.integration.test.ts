// REDIS_CLOSE_CONNECTION_ON_READONLY_ERROR on real redis-server: a single Redis address (here a small
// TCP proxy, as a Kubernetes Service or a DNS name) repointed at a new master while the old master is
// demoted and keeps the connections it has. The service must follow the address to the new master,
// become ready and count there, without a restart.
import t, { type Test } from 'tap';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { pino } from 'pino';
import { startRedis } from '../../harness/redis/index.js';
import { descriptor, eventually, roomInWindow, startTestApp } from '../test-support.js';

/** A TCP proxy to `target()`, chosen per new connection; established connections keep their backend. */
async function startProxy(t: Test, target: () => number): Promise<number> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((down) => {
    const up = connect(target(), '127.0.0.1');
    for (const s of [down, up]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => undefined);
    }
    down.pipe(up).pipe(down);
    down.on('close', () => up.destroy());
    up.on('close', () => down.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    for (const s of sockets) s.destroy();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return (server.address() as { port: number }).port;
}

for (const direct of ['true', 'false']) {
  t.test(
    `REDIS_DIRECT_COUNTING=${direct}: a demoted master behind a repointed address: ready again and counting on the new master`,
    async (t) => {
      const [a, b] = await Promise.all([startRedis(), startRedis()]);
      t.teardown(() => Promise.all([a.stop(), b.stop()]));
      const adminA = a.client();
      const adminB = b.client();
      t.teardown(() => {
        adminA.disconnect();
        adminB.disconnect();
      });
      let backend = a.port;
      const proxyPort = await startProxy(t, () => backend);
      const lines: string[] = [];
      const logger = pino({ level: 'warn' }, { write: (s: string) => void lines.push(s) });
      const svc = await startTestApp({
        env: {
          BACKEND_TYPE: 'redis',
          REDIS_SOCKET_TYPE: 'tcp',
          REDIS_URL: `127.0.0.1:${proxyPort}`,
          REDIS_CLOSE_CONNECTION_ON_READONLY_ERROR: 'true',
          REDIS_DIRECT_COUNTING: direct,
          REDIS_CIRCUIT_BREAKER_PROBE_INTERVAL: '200ms',
          CACHE_KEY_PREFIX: 'ro_',
          CACHE_FAILURE_MODE: 'allow',
        },
        files: {
          'ro.yaml':
            'domain: ro\ndescriptors:\n  - key: k\n    rate_limit: { unit: hour, requests_per_unit: 1000 }\n',
        },
        appOptions: { logger },
      });
      t.teardown(() => svc.close());
      await roomInWindow(3600, 30_000);
      const call = () => svc.call({ domain: 'ro', descriptors: [descriptor(['k', 'v'])] });
      const health = async () => (await fetch(`${svc.httpUrl}/healthcheck`)).status;
      const counter = async (admin: typeof adminA) => {
        const keys = await admin.keys('ro_ro_k_v_*');
        return keys.length ? Number(await admin.get(keys[0]!)) : 0;
      };
      t.equal((await call()).overallCode, 'OK');
      t.equal(await counter(adminA), 1, 'counted on the first master');

      // The failover: the address now leads to b; a becomes b's replica and keeps our connection.
      backend = b.port;
      await adminA.call('REPLICAOF', '127.0.0.1', String(b.port));
      // Decisions go on (answered by the failure mode while a is a replica) until one counts on b.
      await eventually(
        async () => {
          await call();
          return (await counter(adminB)) > 0 && (await health()) === 200;
        },
        20_000,
        'a decision counted on the new master and /healthcheck OK',
      );
      const before = await counter(adminB);
      t.equal((await call()).overallCode, 'OK');
      t.equal(await counter(adminB), before + 1, 'each decision counts on the new master');
      t.ok(
        lines.some((l) => l.includes('answers READONLY') && l.includes('reconnecting through the address')),
        'the demotion and the reconnect are logged',
      );
      t.ok(
        lines.some((l) => l.includes('is a master again')),
        'the recovery is logged',
      );
    },
  );
}

t.test('an address that still leads to a replica is dialled again at most about once a second', async (t) => {
  const [a, b] = await Promise.all([startRedis(), startRedis()]);
  t.teardown(() => Promise.all([a.stop(), b.stop()]));
  const admin = a.client();
  t.teardown(() => admin.disconnect());
  const svc = await startTestApp({
    env: {
      BACKEND_TYPE: 'redis',
      REDIS_SOCKET_TYPE: 'tcp',
      REDIS_URL: a.url,
      REDIS_CLOSE_CONNECTION_ON_READONLY_ERROR: 'true',
      CACHE_FAILURE_MODE: 'allow',
    },
    files: {
      'ro.yaml':
        'domain: ro\ndescriptors:\n  - key: k\n    rate_limit: { unit: hour, requests_per_unit: 1000 }\n',
    },
  });
  t.teardown(() => svc.close());
  const call = () => svc.call({ domain: 'ro', descriptors: [descriptor(['k', 'v'])] });
  t.equal((await call()).overallCode, 'OK');
  await admin.call('REPLICAOF', '127.0.0.1', String(b.port));
  const accepted = async () =>
    Number(/total_connections_received:(\d+)/.exec(String(await admin.call('INFO', 'stats')))![1]);
  await eventually(
    async () => {
      await call(); // a write meets the READONLY
      return (await fetch(`${svc.httpUrl}/healthcheck`)).status === 500;
    },
    15_000,
    'unready',
  );
  const before = await accepted();
  const started = performance.now();
  while (performance.now() - started < 3000) await call();
  const dialled = (await accepted()) - before;
  // Two connections per dial (ioredis and direct counting): ~3 dials in 3 s; a loop would be hundreds.
  t.ok(dialled <= 12, `${dialled} connections in 3 s`);
  t.equal((await call()).overallCode, 'OK', 'decisions still answered (failure mode allow)');
});
