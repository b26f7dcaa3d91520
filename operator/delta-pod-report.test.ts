// What the operator reads about a pod that speaks delta xDS: the version it ACKed (the snapshot version
// the control plane sent as system_version_info) and, after a NACK, the refused version with the pod's
// message while the ACKed version stays the one it runs. The same report, over a real gRPC stream from
// our client in delta mode, as for a state-of-the-world pod.
import t from 'tap';
import { once } from 'node:events';
import { AdsServer, InMemorySnapshotCache, resourceFromDocument } from '../control-plane/index.js';
import { RATELIMIT_CONFIG_TYPE_URL } from '../proto/index.js';
import { compileConfig } from '../ratelimit/config/index.js';
import { XdsConfigClient } from '../ratelimit/sources/index.js';
import { reportStream, toPodState } from './pod-reports.js';

const doc = (domain: string, rpu: number) => ({
  domain,
  descriptors: [{ key: 'k', rate_limit: { unit: 'second', requests_per_unit: rpu } }],
});

async function until(cond: () => boolean, what: string, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timeout waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

t.test('a delta pod is reported at the snapshot version it ACKed, and its NACK beside it', async (t) => {
  const cache = new InMemorySnapshotCache();
  const server = new AdsServer({ cache, listen: '127.0.0.1:0' });
  await server.start();
  t.teardown(() => server.close());
  const v1 = cache
    .setDefaultSnapshot([resourceFromDocument('a', doc('a', 1)), resourceFromDocument('b', doc('b', 2))])
    .resourceSet(RATELIMIT_CONFIG_TYPE_URL).version;

  const client = new XdsConfigClient({
    protocol: 'delta',
    nodeId: 'delta-pod',
    serverUrl: `127.0.0.1:${server.port}`,
    connectRetryInterval: 100,
    onConfig(documents) {
      try {
        compileConfig(documents);
        return undefined;
      } catch (err) {
        return (err as Error).message;
      }
    },
  });
  t.teardown(() => client.close());
  const pushed: number[] = [];
  client.on('response', (r) => pushed.push(r.resources));
  const first = once(client, 'ack');
  client.start();
  await first;
  const report = () => server.streams().map((s) => toPodState(reportStream(s), 'replica-0'));
  await until(() => report()[0]?.ackedVersion === v1, 'the pod at v1');
  t.equal(report().length, 1);
  t.equal(server.streams()[0].protocol, 'delta', 'the pod speaks delta');
  t.match(report()[0].pod, /^delta-pod \(.* via replica-0\)$/);
  t.equal(report()[0].lastNack, undefined);

  // One domain changed: a delta of one resource, and the pod is reported at the new snapshot version.
  const v2 = cache
    .setDefaultSnapshot([resourceFromDocument('a', doc('a', 1)), resourceFromDocument('b', doc('b', 5))])
    .resourceSet(RATELIMIT_CONFIG_TYPE_URL).version;
  await until(() => report()[0]?.ackedVersion === v2, 'the pod at v2');
  t.same(pushed, [2, 1], 'the whole set, then the one changed resource');

  // A resource the pod refuses: reported as its NACK of v3, still running v2.
  const v3 = cache
    .setDefaultSnapshot([
      resourceFromDocument('a', doc('a', 1)),
      resourceFromDocument('b', doc('b', 5)),
      resourceFromDocument('b-too', doc('b', 7)),
    ])
    .resourceSet(RATELIMIT_CONFIG_TYPE_URL).version;
  await until(() => report()[0]?.lastNack !== undefined, 'the NACK');
  const p = report()[0];
  t.equal(p.ackedVersion, v2, 'still at the version it runs');
  t.equal(p.lastNack?.version, v3);
  t.match(p.lastNack?.message, /domain/);
});
