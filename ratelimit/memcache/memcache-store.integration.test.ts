// The memcache backend on real memcached: gomemcache's node selection, key checks before anything is
// sent, exptime beyond 30 days, SRV discovery and refresh, a node going down, TLS.
import t from 'tap';
import { join } from 'node:path';
import { userInfo } from 'node:os';
import { memcachedRequest, startMemcachedPool } from '../../harness/memcached.js';
import { ServerProcess, freePort, makeTempDir, removeTempDir, waitUntil } from '../../harness/net.js';
import { makeCerts } from '../../harness/tls.js';
import type { CounterOp } from '../counting/index.js';
import { loadSettings } from '../settings/index.js';
import { descriptor, startTestApp, roomInWindow } from '../test-support.js';
import { crc32, illegalKeyReason, MemcacheCounterStore, pickServer, serversFromSrv } from './index.js';

// Counting tests must not straddle a minute boundary (see roomInWindow).
t.beforeEach(() => roomInWindow());

const op = (key: string, hits = 1, expireSeconds = 60): CounterOp => ({
  key,
  hits,
  expireSeconds,
  perSecond: false,
});
const settings = (env: Record<string, string>) => loadSettings({ BACKEND_TYPE: 'memcache', ...env }).memcache;

async function rawGet(port: number, key: string): Promise<string | null> {
  const reply = await memcachedRequest(port, `get ${key}\r\n`, { until: /END\r\n$/ });
  const m = /^VALUE \S+ \d+ \d+\r\n(.*)\r\n/.exec(reply);
  return m ? m[1] : null;
}

t.test('node selection is gomemcache: CRC-32 (IEEE) of the key modulo the node count', async (t) => {
  t.equal(crc32('123456789'), 0xcbf43926, 'the CRC-32 check value');
  t.equal(crc32('hello'), 0x3610a686);
  t.equal(pickServer('hello', 3), 0x3610a686 % 3);
  t.equal(pickServer('anything', 1), 0);
  t.equal(illegalKeyReason('a'.repeat(250)), undefined, '250 bytes is legal');
  t.match(illegalKeyReason('a'.repeat(251)), /251 bytes long, over memcached's 250-byte limit/);
  t.match(illegalKeyReason('é'.repeat(126)), /252 bytes/, 'the limit is in bytes');
  for (const bad of [
    'a b',
    'a\tb',
    'a\nb',
    'a\x00b',
    'a\x7fb',
    'a\u0085b',
    'a\u00a0b',
    'a\u2028b',
    'a\u3000b',
  ]) {
    const label = bad.replace(/[^\x21-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
    t.match(illegalKeyReason(bad), /whitespace or a control character/, label);
  }
  t.equal(illegalKeyReason('ключ_é_✓'), undefined, 'other non-ASCII is fine');
});

t.test('the service on two memcached nodes', async (t) => {
  const pool = await startMemcachedPool(2);
  t.teardown(() => pool.stop());
  const svc = await startTestApp({
    files: {
      'm.yaml': `
domain: m
descriptors:
  - key: k
    rate_limit: { unit: minute, requests_per_unit: 5 }
  - key: month
    rate_limit: { unit: month, requests_per_unit: 5 }
`,
    },
    env: { BACKEND_TYPE: 'memcache', MEMCACHE_HOST_PORT: pool.urls, MEMCACHE_MAX_IDLE_CONNS: '3' },
  });
  t.teardown(() => svc.close());
  const ports = pool.instances.map((i) => i.port);
  const now = () => Math.floor(Date.now() / 1000);

  await t.test('every instance with the same node list puts a key on the same node', async (t) => {
    const other = new MemcacheCounterStore({ settings: settings({ MEMCACHE_HOST_PORT: pool.urls }) });
    await other.start();
    t.teardown(() => other.close());
    for (let i = 0; i < 20; i++) {
      const v = `n${i}`;
      await svc.call({ domain: 'm', descriptors: [descriptor(['k', v])] });
      const key = `m_k_${v}_${now() - (now() % 60)}`;
      t.same(await other.increment([op(key)]), [2], `${key}: the second instance sees the first's count`);
      const node = pickServer(key, 2);
      t.equal(await rawGet(ports[node], key), '2', `on node ${node}`);
      t.equal(await rawGet(ports[1 - node], key), null, 'and not on the other');
    }
  });

  await t.test(
    'a refund (is_negative_hits) is decr on the same key: floored at 0, never created',
    async (t) => {
      const key = `m_k_refund_${now() - (now() % 60)}`;
      const node = ports[pickServer(key, 2)]!;
      const refund = (hits: number) => ({
        ...descriptor(['k', 'refund']),
        hitsAddend: { value: hits },
        isNegativeHits: true,
      });
      const none = await svc.call({ domain: 'm', descriptors: [refund(2)] });
      t.equal(none.statuses[0]!.code, 'OK');
      t.equal(none.statuses[0]!.limitRemaining, 5, 'nothing counted: the whole limit');
      t.equal(await rawGet(node, key), null, 'a refund creates no key');
      await svc.call({
        domain: 'm',
        descriptors: [{ ...descriptor(['k', 'refund']), hitsAddend: { value: 4 } }],
      });
      const back = await svc.call({ domain: 'm', descriptors: [refund(3)] });
      t.equal(back.statuses[0]!.limitRemaining, 4, '4 - 3 = 1 counted');
      t.equal((await rawGet(node, key))?.trim(), '1', 'decremented in memcached');
      const clamp = await svc.call({ domain: 'm', descriptors: [refund(10)] });
      t.equal(clamp.statuses[0]!.limitRemaining, 5, 'clamped at 0');
      t.equal((await rawGet(node, key))?.trim(), '0');
    },
  );

  await t.test('keys over 250 bytes fail with a clear error, before reaching memcached', async (t) => {
    const fits = 'x'.repeat(250 - `m_k__${now()}`.length);
    const ok = await svc.call({ domain: 'm', descriptors: [descriptor(['k', fits])] });
    t.equal(ok.statuses[0].limitRemaining, 4, 'a 250-byte key works');
    await t.rejects(svc.call({ domain: 'm', descriptors: [descriptor(['k', fits + 'y'])] }), {
      code: 3,
      details: /251 bytes long, over memcached's 250-byte limit/,
    });
    const http = await svc.postJson({
      domain: 'm',
      descriptors: [{ entries: [{ key: 'k', value: fits + 'y' }] }],
    });
    t.equal(http.status, 400);
    t.match(http.body, /250-byte limit/);
  });

  await t.test('descriptors with whitespace or control characters are refused, never sent', async (t) => {
    const stats = async () =>
      Promise.all(ports.map((p) => memcachedRequest(p, 'stats\r\n', { until: /END\r\n$/ }))).then((r) =>
        r.map((s) => /STAT incr_misses (\d+)/.exec(s)?.[1] + '/' + /STAT incr_hits (\d+)/.exec(s)?.[1]),
      );
    const before = await stats();
    for (const v of ['a b', 'tab\there', 'nl\r\nset evil 0 0 1', 'nul\x00', 'nbsp\u00a0']) {
      await t.rejects(svc.call({ domain: 'm', descriptors: [descriptor(['k', v])] }), {
        code: 3,
        details: /whitespace or a control character/,
      });
    }
    t.same(await stats(), before, 'no incr reached either node');
    t.ok(svc.app.stats.snapshot()['ratelimit.service.call.should_rate_limit.service_error'] >= 5);
  });

  await t.test(
    'a month window (over 30 days) is sent as an absolute exptime and the key lives',
    async (t) => {
      const r = await svc.call({ domain: 'm', descriptors: [descriptor(['month', 'x'])] });
      t.equal(r.statuses[0].limitRemaining, 4);
      const r2 = await svc.call({ domain: 'm', descriptors: [descriptor(['month', 'x'])] });
      t.equal(r2.statuses[0].limitRemaining, 3, 'the counter was not expired at once');
    },
  );

  await t.test('a node down: its keys fail as cache errors, the other node keeps counting', async (t) => {
    const keyOn = (node: number) => {
      for (let i = 0; ; i++) {
        const key = `m_k_down${i}_${now() - (now() % 60)}`;
        if (pickServer(key, 2) === node) return `down${i}`;
      }
    };
    const deadValue = keyOn(1);
    const liveValue = keyOn(0);
    await pool.instances[1].kill();
    await t.rejects(svc.call({ domain: 'm', descriptors: [descriptor(['k', deadValue])] }), {
      code: 14,
      details: /memcache error on 127\.0\.0\.1:\d+/,
    });
    const live = await svc.call({ domain: 'm', descriptors: [descriptor(['k', liveValue])] });
    t.equal(live.statuses[0].limitRemaining, 4);
    t.ok(svc.app.stats.snapshot()['ratelimit.service.call.should_rate_limit.redis_error'] >= 1);
  });
});

t.test('MEMCACHE_SRV: nodes from SRV records, sorted; MEMCACHE_SRV_REFRESH picks up changes', async (t) => {
  const pool = await startMemcachedPool(2);
  t.teardown(() => pool.stop());
  const [a, b] = pool.instances;
  let records = [{ name: 'localhost', port: b.port, priority: 0, weight: 0 }];
  const asked = new Set<string>();
  const resolveSrv = async (name: string) => {
    asked.add(name);
    return records;
  };
  t.same(
    await serversFromSrv('_memcache._tcp.example.test', async () => [
      { name: 'mc-2.example.test', port: 1, priority: 0, weight: 0 },
      { name: 'mc-10.example.test.', port: 1, priority: 0, weight: 0 },
    ]),
    ['mc-10.example.test.:1', 'mc-2.example.test.:1'],
    "Go's form and order",
  );
  await t.rejects(serversFromSrv('memcache.example.test', resolveSrv), /could not parse/);
  const store = new MemcacheCounterStore({
    settings: settings({ MEMCACHE_SRV: '_memcache._tcp.example.test', MEMCACHE_SRV_REFRESH: '100ms' }),
    resolveSrv,
  });
  await store.start();
  t.teardown(() => store.close());
  t.same(store.serverList, [`localhost.:${b.port}`]);
  t.same([...asked], ['_memcache._tcp.example.test']);
  t.same(await store.increment([op('srv-key')]), [1]);
  t.equal(await rawGet(b.port, 'srv-key'), '1');
  records = [
    { name: 'localhost', port: b.port, priority: 0, weight: 0 },
    { name: 'localhost', port: a.port, priority: 0, weight: 0 },
  ];
  await waitUntil(() => store.serverList.length === 2, { what: 'the refreshed node list' });
  t.same(store.serverList, [`localhost.:${a.port}`, `localhost.:${b.port}`].sort());
});

t.test('MEMCACHE_TLS with a CA and a client certificate', async (t) => {
  const certs = await makeCerts();
  const dir = makeTempDir('rl-mc-tls');
  t.teardown(() => {
    certs.remove();
    removeTempDir(dir);
  });
  const port = await freePort();
  const args = ['-l', '127.0.0.1', '-p', String(port), '-U', '0', '-Z'];
  args.push('-o', `ssl_chain_cert=${certs.certPath},ssl_key=${certs.keyPath},ssl_ca_cert=${certs.caPath}`);
  if (process.getuid?.() === 0) args.push('-u', userInfo().username);
  const proc = new ServerProcess('memcached-tls', 'memcached', args, { logPath: join(dir, 'memcached.log') });
  t.teardown(() => proc.stop());
  const store = new MemcacheCounterStore({
    settings: settings({
      MEMCACHE_HOST_PORT: `127.0.0.1:${port}`,
      MEMCACHE_TLS: 'true',
      MEMCACHE_TLS_CACERT: certs.caPath,
      MEMCACHE_TLS_CLIENT_CERT: certs.clientCertPath,
      MEMCACHE_TLS_CLIENT_KEY: certs.clientKeyPath,
    }),
  });
  await store.start(10_000);
  t.teardown(() => store.close());
  t.same(await store.increment([op('tls-key', 3)]), [3]);
  t.same(await store.increment([op('tls-key', 2)]), [5]);
  t.same(await store.get([op('tls-key'), op('absent')]), [5, 0]);
});
