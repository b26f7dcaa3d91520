// convert against a real API server (etcd + kube-apiserver from the e2e harness, the CRD installed):
// the converted resources pass a server-side dry run and a real apply, and what `kubectl get rlc -A -o
// yaml` then prints (a `kind: List`) validates with the same domains and descriptors as the input.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { resolveKubectl, startKube, type KubeHarness } from '../../harness/kube.js';
import { runCommand } from '../../harness/proc.js';
import { installCrd } from '../../operator/testing.js';
import { checkDocument } from '../../ratelimit/config/index.js';
import { readSources } from '../../control-plane/config-set/index.js';
import { REPO_ROOT, runInProcess, tempFiles } from './testing.js';

let kube: KubeHarness;

t.before(async () => {
  kube = await startKube();
  await installCrd(kube.kubeConfig);
});
t.teardown(async () => kube?.stop());

/**
 * Descriptors without the `value: ""` the API server stores on an entry written without a value (the
 * CRD's list-map key default); an empty value means none, to the service as to the reference.
 */
function withoutEmptyValues(list: unknown): unknown {
  if (!Array.isArray(list)) return list;
  return list.map((entry: Record<string, unknown>) => {
    const { value, descriptors, ...rest } = entry;
    return {
      ...rest,
      ...(value === '' || value === undefined ? {} : { value }),
      ...(descriptors === undefined ? {} : { descriptors: withoutEmptyValues(descriptors) }),
    };
  });
}

/** domain → { domain, descriptors } as the validator reads every document under the paths. */
function parsed(paths: string[]): Map<string, unknown> {
  const out = new Map<string, unknown>();
  for (const src of readSources(paths)) {
    if (src.kind !== 'config' && src.kind !== 'manifest') continue;
    const doc = checkDocument(src.file, src.document).document!;
    out.set(doc.domain, { domain: doc.domain, descriptors: withoutEmptyValues(doc.descriptors ?? []) });
  }
  return out;
}

t.test('converted resources apply, and kubectl get -o yaml validates back to the input', async (t) => {
  const tmp = tempFiles({
    'in/odd.yaml':
      'domain: My_API.v1\ndescriptors:\n  - key: tenant\n    value: "on"\n    descriptors:\n      - key: user\n        rate_limit: {unit: minute, requests_per_unit: 7, algorithm: sliding_window}\n',
  });
  t.teardown(() => tmp.remove());
  const inputs = [join(REPO_ROOT, 'examples/config'), tmp.path('in/odd.yaml')];
  const conv = await runInProcess(['convert', '--namespace', 'rl', ...inputs]);
  t.equal(conv.code, 0, conv.stderr);
  const manifests = tmp.path('rlc.yaml');
  writeFileSync(manifests, conv.stdout);

  const env = { ...process.env, KUBECONFIG: kube.kubeconfigPath };
  const k = (...args: string[]) => runCommand(resolveKubectl(), args, { env, cwd: REPO_ROOT });
  t.equal((await k('create', 'namespace', 'rl')).code, 0);
  const dry = await k('apply', '--dry-run=server', '-f', manifests);
  t.equal(dry.code, 0, dry.stderr);
  t.match(dry.stdout, /ratelimitconfig\.ratelimit\.envoyproxy\.io\/example created \(server dry run\)/);
  const applied = await k('apply', '-f', manifests);
  t.equal(applied.code, 0, applied.stderr);
  const got = await k('get', 'rlc', '-A', '-o', 'yaml');
  t.equal(got.code, 0, got.stderr);
  writeFileSync(tmp.path('list.yaml'), got.stdout);
  t.match(got.stdout, /^apiVersion: v1\nitems:/, 'a kind: List');
  const v = await runInProcess(['validate', tmp.path('list.yaml')]);
  t.equal(v.code, 0, v.stdout);
  t.same(parsed([tmp.path('list.yaml')]), parsed(inputs), 'the same domains and descriptors');
});
