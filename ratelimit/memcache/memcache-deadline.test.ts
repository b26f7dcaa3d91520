// Each memcache call has a deadline (MEMCACHE_TIMEOUT): a peer that answers a byte at a time, never
// idle long enough for the socket's idle timeout and never done, fails the call as a cache error
// instead of holding it (and the decision waiting on it) forever.
import t from 'tap';
import { createServer, type Socket } from 'node:net';
import { CacheError, type CounterOp } from '../counting/index.js';
import { loadSettings } from '../settings/index.js';
import { MemcacheCounterStore } from './index.js';

t.test('a trickling peer fails the call at MEMCACHE_TIMEOUT', async (t) => {
  const sockets = new Set<Socket>();
  const timers = new Set<NodeJS.Timeout>();
  // Not memcached: an adversarial peer (real memcached cannot be made to trickle).
  const server = createServer((s) => {
    sockets.add(s);
    s.on('error', () => undefined);
    s.on('data', () => {
      const timer = setInterval(() => s.write('S'), 50);
      timers.add(timer);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    for (const x of timers) clearInterval(x);
    for (const s of sockets) s.destroy();
    server.close();
  });
  const port = (server.address() as { port: number }).port;
  const settings = loadSettings({
    BACKEND_TYPE: 'memcache',
    MEMCACHE_HOST_PORT: `127.0.0.1:${port}`,
    MEMCACHE_TIMEOUT: '300ms',
  }).memcache;
  t.equal(settings.timeoutMs, 300);
  const store = new MemcacheCounterStore({ settings });
  t.teardown(() => store.close());
  const op: CounterOp = { key: 'k', hits: 1, expireSeconds: 60, perSecond: false };
  const started = performance.now();
  const outcome = await Promise.race([
    store.increment([op]).then(
      () => 'answered',
      (err: unknown) => err,
    ),
    new Promise((r) => setTimeout(() => r('still waiting after 10 s'), 10_000).unref()),
  ]);
  t.type(outcome, CacheError, 'a cache error');
  t.match(String((outcome as Error).message ?? outcome), /300 ms/);
  t.ok(performance.now() - started < 5000, 'failed near the deadline');
});
