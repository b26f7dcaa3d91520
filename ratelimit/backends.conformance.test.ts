// The core decision scenarios, run unchanged against every backend and topology on real servers:
// memory, Redis single (plain, password, ACL user, unix socket, TLS with client certificates,
// implicit pipelining), a 3-master/3-replica cluster, a sentinel group, the per-second split, and
// memcached (two nodes). Each backend also shows that the count it holds is the exact one.
import t from 'tap';
import { makeCerts } from '../harness/tls.js';
import { startRedis, startRedisCluster, startRedisSentinel } from '../harness/redis/index.js';
import { memcachedRequest, startMemcachedPool } from '../harness/memcached.js';
import { pickServer } from './memcache/index.js';
import { descriptor, startTestApp, type TestApp, roomInWindow } from './test-support.js';

// Counting tests must not straddle a minute boundary (see roomInWindow).
t.beforeEach(() => roomInWindow());

const CONFIG = `
domain: basic
descriptors:
  - key: key1
    rate_limit: { unit: second, requests_per_unit: 50 }
  - key: key2
    rate_limit: { unit: minute, requests_per_unit: 20 }
  - key: key3
    rate_limit: { unit: hour, requests_per_unit: 10 }
  - key: blocked
    rate_limit: { unit: minute, requests_per_unit: 0 }
`;

interface Backend {
  name: string;
  env: Record<string, string>;
  /** The count the backend holds for a key, or null when absent. */
  read(key: string): Promise<number | null>;
  /** For the per-second split: where a SECOND-unit key lives instead. */
  readPerSecond?(key: string): Promise<number | null>;
  stop(): Promise<void>;
}

const numberOrNull = (v: string | null): number | null => (v === null ? null : Number(v));

// Every server starts at once: the cluster and the sentinel group dominate (about 3 s each).
async function backends(): Promise<Backend[]> {
  const certsDir = makeCerts();
  const [plain, withPassword, withAcl, unix, pipelined, cluster, sentinel, perSecondMain, perSecondSec, mc] =
    await Promise.all([
      startRedis(),
      startRedis({ password: 's3cret' }),
      startRedis({ users: [{ name: 'ratelimit', password: 'acl-pass' }] }),
      startRedis({ unixSocket: true }),
      startRedis(),
      startRedisCluster(),
      startRedisSentinel({ password: 'sentinel-data-pass' }),
      startRedis(),
      startRedis(),
      startMemcachedPool(2),
    ]);
  const certs = await certsDir;
  const tlsRedis = await startRedis({ tls: { certs } });
  const c = (s: { client(): { get(k: string): Promise<string | null> } }) => {
    const cl = s.client();
    return async (key: string) => numberOrNull(await cl.get(key));
  };
  const clusterClient = cluster.client();
  const sentinelClient = sentinel.client({ password: 'sentinel-data-pass' });
  const tcp = (url: string, extra: Record<string, string> = {}) => ({
    BACKEND_TYPE: 'redis',
    REDIS_SOCKET_TYPE: 'tcp',
    REDIS_URL: url,
    ...extra,
  });
  return [
    { name: 'memory', env: { BACKEND_TYPE: 'memory' }, read: async () => null, stop: async () => {} },
    { name: 'redis single', env: tcp(plain.url), read: c(plain), stop: () => plain.stop() },
    {
      name: 'redis single, REDIS_AUTH=password',
      env: tcp(withPassword.url, { REDIS_AUTH: 's3cret' }),
      read: c(withPassword),
      stop: () => withPassword.stop(),
    },
    {
      name: 'redis single, REDIS_AUTH=user:password (ACL)',
      env: tcp(withAcl.url, { REDIS_AUTH: 'ratelimit:acl-pass' }),
      read: c(withAcl),
      stop: () => withAcl.stop(),
    },
    {
      name: 'redis single over a unix socket',
      env: { BACKEND_TYPE: 'redis', REDIS_SOCKET_TYPE: 'unix', REDIS_URL: unix.socketPath! },
      read: c(unix),
      stop: () => unix.stop(),
    },
    {
      name: 'redis single over TLS with a client certificate',
      env: tcp(tlsRedis.url, {
        REDIS_TLS: 'true',
        REDIS_TLS_CACERT: certs.caPath,
        REDIS_TLS_CLIENT_CERT: certs.clientCertPath,
        REDIS_TLS_CLIENT_KEY: certs.clientKeyPath,
      }),
      read: c(tlsRedis),
      stop: async () => {
        await tlsRedis.stop();
        certs.remove();
      },
    },
    {
      name: 'redis single, implicit pipelining (window 2ms, limit 8)',
      env: tcp(pipelined.url, { REDIS_PIPELINE_WINDOW: '2ms', REDIS_PIPELINE_LIMIT: '8' }),
      read: c(pipelined),
      stop: () => pipelined.stop(),
    },
    {
      name: 'redis cluster, 3 masters + 3 replicas',
      env: {
        BACKEND_TYPE: 'redis',
        REDIS_TYPE: 'cluster',
        REDIS_SOCKET_TYPE: 'tcp',
        REDIS_URL: cluster.urls,
      },
      read: async (key) => numberOrNull(await clusterClient.get(key)),
      stop: () => cluster.stop(),
    },
    {
      name: 'redis sentinel, 1 master + 1 replica + 3 sentinels, with REDIS_AUTH',
      env: {
        BACKEND_TYPE: 'redis',
        REDIS_TYPE: 'sentinel',
        REDIS_SOCKET_TYPE: 'tcp',
        REDIS_URL: `${sentinel.masterName},${sentinel.sentinelUrls}`,
        REDIS_AUTH: 'sentinel-data-pass',
      },
      read: async (key) => numberOrNull(await sentinelClient.get(key)),
      stop: () => sentinel.stop(),
    },
    {
      name: 'redis with REDIS_PERSECOND: second limits on the second instance',
      env: tcp(perSecondMain.url, {
        REDIS_PERSECOND: 'true',
        REDIS_PERSECOND_SOCKET_TYPE: 'tcp',
        REDIS_PERSECOND_URL: perSecondSec.url,
      }),
      read: c(perSecondMain),
      readPerSecond: c(perSecondSec),
      stop: async () => {
        await perSecondMain.stop();
        await perSecondSec.stop();
      },
    },
    {
      name: 'memcache, two nodes',
      env: { BACKEND_TYPE: 'memcache', MEMCACHE_HOST_PORT: mc.urls },
      read: async (key) => {
        const node = mc.instances[pickServer(key, mc.instances.length)];
        const reply = await memcachedRequest(node.port, `get ${key}\r\n`, { until: /END\r\n$/ });
        const m = /^VALUE \S+ \d+ \d+\r\n(\d+)\r\n/.exec(reply);
        return m ? Number(m[1]) : null;
      },
      stop: () => mc.stop(),
    },
  ];
}

const started = Date.now();
const all = await backends();
t.comment(`all backends started in ${Date.now() - started} ms`);
t.teardown(async () => {
  await Promise.all(all.map((b) => b.stop()));
});

/** The key as the reference builds it, for the window that contains `atMs`. */
function keyAt(prefix: string, rest: string, unitSeconds: number, atMs: number): string {
  const now = Math.floor(atMs / 1000);
  return `${prefix}basic_${rest}_${now - (now % unitSeconds)}`;
}

async function readEither(
  read: (key: string) => Promise<number | null>,
  prefix: string,
  rest: string,
  unitSeconds: number,
  before: number,
): Promise<number | null> {
  const a = await read(keyAt(prefix, rest, unitSeconds, before));
  if (a !== null) return a;
  return read(keyAt(prefix, rest, unitSeconds, Date.now()));
}

for (const b of all) {
  t.test(b.name, async (t) => {
    const prefix = `cf${process.pid}_`;
    const svc: TestApp = await startTestApp({
      files: { 'basic.yaml': CONFIG },
      env: { CACHE_KEY_PREFIX: prefix, ...b.env },
    });
    t.teardown(() => svc.close());
    const run = `${Date.now().toString(36)}`;

    t.test('an unknown domain answers OK for every descriptor, with no limit', async (t) => {
      const r = await svc.call({
        domain: 'nope',
        descriptors: [descriptor(['key1', 'x']), descriptor(['key2', 'y'])],
      });
      t.equal(r.overallCode, 'OK');
      t.same(
        r.statuses.map((s) => [s.code, s.currentLimit ?? null]),
        [
          ['OK', null],
          ['OK', null],
        ],
      );
    });

    t.test('the first hit on a 50 per second limit leaves 49', async (t) => {
      const before = Date.now();
      const r = await svc.call({ domain: 'basic', descriptors: [descriptor(['key1', `first${run}`])] });
      t.equal(r.overallCode, 'OK');
      t.same(r.statuses[0].currentLimit, { requestsPerUnit: 50, unit: 'SECOND' });
      t.equal(r.statuses[0].limitRemaining, 49);
      if (b.readPerSecond) {
        t.equal(
          await readEither(b.readPerSecond, prefix, `key1_first${run}`, 1, before),
          1,
          'in the per-second instance',
        );
        t.equal(await readEither(b.read, prefix, `key1_first${run}`, 1, before), null, 'not in the main one');
      }
    });

    t.test(
      '25 hits on 20 per minute: 20 OK counting down, then 5 OVER_LIMIT; the cache holds 25',
      async (t) => {
        const v = `h25${run}`;
        const before = Date.now();
        const remaining: number[] = [];
        const codes: string[] = [];
        for (let i = 1; i <= 25; i++) {
          const r = await svc.call({ domain: 'basic', descriptors: [descriptor(['key2', v])] });
          codes.push(r.statuses[0].code);
          remaining.push(r.statuses[0].limitRemaining ?? 0);
        }
        t.same(codes, [...Array(20).fill('OK'), ...Array(5).fill('OVER_LIMIT')]);
        t.same(remaining, [...Array.from({ length: 20 }, (_, i) => 19 - i), 0, 0, 0, 0, 0]);
        if (b.name !== 'memory') t.equal(await readEither(b.read, prefix, `key2_${v}`, 60, before), 25);
        if (b.readPerSecond) {
          t.equal(
            await readEither(b.readPerSecond, prefix, `key2_${v}`, 60, before),
            null,
            'minute keys stay in main',
          );
        }
      },
    );

    t.test('two descriptors in one request are decided separately and ORed', async (t) => {
      const v = `two${run}`;
      let last;
      for (let i = 0; i < 11; i++) {
        last = await svc.call({
          domain: 'basic',
          descriptors: [descriptor(['key2', v]), descriptor(['key3', v])],
        });
      }
      t.equal(last!.statuses[0].code, 'OK');
      t.equal(last!.statuses[0].limitRemaining, 9);
      t.equal(last!.statuses[1].code, 'OVER_LIMIT');
      t.equal(last!.overallCode, 'OVER_LIMIT');
    });

    t.test('the reset countdown is the rest of the current window', async (t) => {
      const before = Math.floor(Date.now() / 1000);
      const r = await svc.call({ domain: 'basic', descriptors: [descriptor(['key3', `reset${run}`])] });
      const after = Math.floor(Date.now() / 1000);
      const secs = Number(r.statuses[0].durationUntilReset!.seconds);
      t.ok(secs === 3600 - (before % 3600) || secs === 3600 - (after % 3600), `reset ${secs}s`);
    });

    t.test('HTTP /json answers 429 when over the limit, 200 when not', async (t) => {
      const over = await svc.postJson({
        domain: 'basic',
        descriptors: [{ entries: [{ key: 'blocked', value: run }] }],
      });
      t.equal(over.status, 429);
      t.equal(over.json().overallCode, 'OVER_LIMIT');
      const ok = await svc.postJson({
        domain: 'basic',
        descriptors: [{ entries: [{ key: 'key3', value: `http${run}` }] }],
      });
      t.equal(ok.status, 200);
      t.equal(ok.json().statuses[0].limitRemaining, 9);
    });

    t.test('concurrent requests on one key are counted exactly', async (t) => {
      const v = `conc${run}`;
      const rs = await Promise.all(
        Array.from({ length: 30 }, () =>
          svc.call({ domain: 'basic', descriptors: [descriptor(['key2', v])] }),
        ),
      );
      const remaining = rs.map((r) => r.statuses[0].limitRemaining ?? 0).sort((a, b) => b - a);
      t.same(
        remaining.slice(0, 20),
        Array.from({ length: 20 }, (_, i) => 19 - i),
        'each count seen once',
      );
      t.equal(rs.filter((r) => r.overallCode === 'OVER_LIMIT').length, 10);
    });
  });
}
