// A large xDS push takes the files' path (decoded and validated on the config worker, compiled in time
// slices), so the service keeps answering while it is read: the previous config answers from the
// moment the push arrives until the new one is applied, or, for a bad push, the NACK goes out with the
// validator's message and the previous config keeps serving.
import t, { type Test } from 'tap';
import { AdsServer, InMemorySnapshotCache, resourceFromDocument } from '../control-plane/index.js';
import { freePort } from '../harness/net.js';
import { startXdsPod } from '../harness/operator.js';
import { descriptor, eventually, type TestApp } from './test-support.js';
import { createXdsSource, type XdsConfigSource } from './sources/index.js';

const DESCRIPTORS = 10_000;

/** 10k tenant descriptors and the probe `k` limited to `rpu`; `duplicate` repeats the first tenant last. */
function bigDoc(rpu: number, duplicate = false): unknown {
  const descriptors: unknown[] = [];
  for (let i = 0; i < DESCRIPTORS; i++) {
    descriptors.push({
      key: 'tenant',
      value: `t${i}`,
      rate_limit: { unit: 'minute', requests_per_unit: 1000 + i },
    });
  }
  descriptors.push({ key: 'k', rate_limit: { unit: 'minute', requests_per_unit: rpu } });
  if (duplicate) descriptors.push(descriptors[0]);
  return { domain: 'xds', descriptors };
}

async function setup(t: Test) {
  const port = await freePort();
  const cache = new InMemorySnapshotCache();
  const server = new AdsServer({ cache, listen: `127.0.0.1:${port}` });
  await server.start();
  t.teardown(() => server.close());
  cache.setDefaultSnapshot([resourceFromDocument('xds', bigDoc(1))]);
  let source: XdsConfigSource | undefined;
  const svc: TestApp = await startXdsPod('pod-1', port, {
    xdsSourceFactory: async (deps) => (source = await createXdsSource(deps)),
  });
  t.teardown(() => svc.close());
  const limit = async () =>
    (await svc.call({ domain: 'xds', descriptors: [descriptor(['k', 'x'])] })).statuses[0]!.currentLimit
      ?.requestsPerUnit;
  // The pod starts without waiting for its first config (xdsPodEnv): wait for it to serve.
  await eventually(
    async () => (await limit().catch(() => undefined)) === 1,
    60_000,
    'the first config to serve',
  );
  t.equal(await limit(), 1, 'the first config serves');
  return { cache, server, svc, client: source!.client, limit };
}

/**
 * Calls the service back to back from the moment a push arrives (the client's `response` event)
 * until `done` fires, and returns the limits it was answered with.
 */
function answersWhileApplying(
  client: XdsConfigSource['client'],
  limit: () => Promise<number | undefined>,
  done: 'config' | 'nack',
): Promise<(number | undefined)[]> {
  return new Promise((resolve, reject) => {
    const seen: (number | undefined)[] = [];
    let finished = false;
    client.once(done, () => {
      finished = true;
      resolve(seen);
    });
    client.once('response', () => {
      void (async () => {
        while (!finished) {
          const l = await limit();
          // An answer that arrives after the push was applied may already be the new config's.
          if (!finished) seen.push(l);
        }
      })().catch(reject);
    });
  });
}

t.test(
  'a 10k-descriptor push keeps the service answering (the old config) while it is read, and serves the new one after',
  async (t) => {
    const { cache, client, limit } = await setup(t);
    const during = answersWhileApplying(client, limit, 'config');
    cache.setDefaultSnapshot([resourceFromDocument('xds', bigDoc(2))]);
    const answers = await during;
    t.ok(
      answers.length > 0,
      `calls answered between the push's arrival and its application (${answers.length})`,
    );
    t.same([...new Set(answers)], [1], 'each by the previous config');
    t.equal(await limit(), 2, 'the new config serves once applied');
  },
);

t.test(
  'a bad 10k-descriptor push is NACKed with the field named while the service keeps answering, and the previous config keeps serving',
  async (t) => {
    const { cache, server, svc, client, limit } = await setup(t);
    const nacks: string[] = [];
    server.on('nack', (e) => nacks.push(e.message));
    const during = answersWhileApplying(client, limit, 'nack');
    cache.setDefaultSnapshot([resourceFromDocument('xds', bigDoc(2, true))]);
    const answers = await during;
    t.ok(answers.length > 0, `calls answered between the push's arrival and the NACK (${answers.length})`);
    t.same([...new Set(answers)], [1], 'each by the previous config');
    await eventually(() => nacks.length > 0, 10_000, 'the NACK at the server');
    t.match(nacks[0], /descriptors\[10001\].*duplicate/i, 'the NACK names the field and the fault');
    t.equal(await limit(), 1, 'the previous config keeps serving');
    t.equal(svc.app.stats.snapshot()['ratelimit.service.config_load_error'], 1);
  },
);
