// A config over the xDS message size, end to end on a real API server: the built ratelimit-operator
// with a small --max-send-bytes and a real ratelimit pod over xDS. The resource that makes the snapshot
// too large gets Programmed=False reason TooLarge naming the size and the limit (and Ready=False,
// Stalled=True, a Warning Event), the pod keeps enforcing its previous config, the other resources stay
// Programmed, and removing the large resource brings everything back.
import { CoreV1Api } from '@kubernetes/client-node';
import t from 'tap';
import type { TestApp } from '../ratelimit/test-support.js';
import {
  applyRlc,
  condition,
  deleteRlc,
  getRlc,
  installCrd,
  rlcFromYaml,
  waitFor,
} from '../operator/testing.js';
import type { ServerProcess } from '../harness/net.js';
import { startKube, type KubeHarness } from '../harness/kube.js';
import { startOperatorProcess, startXdsPod } from '../harness/operator.js';

const MAX_SEND_BYTES = 4096;

let kube: KubeHarness;
let operator: ServerProcess | undefined;
let pod: TestApp | undefined;
let metricsPort = 0;

t.before(async () => {
  kube = await startKube();
  await installCrd(kube.kubeConfig);
});
t.teardown(async () => {
  await pod?.close();
  await operator?.stop(3000);
  await kube?.stop();
});

async function metric(name: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  return text
    .split('\n')
    .filter((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`))
    .reduce((sum, l) => sum + Number(l.split(' ').pop()), 0);
}

async function servedDomains(): Promise<string> {
  return (await fetch(`${pod!.debugUrl}/rlconfig`)).text();
}

t.test('a config over --max-send-bytes: TooLarge on its resource, the pod keeps its config', async (t) => {
  const op = await startOperatorProcess(kube, 'operator', [
    '--leader-elect=false',
    `--max-send-bytes=${MAX_SEND_BYTES}`,
    // No safety-net resync within the test: status follows the xDS events.
    '--resync=600000',
  ]);
  operator = op.proc;
  metricsPort = op.metrics;
  pod = await startXdsPod('pod-1', op.xds);

  await applyRlc(
    kube.kubeConfig,
    rlcFromYaml(
      'small',
      `domain: small\ndescriptors:\n  - key: k\n    rate_limit: { unit: second, requests_per_unit: 5 }`,
    ),
  );
  await waitFor(
    'small Programmed',
    async () => condition(await getRlc(kube.kubeConfig, 'small'), 'Programmed')?.status === 'True',
    30_000,
  );
  t.match(await servedDomains(), 'small', 'the pod enforces the small domain');

  // 100 descriptors (the CRD allows 128) of ~90 bytes each: well over 4096 bytes once encoded.
  const entries = Array.from(
    { length: 100 },
    (_, i) =>
      `  - key: customer\n    value: customer-${String(i).padStart(4, '0')}-with-a-long-name-to-make-it-large\n    rate_limit: { unit: minute, requests_per_unit: ${i + 1} }`,
  ).join('\n');
  await applyRlc(kube.kubeConfig, rlcFromYaml('big', `domain: big\ndescriptors:\n${entries}`));
  const programmed = await waitFor(
    'big Programmed=False reason TooLarge',
    async () => {
      const p = condition(await getRlc(kube.kubeConfig, 'big'), 'Programmed');
      return p?.reason === 'TooLarge' ? p : undefined;
    },
    20_000,
  );
  t.equal(programmed.status, 'False');
  t.match(
    programmed.message,
    new RegExp(
      `is not sent by the control plane: the response is \\d+ bytes, over the ${MAX_SEND_BYTES}-byte maximum`,
    ),
    'the message names the size and the limit',
  );
  t.match(programmed.message, '--max-send-bytes', 'and the settings to raise');
  const big = await getRlc(kube.kubeConfig, 'big');
  t.equal(condition(big, 'Accepted')?.status, 'True', 'the resource itself is valid');
  t.equal(condition(big, 'Ready')?.status, 'False');
  t.equal(condition(big, 'Ready')?.reason, 'TooLarge');
  t.equal(condition(big, 'Stalled')?.status, 'True', 'Stalled: a person must act');
  t.equal(
    condition(await getRlc(kube.kubeConfig, 'small'), 'Programmed')?.status,
    'True',
    'the unchanged resource stays Programmed (the pod still runs it)',
  );
  const rlconfig = await servedDomains();
  t.match(rlconfig, 'small', 'the pod keeps enforcing its previous config');
  t.notMatch(rlconfig, 'customer-0001', 'and never got the large one');
  t.ok((await metric('ratelimit_operator_xds_response_too_large_total')) >= 1, 'counted');
  const core = kube.kubeConfig.makeApiClient(CoreV1Api);
  const warned = await waitFor(
    'a TooLarge Warning Event',
    async () =>
      (await core.listNamespacedEvent({ namespace: 'default' })).items.find(
        (e) => e.reason === 'TooLarge' && e.involvedObject.name === 'big',
      ),
    15_000,
  );
  t.equal(warned.type, 'Warning');

  // Shrinking the config (here: deleting the large resource) is served at once.
  await deleteRlc(kube.kubeConfig, 'big');
  await applyRlc(
    kube.kubeConfig,
    rlcFromYaml(
      'small',
      `domain: small\ndescriptors:\n  - key: k\n    rate_limit: { unit: second, requests_per_unit: 7 }`,
    ),
  );
  await waitFor(
    'small generation 2 Programmed',
    async () => {
      const p = condition(await getRlc(kube.kubeConfig, 'small'), 'Programmed');
      return p?.status === 'True' && p.observedGeneration === 2;
    },
    30_000,
  );
});
