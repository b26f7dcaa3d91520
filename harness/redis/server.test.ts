import { existsSync } from 'node:fs';
import { Redis } from 'ioredis';
import t from 'tap';
import { tryConnect } from '../net.js';
import { respCommand, startRedis } from './index.js';

const quiet = { maxRetriesPerRequest: 0, retryStrategy: () => null, lazyConnect: true };
// a client expected to fail: swallow its 'error' events (the assertion is on the rejected promise)
const failing = (c: Redis) => c.on('error', () => {});

t.test('password: the default user needs it', async (t) => {
  const t0 = Date.now();
  const r = await startRedis({ password: 's3cret' });
  t.comment(`redis-server started in ${Date.now() - t0} ms on ${r.url}`);
  t.teardown(() => r.stop());
  t.not(r.port, 6379);
  t.equal(r.url, `127.0.0.1:${r.port}`);
  const c = r.client();
  t.equal(await c.set('k', 'v'), 'OK');
  t.equal(await c.get('k'), 'v');
  await t.rejects(respCommand({ port: r.port }, 'GET', 'k'), /NOAUTH/);
  await t.rejects(respCommand({ port: r.port, password: 'wrong' }, 'PING'), /WRONGPASS/);
});

t.test('ACL users: client() logs in as the first user; others work with their own password', async (t) => {
  const r = await startRedis({
    users: [
      { name: 'alice', password: 'apw' },
      { name: 'reader', password: 'rpw', rules: '~* +@read +ping' },
    ],
  });
  t.teardown(() => r.stop());
  const alice = r.client();
  t.equal(await alice.call('ACL', 'WHOAMI'), 'alice');
  await alice.set('x', '1');
  const reader = r.client({ username: 'reader', password: 'rpw' });
  t.equal(await reader.get('x'), '1');
  await t.rejects(reader.set('x', '2'), /NOPERM/);
  await t.rejects(respCommand({ port: r.port, username: 'alice', password: 'nope' }, 'PING'), /WRONGPASS/);
});

t.test(
  'TLS: a client with the client certificate connects; plain TCP and cert-less clients do not',
  async (t) => {
    const t0 = Date.now();
    const r = await startRedis({ tls: true });
    t.comment(`redis-server with TLS (certs included) started in ${Date.now() - t0} ms`);
    t.teardown(() => r.stop());
    t.ok(r.tls && existsSync(r.tls.caPath) && existsSync(r.tls.clientCertPath));
    const c = r.client();
    t.equal(await c.set('tls', 'yes'), 'OK');
    t.equal(await c.get('tls'), 'yes');

    const plain = failing(new Redis({ host: r.host, port: r.port, ...quiet, connectTimeout: 1000 }));
    t.teardown(() => plain.disconnect());
    await t.rejects(plain.connect().then(() => plain.ping()));

    const opts = r.clientOptions();
    const noCert = failing(new Redis({ ...opts, tls: { ca: (opts.tls as { ca: Buffer }).ca }, ...quiet }));
    t.teardown(() => noCert.disconnect());
    await t.rejects(noCert.connect().then(() => noCert.ping()));
  },
);

t.test('TLS with authClients optional accepts clients without a certificate', async (t) => {
  const r = await startRedis({ tls: { authClients: 'optional' }, password: 'pw' });
  t.teardown(() => r.stop());
  const opts = r.clientOptions();
  const noCert = r.client({ tls: { ca: (opts.tls as { ca: Buffer }).ca } });
  t.equal(await noCert.ping(), 'PONG');
});

t.test('unix socket: ioredis connects through socketPath', async (t) => {
  const r = await startRedis({ unixSocket: true });
  t.teardown(() => r.stop());
  t.ok(r.socketPath && existsSync(r.socketPath));
  const c = r.client({ path: r.socketPath });
  await c.set('via', 'socket');
  t.equal(await respCommand({ port: r.port }, 'GET', 'via'), 'socket');
});

t.test(
  'kill() crashes the server; restart() brings it back on the same port; stop() cleans up',
  async (t) => {
    const r = await startRedis({ password: 'pw', args: ['--maxmemory', '16mb'] });
    const { port, pid } = r;
    const c = r.client({ retryStrategy: () => 50 });
    await c.set('before', '1');
    await r.kill();
    t.notOk(r.running);
    t.notOk(await tryConnect(port), 'nothing listens after the crash');
    await r.restart();
    t.equal(r.port, port);
    t.not(r.pid, pid);
    t.equal(await c.get('before'), null, 'no persistence: data is gone');
    t.same(await c.config('GET', 'maxmemory'), ['maxmemory', String(16 * 1024 * 1024)], 'same config');
    await r.stop();
    await r.stop();
    t.notOk(existsSync(r.dir), 'temp dir removed');
    t.throws(() => process.kill(pid, 0));
    await t.rejects(r.restart(), /after stop/);
  },
);

t.test(
  'a server that fails to start rejects with the tail of its log and leaves nothing behind',
  async (t) => {
    const t0 = Date.now();
    const err = await startRedis({ args: ['--no-such-directive', 'x'] }).then(
      () => undefined,
      (e: Error) => e,
    );
    t.ok(err, 'rejected');
    t.match(err?.message, /exited with code 1/);
    t.match(err?.message, /last 30 lines of .*redis-server\.log/);
    t.match(err?.message, /no-such-directive/, 'the log tail names the bad directive');
    t.ok(Date.now() - t0 < 5000, 'failed fast instead of waiting for the deadline');
  },
);
