// Listen addresses and the plain-HTTP endpoint server shared by the service's Prometheus listener, the
// control plane and the operator: the forms accepted, the mistakes refused with the flag's name, and
// how the server answers unknown paths, other methods, a failing handler and a query string.
import t from 'tap';
import { Registry, Counter } from 'prom-client';
import {
  EndpointServer,
  healthEndpoint,
  metricsEndpoint,
  parseListenAddress,
  type EndpointHandler,
} from './http-endpoint.js';

t.test('parseListenAddress: host:port, :port, [v6]:port; a bad one names the flag', async (t) => {
  t.same(parseListenAddress('127.0.0.1:9090'), { host: '127.0.0.1', port: 9090 });
  t.same(parseListenAddress(':9090'), { host: undefined, port: 9090 }, 'every interface');
  t.same(parseListenAddress('[::1]:0'), { host: '::1', port: 0 });
  t.same(parseListenAddress('0.0.0.0:'), { host: '0.0.0.0', port: 0 }, 'no port: a free one, as in Go');
  t.throws(() => parseListenAddress('localhost', '--metrics-listen'), {
    message: "--metrics-listen 'localhost' has no port",
  });
  for (const bad of ['h:65536', 'h:-1', 'h:80x', 'h: 80', 'h:1e3', 'h:123456'])
    t.throws(() => parseListenAddress(bad, 'PROMETHEUS_ADDR'), {
      message: `PROMETHEUS_ADDR '${bad}': bad port`,
    });
  t.throws(() => parseListenAddress('::1:80'), /IPv6 address goes in brackets/);
});

async function serve(t: { teardown(fn: () => unknown): void }, routes: Record<string, EndpointHandler>) {
  const s = new EndpointServer('127.0.0.1:0', routes);
  const port = await s.start();
  t.teardown(() => s.close());
  return (path: string, init?: RequestInit) => fetch(`http://127.0.0.1:${port}${path}`, init);
}

t.test('the endpoint server: 404, 405, 500, query strings, HEAD', async (t) => {
  const get = await serve(t, {
    '/ok': () => ({ body: 'fine\n' }),
    '/sync-throw': () => {
      throw new Error('broken sync');
    },
    '/async-throw': async () => {
      throw new Error('broken async');
    },
  });
  const ok = await get('/ok?x=1');
  t.equal(ok.status, 200, 'a query string is ignored');
  t.equal(ok.headers.get('content-type'), 'text/plain');
  t.equal(await ok.text(), 'fine\n');
  const head = await get('/ok', { method: 'HEAD' });
  t.equal(head.status, 200);
  t.equal(await head.text(), '', 'HEAD has no body');
  const post = await get('/ok', { method: 'POST', body: 'x' });
  t.equal(post.status, 405);
  t.equal(post.headers.get('allow'), 'GET, HEAD');
  const missing = await get('/nope');
  t.equal(missing.status, 404);
  t.equal(await missing.text(), '404 page not found\n');
  for (const [path, message] of [
    ['/sync-throw', 'broken sync'],
    ['/async-throw', 'broken async'],
  ]) {
    const r = await get(path);
    t.equal(r.status, 500, path);
    t.equal(await r.text(), message);
  }
});

t.test(
  'metricsEndpoint serves the registry after beforeScrape; a failing beforeScrape does not fail it',
  async (t) => {
    const registry = new Registry();
    const c = new Counter({ name: 'test_scrapes_total', help: 'scrapes', registers: [registry] });
    const errors: string[] = [];
    let fail = false;
    const get = await serve(t, {
      '/metrics': metricsEndpoint(
        registry,
        () => {
          if (fail) throw new Error('flush failed');
          c.inc();
        },
        (err) => errors.push(err.message),
      ),
    });
    const r = await get('/metrics');
    t.equal(r.headers.get('content-type'), registry.contentType);
    t.match(await r.text(), /test_scrapes_total 1/, 'counted before the answer');
    fail = true;
    const r2 = await get('/metrics');
    t.equal(r2.status, 200);
    t.match(await r2.text(), /test_scrapes_total 1/);
    t.same(errors, ['flush failed']);
  },
);

t.test('healthEndpoint: 200 ok, or 503 with the reason while not ready', async (t) => {
  let ready = false;
  const get = await serve(t, {
    '/healthz': healthEndpoint(),
    '/readyz': healthEndpoint(() => ready, 'waiting'),
  });
  t.equal((await get('/healthz')).status, 200);
  const r = await get('/readyz');
  t.equal(r.status, 503);
  t.equal(await r.text(), 'waiting\n');
  ready = true;
  const r2 = await get('/readyz');
  t.equal(r2.status, 200);
  t.equal(await r2.text(), 'ok\n');
});

t.test('a bad address throws before anything listens; close() before start() is fine', async (t) => {
  t.throws(() => new EndpointServer('nope', {}, '--health-listen'), {
    message: "--health-listen 'nope' has no port",
  });
  await new EndpointServer('127.0.0.1:0', {}).close();
});
