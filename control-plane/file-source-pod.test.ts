// The standalone control plane's folder served to a real pod over ADS: a truncated file never
// reaches the pod (the banned client stays limited, the last good snapshot keeps serving), and an
// editor's truncate-then-write serves the new text, never the empty file in between.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { freePort } from '../harness/net.js';
import { startXdsPod } from '../harness/operator.js';
import { eventually, type TestApp } from '../ratelimit/test-support.js';
import { InMemorySnapshotCache } from './cache.js';
import { DirectoryConfigSource } from './file-source.js';
import { AdsServer } from './server.js';

const EXAMPLE = readFileSync(
  fileURLToPath(new URL('../examples/config/example.yaml', import.meta.url)),
  'utf8',
);

async function statusOf(pod: TestApp, key: string, value: string) {
  const res = await pod.call({ domain: 'example', descriptors: [{ entries: [{ key, value }] }] });
  return res.statuses[0]!;
}

t.test('a truncated file keeps the pod limited; truncate-then-write serves the new text', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'rl-cp-pod-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'example.yaml');
  writeFileSync(file, EXAMPLE);
  const cache = new InMemorySnapshotCache();
  const source = new DirectoryConfigSource({ dir, cache, debounceMs: 50, rescanIntervalMs: 500 });
  const rejected: string[] = [];
  source.on('rejected', (e) => rejected.push(e.error));
  await source.start();
  t.teardown(() => source.close());
  const port = await freePort();
  const server = new AdsServer({ cache, listen: `127.0.0.1:${port}` });
  await server.start();
  t.teardown(() => server.close());
  const pod = await startXdsPod('pod-1', port);
  t.teardown(() => pod.close());
  await eventually(
    async () => (await statusOf(pod, 'client', 'banned').catch(() => undefined))?.code === 'OVER_LIMIT',
    60_000,
    'the pod to serve the example',
  );

  // The banned client is asked about all along: one OK answer is the bug.
  const answers: string[] = [];
  let asking = true;
  const asker = (async () => {
    while (asking) {
      const code = (await statusOf(pod, 'client', 'banned').catch(() => undefined))?.code;
      answers.push(code ?? 'error');
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  t.teardown(async () => {
    asking = false;
    await asker;
  });

  const gotRejected = once(source, 'rejected');
  writeFileSync(file, '');
  await Promise.race([
    gotRejected,
    new Promise((_, reject) => setTimeout(() => reject(new Error('no rejection within 20 s')), 20_000)),
  ]);
  t.match(rejected[0], 'example.yaml: domain: config file cannot have empty domain');
  t.equal(
    (await statusOf(pod, 'client', 'banned')).code,
    'OVER_LIMIT',
    'the pod still limits the banned client',
  );

  // An editor's save: truncate, then the new text shortly after.
  writeFileSync(file, '');
  await new Promise((r) => setTimeout(r, 100));
  writeFileSync(file, EXAMPLE.replace('requests_per_unit: 100', 'requests_per_unit: 42'));
  await eventually(
    async () => (await statusOf(pod, 'tenant', 'free-1')).currentLimit?.requestsPerUnit === 42,
    30_000,
    'the new text to serve',
  );
  asking = false;
  await asker;
  t.equal(rejected.length, 1, 'the file caught mid-write was read again, not rejected');
  t.ok(answers.length > 0, `${answers.length} answers`);
  t.same(
    answers.filter((a) => a !== 'OVER_LIMIT'),
    [],
    'the banned client was limited in every answer',
  );
});
