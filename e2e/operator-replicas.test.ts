// Two ratelimit-operator processes (the real bin entry, flags, health and metrics endpoints) against a
// real API server: both serve the same xDS versions, one Lease leader writes status, and SIGKILLing
// the leader hands over within the lease time. Status counts the pods of every replica (pod reports):
// two real ratelimit pods, one on each replica, are 2/2; a NACK from the follower's pod shows; a
// killed follower's pods drop out after the report TTL.
import { CoordinationV1Api } from '@kubernetes/client-node';
import t from 'tap';
import { openRawAdsStream } from '../control-plane/testing.js';
import type { RateLimitConfig } from '../ratelimit/config/index.js';
import type { TestApp } from '../ratelimit/test-support.js';
import { createXdsSource } from '../ratelimit/sources/index.js';
import { REPORT_ANNOTATION, REPORT_LABEL } from '../operator/pod-reports.js';
import { USAGE_FLAGS } from '../operator/usage.js';
import {
  applyRlc,
  condition,
  getRlc,
  installCrd,
  REPO_ROOT,
  rlcFromYaml,
  waitFor,
} from '../operator/testing.js';
import { builtBin } from '../harness/dist.js';
import { runCommand } from '../harness/proc.js';
import { resolveKubectl, startKube, type KubeHarness } from '../harness/kube.js';
import { startOperatorProcess, startXdsPod, type OperatorProcess } from '../harness/operator.js';

const LEASE_MS = 3000;
const REPORT_TTL_MS = 3000;
/**
 * The follower of the pod-count test reports with a TTL longer than its deadlines: the leader deletes a
 * report only after three TTLs without a change, and a replica whose updates all failed used to get
 * counted right after such a delete (its next write re-created the report). With 3 s TTLs that came
 * every ~10 s, within the waits, which is why this test once passed while no report update ever worked.
 */
const FOLLOWER_REPORT_TTL_MS = 15_000;
const MAIN = builtBin('ratelimit-operator'); // the shipped bin, built from dist/

type Replica = OperatorProcess;

let kube: KubeHarness;
const replicas: Replica[] = [];

async function startReplica(identity: string, reportTtlMs = REPORT_TTL_MS): Promise<Replica> {
  const r = await startOperatorProcess(kube, identity, [
    '--leader-election-namespace=default',
    `--lease-duration=${LEASE_MS}`,
    '--renew-deadline=2000',
    '--retry-period=500',
    `--identity=${identity}`,
    '--resync=2000',
    `--pod-report-ttl=${reportTtlMs}`,
  ]);
  replicas.push(r);
  return r;
}

async function metric(r: Replica, name: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${r.metrics}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`));
  return line ? Number(line.split(' ').pop()) : NaN;
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
  await stopReplicas();
  await kube?.stop();
});

async function stopReplicas(): Promise<void> {
  for (const r of replicas.splice(0)) await r.proc.stop(3000);
}

/**
 * A real ratelimit service taking config over xDS from one replica. `refuse`: the pod rejects any
 * config with that domain (its config swap throws, so its xDS client NACKs with the message).
 * `protocol`: incremental (the chart's default) or state of the world.
 */
async function startPod(
  node: string,
  xdsPort: number,
  refuse?: string,
  protocol: 'delta' | 'sotw' = 'delta',
): Promise<TestApp> {
  return startXdsPod(
    node,
    xdsPort,
    {
      xdsSourceFactory: (deps) => {
        if (!refuse) return createXdsSource(deps);
        return createXdsSource({
          ...deps,
          setConfig: (config: RateLimitConfig) => {
            if (config.hasDomain(refuse)) throw new Error(`${node} refuses domain ${refuse}`);
            deps.setConfig(config);
          },
        });
      },
    },
    protocol,
  );
}

t.test('--help lists every flag', async (t) => {
  const r = await runCommand(process.execPath, [MAIN, '--help'], { cwd: REPO_ROOT });
  t.equal(r.code, 0);
  for (const flag of USAGE_FLAGS) t.match(r.stdout, flag, `--help lists ${flag}`);
});

t.test(
  'two replicas: same versions, one leader writes status, the other takes over when it dies',
  async (t) => {
    const a = await startReplica('replica-a');
    const holderA = await waitFor('a leader', leaseHolder);
    t.equal(holderA, 'replica-a', 'the first replica leads');
    const b = await startReplica('replica-b');
    t.equal((await fetch(`http://127.0.0.1:${b.health}/healthz`)).status, 200);

    await applyRlc(
      kube.kubeConfig,
      rlcFromYaml(
        'api',
        `domain: api\ndescriptors:\n  - key: k\n    rate_limit: { unit: second, requests_per_unit: 5 }`,
      ),
    );
    // A pod on each replica: both are served the same version.
    const podA = openRawAdsStream(`127.0.0.1:${a.xds}`, 'pod-on-a');
    const podB = openRawAdsStream(`127.0.0.1:${b.xds}`, 'pod-on-b');
    t.teardown(() => {
      podA.close();
      podB.close();
    });
    podA.send({});
    podB.send({});
    const [ra, rb] = await Promise.all([podA.next(15_000), podB.next(15_000)]);
    t.equal(ra.versionInfo, rb.versionInfo, 'both replicas serve the same version');
    t.equal(ra.resources?.length, 1);
    podA.send({ versionInfo: ra.versionInfo, responseNonce: ra.nonce });
    podB.send({ versionInfo: rb.versionInfo, responseNonce: rb.nonce });

    await waitFor(
      'status written',
      async () => condition(await getRlc(kube.kubeConfig, 'api'), 'Programmed')?.status === 'True',
    );
    t.equal(await metric(a, 'ratelimit_operator_leader'), 1);
    t.equal(await metric(b, 'ratelimit_operator_leader'), 0);
    t.ok((await metric(a, 'ratelimit_operator_status_writes_total')) >= 1, 'the leader wrote status');
    t.equal(await metric(b, 'ratelimit_operator_status_writes_total'), 0, 'the follower never writes status');
    t.ok((await metric(b, 'ratelimit_operator_xds_acks_total')) >= 1, 'the follower counts its ACKs');

    // Kill the leader without letting it release the lease.
    const killedAt = Date.now();
    await a.proc.kill();
    await waitFor('replica-b to lead', async () => (await leaseHolder()) === 'replica-b', LEASE_MS * 3);
    const handover = Date.now() - killedAt;
    t.ok(handover <= LEASE_MS + 1500, `handed over in ${handover} ms (lease ${LEASE_MS} ms)`);
    t.equal(await metric(b, 'ratelimit_operator_leader'), 1);

    // The new leader writes status for a new generation.
    await applyRlc(
      kube.kubeConfig,
      rlcFromYaml(
        'api',
        `domain: api\ndescriptors:\n  - key: k\n    rate_limit: { unit: second, requests_per_unit: 9 }`,
      ),
    );
    const next = await podB.next(10_000);
    podB.send({ versionInfo: next.versionInfo, responseNonce: next.nonce });
    await waitFor('generation 2 Programmed by the new leader', async () => {
      const p = condition(await getRlc(kube.kubeConfig, 'api'), 'Programmed');
      return p?.status === 'True' && p.observedGeneration === 2;
    });
    t.ok((await metric(b, 'ratelimit_operator_status_writes_total')) >= 1, 'the new leader writes status');
  },
);

t.test(
  'status counts the pods of every replica: one pod on each is 2/2, a NACK on the follower shows',
  async (t) => {
    // replica-b leads since the previous test; replica-c joins as a follower.
    const leader = replicas.find((r) => r.identity === 'replica-b')!;
    t.equal(await leaseHolder(), 'replica-b');
    const follower = await startReplica('replica-c', FOLLOWER_REPORT_TTL_MS);
    const api = kube.kubeConfig.makeApiClient(CoordinationV1Api);
    const reportName = 'ratelimit-operator-pods-replica-c';
    // The follower's report exists (with no pods) before any pod connects: every later change is an update.
    const created = await waitFor('the follower report', () =>
      api.readNamespacedLease({ name: reportName, namespace: 'default' }),
    );
    t.equal(JSON.parse(created.metadata!.annotations![REPORT_ANNOTATION]).length, 0);
    await applyRlc(
      kube.kubeConfig,
      rlcFromYaml(
        'shared',
        `domain: shared\ndescriptors:\n  - key: k\n    rate_limit: { unit: second, requests_per_unit: 5 }`,
      ),
    );
    const podA = await startPod('pod-a', leader.xds);
    // pod-b speaks state of the world: both protocols' ACKs and NACKs reach the status.
    const podB = await startPod('pod-b', follower.xds, 'refused', 'sotw');
    t.teardown(async () => {
      await podA.close();
      await podB.close();
    });

    // Well within the follower's TTL: only an UPDATE of its report can bring pod-b in.
    const shared = await waitFor(
      'shared: 2/2 Programmed',
      async () => {
        const o = await getRlc(kube.kubeConfig, 'shared');
        return condition(o, 'Programmed')?.status === 'True' && o.status?.podsAcked === '2/2' ? o : undefined;
      },
      10_000,
    );
    t.same(shared.status?.pods, { connected: 2, acked: 2, nacked: 0 });
    t.equal(
      condition(shared, 'Programmed')?.message,
      `all 2 connected pods ACKed version ${shared.status?.version}`,
    );
    t.equal(condition(shared, 'Ready')?.status, 'True');
    t.equal(await metric(leader, 'ratelimit_operator_leader'), 1);
    t.equal(
      await metric(follower, 'ratelimit_operator_status_writes_total'),
      0,
      'the follower never writes status',
    );
    const kubectl = await runCommand(resolveKubectl(), ['get', 'rlc', 'shared', '--no-headers'], {
      env: { ...process.env, KUBECONFIG: kube.kubeconfigPath },
    });
    t.match(kubectl.stdout, /^shared\s+shared\s+True\s+True\s+2\/2\s/, 'kubectl get rlc counts both pods');

    // The follower's report: a Lease of its own, labelled, holding its pod as compact JSON.
    const reports = await api.listNamespacedLease({
      namespace: 'default',
      labelSelector: `${REPORT_LABEL}=ratelimit-operator`,
    });
    // (replica-a was SIGKILLed in the previous test: its report lingers until the leader deletes it.)
    const names = reports.items
      .map((l) => l.metadata?.name)
      .filter((n) => n !== 'ratelimit-operator-pods-replica-a')
      .sort();
    t.same(names, ['ratelimit-operator-pods-replica-b', reportName]);
    const reportB = reports.items.find((l) => l.spec?.holderIdentity === 'replica-c')!;
    t.equal(reportB.metadata?.uid, created.metadata?.uid, 'updated in place, never deleted and re-created');
    const podsB = JSON.parse(reportB.metadata!.annotations![REPORT_ANNOTATION]);
    t.equal(podsB.length, 1);
    t.equal(podsB[0].n, 'pod-b');
    t.equal(podsB[0].a, shared.status?.version, 'the follower reports its pod ACKed the served version');

    // pod-b (on the follower) refuses a new domain: the leader shows its NACK within a few seconds.
    await applyRlc(
      kube.kubeConfig,
      rlcFromYaml(
        'refused',
        `domain: refused\ndescriptors:\n  - key: k\n    rate_limit: { unit: second, requests_per_unit: 1 }`,
      ),
    );
    const refused = await waitFor(
      'refused: Programmed=False Nacked',
      async () => {
        const o = await getRlc(kube.kubeConfig, 'refused');
        return condition(o, 'Programmed')?.reason === 'Nacked' ? o : undefined;
      },
      5_000,
    );
    t.match(
      condition(refused, 'Programmed')?.message,
      /^pod pod-b \(127\.0\.0\.1:\d+ via replica-c\) rejected version [0-9a-f]+: .*pod-b refuses domain refused/,
    );
    t.same(refused.status?.pods, { connected: 2, acked: 1, nacked: 1 });
    t.equal(refused.status?.podsAcked, '1/2');
    t.same(
      [condition(refused, 'Stalled')?.status, condition(refused, 'Stalled')?.reason],
      ['True', 'Nacked'],
    );
    t.ok(podA.app.service.getConfig()?.hasDomain('refused'), 'pod-a serves the new domain');
    t.notOk(podB.app.service.getConfig()?.hasDomain('refused'), 'pod-b kept its last good config');
    const after = await api.readNamespacedLease({ name: reportName, namespace: 'default' });
    t.equal(after.metadata?.uid, created.metadata?.uid, 'still the same report');

    // Someone else writes the report (its resourceVersion moves on): the follower's next write meets a
    // conflict, re-reads and updates it again.
    after.metadata!.annotations![REPORT_ANNOTATION] = '[]';
    await api.replaceNamespacedLease({ name: reportName, namespace: 'default', body: after });
    await waitFor(
      'the follower to rewrite its report after a conflict',
      async () => {
        const l = await api.readNamespacedLease({ name: reportName, namespace: 'default' });
        const pods = JSON.parse(l.metadata!.annotations![REPORT_ANNOTATION]);
        return pods.length === 1 && pods[0].n === 'pod-b' && l.metadata?.uid === created.metadata?.uid;
      },
      FOLLOWER_REPORT_TTL_MS,
    );
    // The leader may have counted the emptied report in between: it converges on the rewritten one.
    const stillShared = await waitFor(
      'shared: 2/2 again from the rewritten report',
      async () => {
        const o = await getRlc(kube.kubeConfig, 'shared');
        return o.status?.podsAcked === '2/2' ? o : undefined;
      },
      FOLLOWER_REPORT_TTL_MS,
    );
    t.equal(stillShared.status?.podsAcked, '2/2', 'pod-b still runs a version with shared in it');

    // The follower dies without a word: its report stops being renewed and its pod drops out.
    const killedAt = Date.now();
    await follower.proc.kill();
    await waitFor(
      'refused: 1/1 Programmed once the dead follower report expired',
      async () => {
        const o = await getRlc(kube.kubeConfig, 'refused');
        return condition(o, 'Programmed')?.status === 'True' && o.status?.podsAcked === '1/1';
      },
      FOLLOWER_REPORT_TTL_MS * 2,
    );
    const gone = Date.now() - killedAt;
    t.ok(
      gone <= FOLLOWER_REPORT_TTL_MS + 3000,
      `dropped out ${gone} ms after the kill (TTL ${FOLLOWER_REPORT_TTL_MS} ms)`,
    );
    // The leader deletes reports stale for three TTLs (replica-a's, killed in the previous test).
    await waitFor(
      'replica-a report deleted by the leader',
      async () => {
        const l = await api.listNamespacedLease({
          namespace: 'default',
          labelSelector: `${REPORT_LABEL}=ratelimit-operator`,
        });
        return !l.items.some((x) => x.metadata?.name === 'ratelimit-operator-pods-replica-a');
      },
      REPORT_TTL_MS * 4,
    );
  },
);
