// Feature negotiation over xDS with a mixed fleet: the reference Go service (service_cmd, which ignores
// fields it does not know) and our service, on one control plane. A config using a sliding window
// and several limits reaches our pod, which enforces it; the reference pod never receives it (it
// would enforce the sliding window as a fixed one and the list as no limit) and keeps the last
// version it can enforce; the stream state says what was withheld and why.
import t from 'tap';
import { AdsServer, InMemorySnapshotCache, resourceFromDocument } from '../control-plane/index.js';
import { freePort } from '../harness/net.js';
import { startReferenceService } from '../harness/reference.js';
import { startRedis } from '../harness/redis/index.js';
import { descriptor, eventually, startTestApp } from '../ratelimit/test-support.js';
import { callOnce } from '../cli/ratelimit-client/main.js';
import { createXdsSource } from '../ratelimit/sources/index.js';

const fixed = (rpu: number) => ({
  domain: 'mixed',
  descriptors: [{ key: 'k', rate_limit: { unit: 'hour', requests_per_unit: rpu } }],
});
const sliding = {
  domain: 'mixed',
  descriptors: [
    { key: 'k', rate_limit: { unit: 'hour', requests_per_unit: 3, algorithm: 'sliding_window' } },
    {
      key: 'tenant',
      value_to_metric: true,
      metadata: { owner: 'team-a' },
      rate_limits: [
        { unit: 'minute', requests_per_unit: 2, algorithm: 'token_bucket', burst: 2 },
        { unit: 'day', requests_per_unit: 100 },
      ],
    },
  ],
};

t.test('a reference pod never receives a config using features it does not announce', async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const cache = new InMemorySnapshotCache();
  const xdsPort = await freePort();
  const server = new AdsServer({ cache, listen: `127.0.0.1:${xdsPort}` });
  await server.start();
  t.teardown(() => server.close());
  const withheld: { nodeId: string; features: readonly string[] }[] = [];
  server.on('withheld', (e) => withheld.push({ nodeId: e.stream.nodeId, features: e.features }));
  cache.setDefaultSnapshot([resourceFromDocument('mixed', fixed(5))]);

  const reference = await startReferenceService(t, {
    env: {
      CONFIG_TYPE: 'GRPC_XDS_SOTW',
      CONFIG_GRPC_XDS_SERVER_URL: `127.0.0.1:${xdsPort}`,
      CONFIG_GRPC_XDS_NODE_ID: 'reference-pod',
      REDIS_SOCKET_TYPE: 'tcp',
      REDIS_URL: redis.url,
    },
  });
  const ref = reference.proc;
  const refDial = reference.dial;
  const askRef = async (key: string, value: string) =>
    callOnce({ dialString: refDial, domain: 'mixed', descriptors: [[{ key, value }]] });
  await eventually(
    async () => {
      try {
        return (await askRef('k', 'probe')).statuses[0].currentLimit?.requestsPerUnit === 5;
      } catch {
        return false;
      }
    },
    30_000,
    'the reference service to serve the fixed-window config',
  ).catch((err) => {
    throw new Error(`${err.message}\n${ref.logTail(40)}`);
  });

  const ours = await startTestApp({
    env: {
      CONFIG_TYPE: 'GRPC_XDS_SOTW',
      CONFIG_GRPC_XDS_SERVER_URL: `127.0.0.1:${xdsPort}`,
      CONFIG_GRPC_XDS_NODE_ID: 'our-pod',
      XDS_CLIENT_BACKOFF_INITIAL_INTERVAL: '100ms',
      XDS_CLIENT_BACKOFF_MAX_INTERVAL: '500ms',
      BACKEND_TYPE: 'redis',
      REDIS_SOCKET_TYPE: 'tcp',
      REDIS_URL: redis.url,
    },
    appOptions: { xdsSourceFactory: createXdsSource },
  });
  t.teardown(() => ours.close());
  const oursState = server.streams().find((s) => s.nodeId === 'our-pod');
  t.same([...(oursState?.features ?? [])].sort(), ['rate_limits', 'sliding_window', 'token_bucket']);
  const refState = server.streams().find((s) => s.nodeId === 'reference-pod');
  t.equal(refState?.features.size, 0, 'the reference pod announces nothing');

  // The sliding config: our pod takes it and enforces every new field.
  cache.setDefaultSnapshot([resourceFromDocument('mixed', sliding)]);
  await eventually(
    async () =>
      (await ours.call({ domain: 'mixed', descriptors: [descriptor(['k', 'probe'])] })).statuses[0]
        .currentLimit?.requestsPerUnit === 3,
    15_000,
    'our pod to serve the sliding-window config',
  );
  t.match(
    ours.app.service.getConfig()!.dump(),
    /mixed\.k: unit=HOUR requests_per_unit=3, shadow_mode: false, quota_mode: false, algorithm: sliding_window/,
  );
  const codes: string[] = [];
  for (let i = 0; i < 4; i++) {
    codes.push((await ours.call({ domain: 'mixed', descriptors: [descriptor(['k', 'slide'])] })).overallCode);
  }
  t.same(codes, ['OK', 'OK', 'OK', 'OVER_LIMIT'], 'our pod enforces 3 per hour');
  t.ok((await redis.client().keys('{mixed_k_slide_}sw:3600:*')).length > 0, 'counted by the script');
  const listCodes: string[] = [];
  for (let i = 0; i < 3; i++) {
    listCodes.push(
      (await ours.call({ domain: 'mixed', descriptors: [descriptor(['tenant', 'a'])] })).overallCode,
    );
  }
  t.same(listCodes, ['OK', 'OK', 'OVER_LIMIT'], 'the list form arrives and its bucket (burst 2) binds');
  t.equal(ours.app.stats.ruleStats('mixed.tenant_a').totalHits.value, 3, 'value_to_metric arrived too');

  // The reference pod is never sent it: it keeps enforcing the fixed-window version it has.
  await eventually(() => withheld.some((w) => w.nodeId === 'reference-pod'), 15_000, 'the withheld event');
  t.same(withheld.find((w) => w.nodeId === 'reference-pod')!.features, [
    'rate_limits',
    'sliding_window',
    'token_bucket',
  ]);
  t.notOk(
    withheld.some((w) => w.nodeId === 'our-pod'),
    'nothing withheld from our pod',
  );
  const typeState = [
    ...server
      .streams()
      .find((s) => s.nodeId === 'reference-pod')!
      .types.values(),
  ][0]!;
  t.ok(typeState.withheld, 'the stream state records the withheld version');
  t.not(typeState.versionAcked, typeState.withheld!.version, 'the reference pod runs an older version');
  const refNow = await askRef('k', 'still-fixed');
  t.equal(refNow.statuses[0].currentLimit?.requestsPerUnit, 5, 'the reference still enforces 5/hour, not 3');

  // A config it can enforce reaches it again.
  cache.setDefaultSnapshot([resourceFromDocument('mixed', fixed(9))]);
  await eventually(
    async () => (await askRef('k', 'update')).statuses[0].currentLimit?.requestsPerUnit === 9,
    15_000,
    'the reference pod to take the next enforceable version',
  );
  t.equal(
    [
      ...server
        .streams()
        .find((s) => s.nodeId === 'reference-pod')!
        .types.values(),
    ][0]!.withheld,
    undefined,
    'nothing withheld any more',
  );
});
