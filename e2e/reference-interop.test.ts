// Interop with the reference Go service (envoyproxy/ratelimit service_cmd, built from the Go module
// proxy by scripts/build-go-tools.sh): it takes its config from OUR control plane over xDS, ACKs
// it, enforces it, NACKs a bad snapshot (recorded by our server), and shares counters with our
// service in one Redis, key for key.
import t from 'tap';
import { AdsServer, InMemorySnapshotCache, resourceFromDocument } from '../control-plane/index.js';
import { freePort } from '../harness/net.js';
import { startReferenceService } from '../harness/reference.js';
import { startRedis } from '../harness/redis/index.js';
import { descriptor, eventually, startTestApp } from '../ratelimit/test-support.js';
import { callOnce } from '../cli/ratelimit-client/main.js';

const doc = (rpu: number) => ({
  domain: 'interop',
  descriptors: [{ key: 'k', rate_limit: { unit: 'hour', requests_per_unit: rpu } }],
});

t.test('the reference service against our control plane and beside our service', async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const cache = new InMemorySnapshotCache();
  const xdsPort = await freePort();
  const server = new AdsServer({ cache, listen: `127.0.0.1:${xdsPort}` });
  await server.start();
  t.teardown(() => server.close());
  const acks: string[] = [];
  const nacks: { nodeId: string; message: string }[] = [];
  server.on('ack', (e) => acks.push(e.stream.nodeId));
  server.on('nack', (e) => nacks.push({ nodeId: e.stream.nodeId, message: e.message }));
  cache.setDefaultSnapshot([resourceFromDocument('interop', doc(5))]);

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
  const dial = reference.dial;
  const askRef = (value: string) =>
    callOnce({ dialString: dial, domain: 'interop', descriptors: [[{ key: 'k', value }]] });

  await eventually(
    async () => {
      try {
        return (await askRef('probe')).statuses[0].currentLimit?.requestsPerUnit === 5;
      } catch {
        return false;
      }
    },
    30_000,
    'the reference service to serve our config',
  ).catch((err) => {
    throw new Error(`${err.message}\n${ref.logTail(40)}`);
  });
  t.ok(acks.includes('reference-pod'), 'our server recorded the reference pod ACK');
  const state = server.streams().find((s) => s.nodeId === 'reference-pod');
  t.ok(state, 'the reference pod shows in the stream state');

  // It enforces what we serve: 5 per hour.
  const codes: string[] = [];
  for (let i = 0; i < 6; i++) codes.push((await askRef('enforce')).overallCode);
  t.same(codes, ['OK', 'OK', 'OK', 'OK', 'OK', 'OVER_LIMIT']);

  // Shared Redis: our service counts on the same keys (same format, same commands).
  const ours = await startTestApp({
    files: {
      'interop.yaml':
        'domain: interop\ndescriptors:\n  - key: k\n    rate_limit: { unit: hour, requests_per_unit: 5 }\n',
    },
    env: { BACKEND_TYPE: 'redis', REDIS_SOCKET_TYPE: 'tcp', REDIS_URL: redis.url },
  });
  t.teardown(() => ours.close());
  await askRef('shared');
  await askRef('shared');
  const mine = await ours.call({ domain: 'interop', descriptors: [descriptor(['k', 'shared'])] });
  t.equal(mine.statuses[0].limitRemaining, 2, 'our service sees the reference hits (3rd hit leaves 2)');
  const back = await askRef('shared');
  t.equal(back.statuses[0].limitRemaining, 1, 'the reference sees ours (4th hit leaves 1)');
  const keys = await redis.client().keys('interop_k_shared_*');
  t.equal(keys.length, 1, 'one key for both services');

  // A bad snapshot: the reference NACKs it, our server records the NACK, the old config keeps serving.
  cache.setDefaultSnapshot([
    resourceFromDocument('interop', { domain: 'interop', descriptors: [{ key: 'k' }, { key: 'k' }] }),
  ]);
  await eventually(() => nacks.some((n) => n.nodeId === 'reference-pod'), 15_000, 'the reference NACK');
  const nack = nacks.find((n) => n.nodeId === 'reference-pod')!;
  t.match(nack.message, /duplicate/i, `NACK message: ${nack.message}`);
  const after = await askRef('after-nack');
  t.equal(after.statuses[0].currentLimit?.requestsPerUnit, 5, 'the reference keeps its last good config');

  // And a good update after that is taken.
  cache.setDefaultSnapshot([resourceFromDocument('interop', doc(9))]);
  await eventually(
    async () => (await askRef('update')).statuses[0].currentLimit?.requestsPerUnit === 9,
    15_000,
    'update',
  );
  t.pass('the reference takes the next good snapshot');
});
