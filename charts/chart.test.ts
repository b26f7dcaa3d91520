// The Helm chart: lints, renders, stays in step with the CRD and the operator's RBAC, and every object
// it renders is accepted by a real API server (server-side dry run with the real kubectl).
import t from 'tap';
import { readFileSync, writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { resolveHelm, resolveKubectl, startKube } from '../e2e/harness/kube.js';
import { runCommand } from '../e2e/harness/proc.js';

const repo = join(dirname(fileURLToPath(import.meta.url)), '..');
const chart = join(repo, 'charts', 'ratelimit');
const helm = resolveHelm();

type Obj = { kind: string; metadata: { name: string }; [k: string]: any };
const docs = (text: string): Obj[] =>
  parseAllDocuments(text)
    .map((d) => d.toJSON())
    .filter(Boolean);

t.test('helm lint passes', async (t) => {
  const r = await runCommand(helm, ['lint', chart]);
  t.equal(r.code, 0, r.stdout + r.stderr);
});

t.test('the chart renders the ratelimit pods wired to the operator over xDS', async (t) => {
  const r = await runCommand(helm, [
    'template',
    'rl',
    chart,
    '--namespace',
    'rl-system',
    '--set',
    'redis.authSecret=redis-auth',
  ]);
  t.equal(r.code, 0, r.stderr);
  const objs = docs(r.stdout);
  const kinds = objs.map((o) => `${o.kind}/${o.metadata.name}`).sort();
  t.same(kinds, [
    'ClusterRole/rl-ratelimit-operator',
    'ClusterRoleBinding/rl-ratelimit-operator',
    'Deployment/rl-ratelimit',
    'Deployment/rl-ratelimit-operator',
    'PodDisruptionBudget/rl-ratelimit',
    'Role/rl-ratelimit-operator-leader-election',
    'RoleBinding/rl-ratelimit-operator-leader-election',
    'Service/rl-ratelimit',
    'Service/rl-ratelimit-xds',
    'ServiceAccount/rl-ratelimit-operator',
  ]);
  const rl = objs.find((o) => o.metadata.name === 'rl-ratelimit' && o.kind === 'Deployment')!;
  const env = Object.fromEntries(
    rl.spec.template.spec.containers[0].env.map((e: any) => [e.name, e.value ?? e.valueFrom]),
  );
  t.equal(env.CONFIG_TYPE, 'GRPC_XDS_SOTW');
  t.equal(env.CONFIG_GRPC_XDS_SERVER_URL, 'rl-ratelimit-xds:18000', 'points at the operator xDS Service');
  t.same(env.CONFIG_GRPC_XDS_NODE_ID, { fieldRef: { fieldPath: 'metadata.name' } }, 'one xDS node per pod');
  t.same(env.REDIS_AUTH, { secretKeyRef: { name: 'redis-auth', key: 'auth' } });
  const op = objs.find((o) => o.metadata.name === 'rl-ratelimit-operator' && o.kind === 'Deployment')!;
  t.match(op.spec.template.spec.containers[0].args, ['--xds-listen=0.0.0.0:18000']);
});

t.test('the chart CRD is the generated one and its RBAC equals operator/deploy/rbac.yaml', async (t) => {
  t.equal(
    readFileSync(join(chart, 'crds', 'ratelimitconfigs.yaml'), 'utf8'),
    readFileSync(join(repo, 'crds', 'ratelimitconfigs.yaml'), 'utf8'),
    'run `npm run crds:generate` after changing the schema',
  );
  const manifest = docs(readFileSync(join(repo, 'operator', 'deploy', 'rbac.yaml'), 'utf8'));
  const r = await runCommand(helm, ['template', 'rl', chart]);
  const rendered = docs(r.stdout);
  for (const kind of ['ClusterRole', 'Role']) {
    t.same(
      rendered.find((o) => o.kind === kind)!.rules,
      manifest.find((o) => o.kind === kind)!.rules,
      `${kind} rules match the operator's least-privilege manifest`,
    );
  }
});

t.test('a real API server accepts every rendered object (server-side dry run)', async (t) => {
  const kube = await startKube();
  t.teardown(() => kube.stop());
  const kubectl = resolveKubectl();
  const dir = mkdtempSync(join(tmpdir(), 'rl-chart-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const env = { ...process.env, KUBECONFIG: kube.kubeconfigPath };
  const ns = await runCommand(kubectl, ['create', 'namespace', 'rl-system'], { env });
  t.equal(ns.code, 0, ns.stderr);
  const crd = await runCommand(kubectl, ['apply', '--server-side', '-f', join(chart, 'crds')], { env });
  t.equal(crd.code, 0, crd.stderr);
  const r = await runCommand(helm, ['template', 'rl', chart, '--namespace', 'rl-system']);
  const file = join(dir, 'rendered.yaml');
  writeFileSync(file, r.stdout);
  const dry = await runCommand(
    kubectl,
    ['apply', '--dry-run=server', '--server-side', '-n', 'rl-system', '-f', file],
    {
      env,
    },
  );
  t.equal(dry.code, 0, dry.stderr);
  t.match(dry.stdout, /deployment\.apps\/rl-ratelimit serverside-applied \(server dry run\)/);
});
