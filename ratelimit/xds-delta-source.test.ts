// The service with CONFIG_TYPE=GRPC_XDS_DELTA against our control plane over real gRPC: it enforces
// what is served, a domain removed from the control plane stops being served, an invalid resource is
// NACKed while the previous config keeps serving, and the control plane records the pod at the
// version it runs.
import t from 'tap';
import { AdsServer, InMemorySnapshotCache, resourceFromDocument } from '../control-plane/index.js';
import { freePort } from '../harness/net.js';
import { RATELIMIT_CONFIG_TYPE_URL } from '../proto/index.js';
import { descriptor, eventually, startTestApp, type TestApp } from './test-support.js';
import { createXdsSource } from './sources/index.js';

const doc = (domain: string, rpu: number) => ({
  domain,
  descriptors: [{ key: 'k', rate_limit: { unit: 'minute', requests_per_unit: rpu } }],
});
const res = (domain: string, rpu: number) => resourceFromDocument(domain, doc(domain, rpu));

t.test('the service over delta xDS: enforce, drop a removed domain, NACK a bad resource', async (t) => {
  const port = await freePort();
  const cache = new InMemorySnapshotCache();
  const server = new AdsServer({ cache, listen: `127.0.0.1:${port}` });
  await server.start();
  t.teardown(() => server.close());
  cache.setDefaultSnapshot([res('one', 3), res('two', 4)]);

  const svc: TestApp = await startTestApp({
    env: {
      CONFIG_TYPE: 'GRPC_XDS_DELTA',
      CONFIG_GRPC_XDS_SERVER_URL: `127.0.0.1:${port}`,
      CONFIG_GRPC_XDS_NODE_ID: 'pod-1',
      XDS_CLIENT_BACKOFF_INITIAL_INTERVAL: '100ms',
      XDS_CLIENT_BACKOFF_MAX_INTERVAL: '500ms',
      HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED: 'true',
    },
    appOptions: { xdsSourceFactory: createXdsSource },
  });
  t.teardown(() => svc.close());
  const limit = async (domain: string, value: string) =>
    (await svc.call({ domain, descriptors: [descriptor(['k', value])] })).statuses[0].currentLimit
      ?.requestsPerUnit;
  t.equal(await limit('one', 'a'), 3);
  t.equal(await limit('two', 'a'), 4);
  t.equal(server.streams()[0].protocol, 'delta', 'the pod speaks delta');

  const v2 = cache.setDefaultSnapshot([res('one', 3)]).resourceSet(RATELIMIT_CONFIG_TYPE_URL).version;
  await eventually(async () => (await limit('two', 'b')) === undefined, 10_000, 'two to be dropped');
  t.equal(await limit('one', 'b'), 3, 'one is still served');
  await eventually(
    () => server.streams()[0]?.types.get(RATELIMIT_CONFIG_TYPE_URL)?.versionAcked === v2,
    10_000,
    'the ACK of the removal',
  );

  // An invalid resource (a duplicate descriptor) reaches the pod only as a NACK.
  const nacks: string[] = [];
  server.on('nack', (e) => nacks.push(e.message));
  cache.setDefaultSnapshot([
    res('one', 3),
    resourceFromDocument('bad', {
      domain: 'bad',
      descriptors: [{ key: 'k', descriptors: [{ key: 'k' }, { key: 'k' }] }],
    }),
  ]);
  await eventually(() => nacks.length > 0, 10_000, 'a NACK');
  t.match(nacks[0], /duplicate/i, 'the NACK carries the validator message');
  t.equal(await limit('one', 'c'), 3, 'the previous config keeps serving');
  t.equal(svc.app.stats.snapshot()['ratelimit.service.config_load_error'], 1);
  t.equal(
    server.streams()[0].types.get(RATELIMIT_CONFIG_TYPE_URL)?.versionAcked,
    v2,
    'the control plane records the pod at the version it runs',
  );
});
