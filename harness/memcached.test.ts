import { existsSync } from 'node:fs';
import t from 'tap';
import { memcachedRequest, startMemcached, startMemcachedPool } from './memcached.js';
import { tryConnect } from './net.js';

t.test('memcached answers set/get over the raw text protocol', async (t) => {
  const t0 = Date.now();
  const m = await startMemcached();
  t.comment(`memcached started in ${Date.now() - t0} ms on ${m.url}`);
  t.teardown(() => m.stop());
  t.not(m.port, 11211);
  t.equal(await memcachedRequest(m.port, 'set k 0 0 5\r\nhello\r\n'), 'STORED\r\n');
  t.equal(await memcachedRequest(m.port, 'get k\r\n'), 'VALUE k 0 5\r\nhello\r\nEND\r\n');
  t.equal(await memcachedRequest(m.port, 'add n 0 0 1\r\n7\r\n'), 'STORED\r\n');
  t.equal(await memcachedRequest(m.port, 'incr n 5\r\n'), '12\r\n');
  t.equal(await memcachedRequest(m.port, 'get missing\r\n'), 'END\r\n');
});

t.test('kill() crashes it; stop() is idempotent and removes the temp dir', async (t) => {
  const m = await startMemcached();
  await m.kill();
  t.notOk(m.running);
  t.notOk(await tryConnect(m.port));
  await m.stop();
  await m.stop();
  t.notOk(existsSync(m.dir));
});

t.test('a pool of instances has distinct ports and a comma-separated url list', async (t) => {
  const pool = await startMemcachedPool(2);
  t.teardown(() => pool.stop());
  const [a, b] = pool.instances;
  t.not(a.port, b.port);
  t.equal(pool.urls, `${a.url},${b.url}`);
  await memcachedRequest(a.port, 'set x 0 0 1\r\na\r\n');
  t.equal(await memcachedRequest(b.port, 'get x\r\n'), 'END\r\n', 'instances are independent');
});
