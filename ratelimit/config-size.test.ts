// CONFIG_MAX_DESCRIPTORS: a config with more descriptors (every level, every domain) than the pod's
// bound is refused at load, from files and over xDS alike, with a message naming the setting; at
// startup the service stays unready, and later the config it serves stays in place.
import t from 'tap';
import { AdsServer, InMemorySnapshotCache, resourceFromDocument } from '../control-plane/index.js';
import { createLogger } from '../common/index.js';
import { freePort } from '../harness/net.js';
import { descriptor, eventually, startTestApp } from './test-support.js';
import { createXdsSource } from './sources/index.js';

/** `routes` nested descriptors under one top-level descriptor: routes + 1 descriptors in all. */
const doc = (domain: string, routes: number, rpu = 7) => ({
  domain,
  descriptors: [
    {
      key: 'tenant',
      rate_limit: { unit: 'minute', requests_per_unit: rpu },
      descriptors: Array.from({ length: routes }, (_, i) => ({
        key: 'route',
        value: `/r${i}`,
        rate_limit: { unit: 'minute', requests_per_unit: rpu },
      })),
    },
  ],
});
const yaml = (d: ReturnType<typeof doc>) => JSON.stringify(d) + '\n';

/** A logger whose error lines are also kept in `errors`. */
function recordingLogger(errors: string[]) {
  const logger = createLogger({ level: 'error' });
  const error = logger.error.bind(logger);
  logger.error = ((msg: unknown, ...rest: unknown[]) => {
    errors.push(String(msg));
    return (error as (...a: unknown[]) => void)(msg, ...rest);
  }) as typeof logger.error;
  return logger;
}

const TOO_MANY = /the config has 6 descriptors .*more than the limit of 5 \(CONFIG_MAX_DESCRIPTORS\)/;

t.test(
  'config files: too many descriptors keep the service unready, then never replace a good config',
  async (t) => {
    const errors: string[] = [];
    const svc = await startTestApp({
      files: { 'a.yaml': yaml(doc('files', 5)) },
      // Listening without a config (otherwise the start waits for a good one), so readiness can be asked.
      env: {
        CONFIG_MAX_DESCRIPTORS: '5',
        HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED: 'true',
        FORCE_START_WITHOUT_INITIAL_CONFIG: 'true',
      },
      appOptions: { logger: recordingLogger(errors) },
    });
    t.teardown(() => svc.close());
    t.notOk(svc.app.health.isHealthy(), 'unready at startup with the refused config');
    t.match(errors.join('\n'), TOO_MANY, 'the error names the count, the bound and the setting');

    svc.writeConfig('a.yaml', yaml(doc('files', 4, 3)));
    await eventually(() => svc.app.health.isHealthy(), 20_000, 'ready once a config within the bound loads');
    const r = await svc.call({
      domain: 'files',
      descriptors: [descriptor(['tenant', 't'], ['route', '/r1'])],
    });
    t.equal(r.statuses[0].currentLimit!.requestsPerUnit, 3, 'the config within the bound serves');

    // Two files: each within the bound, together past it.
    const before = errors.length;
    svc.writeConfig('b.yaml', yaml(doc('other', 0, 9)));
    await eventually(() => errors.length > before, 20_000, 'the second file refused');
    t.match(errors.at(-1), TOO_MANY, 'the bound counts every file together');
    const still = await svc.call({
      domain: 'files',
      descriptors: [descriptor(['tenant', 't'], ['route', '/r2'])],
    });
    t.equal(still.statuses[0].currentLimit!.requestsPerUnit, 3, 'the good config keeps serving');
    const other = await svc.call({ domain: 'other', descriptors: [descriptor(['tenant', 't'])] });
    t.same(other.statuses[0].currentLimit ?? null, null, 'nothing of the refused config is served');
  },
);

t.test('xDS: a push with too many descriptors is NACKed with the bound and the setting', async (t) => {
  const port = await freePort();
  const cache = new InMemorySnapshotCache();
  const server = new AdsServer({ cache, listen: `127.0.0.1:${port}` });
  await server.start();
  t.teardown(() => server.close());
  cache.setDefaultSnapshot([resourceFromDocument('xds', doc('xds', 4, 3))]);
  const svc = await startTestApp({
    env: {
      CONFIG_TYPE: 'GRPC_XDS_SOTW',
      CONFIG_GRPC_XDS_SERVER_URL: `127.0.0.1:${port}`,
      CONFIG_GRPC_XDS_NODE_ID: 'pod-1',
      XDS_CLIENT_BACKOFF_INITIAL_INTERVAL: '100ms',
      XDS_CLIENT_BACKOFF_MAX_INTERVAL: '500ms',
      HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED: 'true',
      CONFIG_MAX_DESCRIPTORS: '5',
    },
    appOptions: { xdsSourceFactory: createXdsSource },
  });
  t.teardown(() => svc.close());
  t.ok(svc.app.health.isHealthy(), 'a config within the bound serves');

  const nacks: string[] = [];
  server.on('nack', (e) => nacks.push(e.message));
  cache.setDefaultSnapshot([resourceFromDocument('xds', doc('xds', 5, 8))]);
  await eventually(() => nacks.length > 0, 10_000, 'a NACK');
  t.match(nacks[0], TOO_MANY, 'the NACK names the count, the bound and the setting');
  const r = await svc.call({ domain: 'xds', descriptors: [descriptor(['tenant', 't'], ['route', '/r1'])] });
  t.equal(r.statuses[0].currentLimit!.requestsPerUnit, 3, 'the previous config keeps serving');
});
