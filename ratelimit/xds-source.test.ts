// The service with CONFIG_TYPE=GRPC_XDS_SOTW against our control plane over real gRPC:
// it waits for the first config, enforces what is served, NACKs an invalid config while the
// previous one keeps serving, and keeps serving while the control plane is down.
import t from 'tap';
import { AdsServer, InMemorySnapshotCache, resourceFromDocument } from '../control-plane/index.js';
import { freePort } from '../harness/net.js';
import { descriptor, eventually, startTestApp, type TestApp } from './test-support.js';
import { createXdsSource } from './sources/index.js';

const doc = (rpu: number) => ({
  domain: 'xds',
  descriptors: [{ key: 'k', rate_limit: { unit: 'minute', requests_per_unit: rpu } }],
});

t.test('the service takes, enforces and NACKs configs from the control plane', async (t) => {
  const port = await freePort();
  const cache = new InMemorySnapshotCache();
  let server = new AdsServer({ cache, listen: `127.0.0.1:${port}` });
  await server.start();
  t.teardown(() => server.close());
  cache.setDefaultSnapshot([resourceFromDocument('xds', doc(3))]);

  const svc: TestApp = await startTestApp({
    env: {
      CONFIG_TYPE: 'GRPC_XDS_SOTW',
      CONFIG_GRPC_XDS_SERVER_URL: `127.0.0.1:${port}`,
      CONFIG_GRPC_XDS_NODE_ID: 'pod-1',
      XDS_CLIENT_BACKOFF_INITIAL_INTERVAL: '100ms',
      XDS_CLIENT_BACKOFF_MAX_INTERVAL: '500ms',
      HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED: 'true',
    },
    appOptions: { xdsSourceFactory: createXdsSource },
  });
  t.teardown(() => svc.close());
  t.ok(svc.app.health.isHealthy(), 'healthy once a config with a domain is loaded');
  const r = await svc.call({ domain: 'xds', descriptors: [descriptor(['k', 'a'])] });
  t.equal(r.statuses[0].currentLimit!.requestsPerUnit, 3, 'the served limit is enforced');

  cache.setDefaultSnapshot([resourceFromDocument('xds', doc(8))]);
  await eventually(
    async () => {
      const u = await svc.call({ domain: 'xds', descriptors: [descriptor(['k', 'b'])] });
      return u.statuses[0].currentLimit?.requestsPerUnit === 8;
    },
    5000,
    'the updated limit',
  );
  t.pass('update applied');

  // An invalid config (a unit that does not exist) reaches the pod only as a NACK.
  const nacks: string[] = [];
  server.on('nack', (e) => nacks.push(e.message));
  cache.setDefaultSnapshot([
    resourceFromDocument('xds', {
      domain: 'xds',
      descriptors: [{ key: 'k', descriptors: [{ key: 'k' }, { key: 'k' }] }],
    }),
  ]);
  await eventually(() => nacks.length > 0, 5000, 'a NACK');
  t.match(nacks[0], /duplicate/i, 'the NACK carries the validator message');
  const still = await svc.call({ domain: 'xds', descriptors: [descriptor(['k', 'c'])] });
  t.equal(still.statuses[0].currentLimit!.requestsPerUnit, 8, 'the previous config keeps serving');
  t.equal(svc.app.stats.snapshot()['ratelimit.service.config_load_error'], 1);

  // Control plane down: decisions continue on the last good config; back up: updates flow again.
  await server.close();
  const during = await svc.call({ domain: 'xds', descriptors: [descriptor(['k', 'd'])] });
  t.equal(during.statuses[0].currentLimit!.requestsPerUnit, 8, 'serving while disconnected');
  cache.setDefaultSnapshot([resourceFromDocument('xds', doc(11))]);
  server = new AdsServer({ cache, listen: `127.0.0.1:${port}` });
  await server.start();
  await eventually(
    async () => {
      const u = await svc.call({ domain: 'xds', descriptors: [descriptor(['k', 'e'])] });
      return u.statuses[0].currentLimit?.requestsPerUnit === 11;
    },
    10_000,
    'the config after reconnect',
  );
  t.pass('reconnected and updated');
});
