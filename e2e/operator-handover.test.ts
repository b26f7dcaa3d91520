// Leader handover with the default timings (--lease-duration 15000, --retry-period 2000), measured:
// the leader is SIGKILLed in the middle of an edit. The follower serves the edit to its pod at once
// (every replica serves xDS); status for it waits for the follower to take the Lease over, which
// happens when the dead leader's last renewal is a lease duration old by the follower's clock, seen
// at the follower's next retry: between lease - retry and lease + retry after the kill, plus a request.
import { CoordinationV1Api } from '@kubernetes/client-node';
import t from 'tap';
import { applyRlc, condition, getRlc, installCrd, rlcFromYaml, waitFor } from '../operator/testing.js';
import type { ServerProcess } from '../harness/net.js';
import { startKube, type KubeHarness } from '../harness/kube.js';
import { startOperatorProcess, startXdsPod, type OperatorProcess } from '../harness/operator.js';

const LEASE_MS = 15_000; // the defaults of ratelimit-operator
const RETRY_MS = 2_000;

let kube: KubeHarness;
const procs: ServerProcess[] = [];

async function startReplica(identity: string): Promise<OperatorProcess> {
  const r = await startOperatorProcess(kube, identity, [
    '--leader-election-namespace=default',
    `--identity=${identity}`,
    '--resync=2000',
  ]);
  procs.push(r.proc);
  return r;
}

async function leaseHolder(): Promise<string | undefined> {
  const api = kube.kubeConfig.makeApiClient(CoordinationV1Api);
  const lease = await api.readNamespacedLease({ name: 'ratelimit-operator', namespace: 'default' });
  return lease.spec?.holderIdentity ?? undefined;
}

t.before(async () => {
  kube = await startKube();
  await installCrd(kube.kubeConfig);
});
t.teardown(async () => {
  for (const p of procs) await p.stop(3000);
  await kube?.stop();
});

t.test(
  'leader SIGKILLed during an edit: pods get the edit at once, status within lease + retry',
  async (t) => {
    const a = await startReplica('handover-a');
    await waitFor('a leads', async () => (await leaseHolder()) === 'handover-a', 30_000);
    const b = await startReplica('handover-b');
    const pod = await startXdsPod('pod-on-b', b.xds);
    t.teardown(() => pod.close());
    const limit = async () =>
      (await pod.call({ domain: 'api', descriptors: [{ entries: [{ key: 'k', value: 'v' }] }] }))
        .statuses?.[0]?.currentLimit?.requestsPerUnit;
    const spec = (rpu: number) =>
      `domain: api\ndescriptors:\n  - key: k\n    rate_limit: { unit: second, requests_per_unit: ${rpu} }`;
    await applyRlc(kube.kubeConfig, rlcFromYaml('api', spec(5)));
    await waitFor('generation 1 Ready (written by a)', async () => {
      const r = condition(await getRlc(kube.kubeConfig, 'api'), 'Ready');
      return r?.status === 'True' && r.observedGeneration === 1;
    });

    // Kill the leader without a chance to release the Lease, and edit right away.
    await a.proc.kill();
    const killedAt = Date.now();
    await applyRlc(kube.kubeConfig, rlcFromYaml('api', spec(9)));
    await waitFor('the pod enforces the edit', async () => (await limit()) === 9, 10_000, 50);
    const enforcedMs = Date.now() - killedAt;
    await waitFor(
      'b leads',
      async () => (await leaseHolder()) === 'handover-b',
      LEASE_MS + RETRY_MS + 10_000,
      100,
    );
    const leaderMs = Date.now() - killedAt;
    await waitFor(
      'generation 2 Ready (written by b)',
      async () => {
        const r = condition(await getRlc(kube.kubeConfig, 'api'), 'Ready');
        return r?.status === 'True' && r.observedGeneration === 2;
      },
      10_000,
      100,
    );
    const statusMs = Date.now() - killedAt;
    t.comment(
      `handover measured: edit enforced ${enforcedMs} ms, new leader ${leaderMs} ms, status ${statusMs} ms after the kill (lease ${LEASE_MS} ms, retry ${RETRY_MS} ms)`,
    );
    t.ok(
      enforcedMs < 5_000,
      `the follower served the edit ${enforcedMs} ms after the kill, without a leader`,
    );
    t.ok(leaderMs >= LEASE_MS - RETRY_MS, `no takeover before the lease ran out (${leaderMs} ms)`);
    t.ok(leaderMs <= LEASE_MS + RETRY_MS + 3_000, `new leader ${leaderMs} ms after the kill`);
    t.ok(statusMs <= leaderMs + 5_000, `status for the edit ${statusMs - leaderMs} ms after the takeover`);
  },
);
