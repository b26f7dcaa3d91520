// The CRD against a real API server: it installs, every valid example is accepted, every invalid one
// is rejected with the message its `# expect:` line names.
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import t from 'tap';
import { resolveKubectl, startKube, type KubeHarness } from '../harness/kube.js';
import { runCommand } from '../harness/proc.js';
import { RateLimitOperator } from '../operator/operator.js';
import { MAX_DESCRIPTOR_DEPTH } from '../ratelimit/config/index.js';
import {
  apiMessage,
  applyRlc,
  condition,
  getRlc,
  installCrd,
  readExamples,
  REPO_ROOT,
  waitFor,
} from '../operator/testing.js';

let kube: KubeHarness;

/**
 * A spec as the API server stores it: every descriptor without a value gets `value: ''` (the CRD's
 * default, because descriptor lists are list maps keyed by key and value; an empty value means none).
 */
function stored(spec: unknown): unknown {
  const level = (list: unknown): unknown =>
    Array.isArray(list)
      ? list.map((d: Record<string, unknown>) => ({
          ...d,
          value: d.value ?? '',
          ...(d.descriptors === undefined ? {} : { descriptors: level(d.descriptors) }),
        }))
      : list;
  const s = spec as Record<string, unknown>;
  return { ...s, descriptors: level(s.descriptors) };
}

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
        t.same(got.spec, stored(obj.spec), `${file}/${obj.metadata.name}: stored spec equals the example`);
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

t.test(
  'a tree at the depth limit is stored as given; one level more is refused by the API server',
  async (t) => {
    const tree = (levels: number) => {
      let entry: Record<string, unknown> = {
        key: `k${levels}`,
        rate_limit: { unit: 'second', requests_per_unit: 1 },
      };
      for (let i = levels - 1; i >= 1; i--) entry = { key: `k${i}`, descriptors: [entry] };
      return entry;
    };
    const obj = (levels: number) => ({
      apiVersion: 'ratelimit.envoyproxy.io/v1alpha1',
      kind: 'RateLimitConfig',
      metadata: { name: `deep-${levels}` },
      spec: { domain: 'deep', descriptors: [tree(levels)] },
    });
    await applyRlc(kube.kubeConfig, obj(MAX_DESCRIPTOR_DEPTH));
    t.same(
      (await getRlc(kube.kubeConfig, `deep-${MAX_DESCRIPTOR_DEPTH}`)).spec,
      stored(obj(MAX_DESCRIPTOR_DEPTH).spec),
    );
    try {
      await applyRlc(kube.kubeConfig, obj(MAX_DESCRIPTOR_DEPTH + 1));
      t.fail('a tree one level deeper than the limit was stored');
    } catch (err) {
      t.match(
        apiMessage(err),
        `spec.descriptors[0]${'.descriptors[0]'.repeat(MAX_DESCRIPTOR_DEPTH - 1)}.descriptors: Too many: 1: must have at most 0 items`,
      );
    }
  },
);

t.test('kubectl apply -f examples/crds/ works and kubectl get shows the printer columns', async (t) => {
  const kubectl = resolveKubectl();
  const env = { ...process.env, KUBECONFIG: kube.kubeconfigPath };
  const k = (...args: string[]) => runCommand(kubectl, args, { env, cwd: REPO_ROOT });
  t.equal((await k('create', 'namespace', 'kubectl-test')).code, 0);
  const operator = new RateLimitOperator({
    kubeConfig: kube.kubeConfig,
    namespace: 'kubectl-test',
    xdsListen: '127.0.0.1:0',
    resyncMs: 1000,
  });
  await operator.start();
  t.teardown(() => operator.close());

  const applied = await k('apply', '-n', 'kubectl-test', '-f', 'examples/crds/');
  t.equal(applied.code, 0, applied.stderr);
  t.match(applied.stdout, /ratelimitconfig.ratelimit.envoyproxy.io\/basic created/);
  // Client-side apply (what most people run) prints each invalid example's `# kubectl apply:` line.
  for (const { file, text } of readExamples(join(REPO_ROOT, 'examples', 'invalid'))) {
    const expected = /^# kubectl apply: (.+)$/m.exec(text)![1];
    const rejected = await k('apply', '-n', 'kubectl-test', '-f', `examples/invalid/${file}`);
    t.not(rejected.code, 0, `${file} refused`);
    t.ok(rejected.stderr.includes(expected), `${file}: ${rejected.stderr.trim()}`);
  }

  const out = await waitFor('Accepted=True everywhere', async () => {
    const r = await k('get', 'ratelimitconfigs', '-n', 'kubectl-test');
    const rows = r.stdout.trim().split('\n').slice(1);
    return rows.length >= 9 && rows.every((row) => / True /.test(row)) ? r.stdout : undefined;
  });
  const header = out.split('\n')[0];
  t.match(header, /^NAME\s+DOMAIN\s+ACCEPTED\s+PROGRAMMED\s+PODS ACKED\s+AGE/);
  t.match(out, /\nbasic\s+basic\s+True\s+False\s+0\/0\s+\d+s/, 'no pod connected: not programmed, 0/0');
  const short = await k('get', 'rlc', 'shared-search', '-n', 'kubectl-test', '-o', 'wide');
  t.match(short.stdout, /shared-search\s+shared\s+True/);
});

t.test(
  'the RBAC manifest is enough: an operator running as its service account reconciles, writes status and leads',
  async (t) => {
    const kubectl = resolveKubectl();
    const env = { ...process.env, KUBECONFIG: kube.kubeconfigPath };
    const k = (...args: string[]) => runCommand(kubectl, args, { env, cwd: REPO_ROOT });
    t.equal((await k('create', 'namespace', 'ratelimit-system')).code, 0);
    t.equal((await k('create', 'namespace', 'rbac-test')).code, 0);
    const rbac = await k('apply', '-f', 'operator/deploy/rbac.yaml');
    t.equal(rbac.code, 0, rbac.stderr);

    // The admin user impersonates the operator's service account.
    const admin = kube.kubeConfig;
    const sa = new KubeConfig();
    sa.loadFromOptions({
      clusters: admin.clusters,
      contexts: admin.contexts,
      currentContext: admin.currentContext,
      users: admin.users.map((u) => ({
        ...u,
        impersonateUser: 'system:serviceaccount:ratelimit-system:ratelimit-operator',
      })),
    });
    const operator = new RateLimitOperator({
      kubeConfig: sa,
      xdsListen: '127.0.0.1:0',
      leaderElection: { namespace: 'ratelimit-system', name: 'ratelimit-operator', retryPeriodMs: 300 },
      resyncMs: 1000,
      logger: process.env.DEBUG_OPERATOR ? (await import('pino')).default({ level: 'debug' }) : undefined,
    });
    await operator.start();
    t.teardown(() => operator.close());
    const name = 'rbac';
    await applyRlc(
      kube.kubeConfig,
      {
        apiVersion: 'ratelimit.envoyproxy.io/v1alpha1',
        kind: 'RateLimitConfig',
        metadata: { name },
        spec: {
          domain: 'rbac-only',
          descriptors: [{ key: 'k', rate_limit: { unit: 'second', requests_per_unit: 1 } }],
        },
      },
      { namespace: 'rbac-test' },
    );
    await waitFor(
      'status written as the service account',
      async () => condition(await getRlc(kube.kubeConfig, name, 'rbac-test'), 'Accepted')?.status === 'True',
    );
    t.ok(operator.isLeader, 'holds the Lease');
    const metrics = await operator.registry.metrics();
    t.notMatch(metrics, /ratelimit_operator_errors_total\{[^}]*\} [1-9]/, 'no request was refused');
    const events = await k('get', 'events', '-n', 'rbac-test', '-o', 'name');
    t.match(events.stdout, /event\/rbac\./, 'Events created');
    // Pod reports: written (create/update), read (list/watch), deleted on shutdown (delete).
    await waitFor('pod report written and watched', async () =>
      operator.podReportWriter!.writes >= 1 && operator.podReports!.reflector.synced ? true : undefined,
    );
    const leases = () => k('get', 'leases', '-n', 'ratelimit-system', '-o', 'name');
    t.match((await leases()).stdout, /lease.coordination.k8s.io\/ratelimit-operator-pods-/);
    await operator.close();
    t.notMatch((await leases()).stdout, /ratelimit-operator-pods-/, 'its report is deleted on shutdown');
  },
);
