// The CRD against a real API server: it installs, every valid example is accepted, every invalid one
// is rejected with the message its `# expect:` line names.
import { join } from 'node:path';
import t from 'tap';
import { startKube, type KubeHarness } from './harness/kube.js';
import { apiMessage, applyRlc, getRlc, installCrd, readExamples, REPO_ROOT } from '../operator/testing.js';

let kube: KubeHarness;

t.before(async () => {
  kube = await startKube();
  await installCrd(kube.kubeConfig);
});
t.teardown(async () => kube?.stop());

t.test('every valid example is accepted by the API server as written', async (t) => {
  for (const { file, objects } of readExamples(join(REPO_ROOT, 'examples', 'crds'))) {
    for (const obj of objects) {
      try {
        await applyRlc(kube.kubeConfig, obj);
        const got = await getRlc(kube.kubeConfig, obj.metadata.name!);
        t.same(got.spec, obj.spec, `${file}/${obj.metadata.name}: stored spec equals the example`);
      } catch (err) {
        t.fail(`${file}/${obj.metadata.name}: ${apiMessage(err)}`);
      }
    }
  }
});

t.test('every invalid example is rejected with the expected message', async (t) => {
  for (const { file, text, objects } of readExamples(join(REPO_ROOT, 'examples', 'invalid'))) {
    const expected = /^# expect: (.+)$/m.exec(text)![1];
    try {
      await applyRlc(kube.kubeConfig, objects[0]);
      t.fail(`${file} was accepted`);
    } catch (err) {
      const msg = apiMessage(err);
      t.ok(msg.includes(expected), `${file}: ${msg}`);
    }
  }
});

t.test('a deep tree below the CEL levels is stored as given (the operator validates it)', async (t) => {
  let tree: Record<string, unknown> = { key: 'k10', rate_limit: { unit: 'second', requests_per_unit: 1 } };
  for (let i = 9; i >= 1; i--) tree = { key: `k${i}`, descriptors: [tree] };
  const obj = {
    apiVersion: 'ratelimit.envoyproxy.io/v1alpha1',
    kind: 'RateLimitConfig',
    metadata: { name: 'deep' },
    spec: { domain: 'deep', descriptors: [tree] },
  };
  await applyRlc(kube.kubeConfig, obj);
  t.same((await getRlc(kube.kubeConfig, 'deep')).spec, obj.spec);
});
