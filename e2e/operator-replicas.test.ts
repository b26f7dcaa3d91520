// Two ratelimit-operator processes (the real bin entry, flags, health and metrics endpoints) against a
// real API server: both serve the same xDS versions, one Lease leader writes status, and SIGKILLing
// the leader hands over within the lease time.
import { join } from 'node:path';
import { CoordinationV1Api } from '@kubernetes/client-node';
import t from 'tap';
import { openRawAdsStream } from '../control-plane/testing.js';
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
import { runCommand } from './harness/proc.js';
import { freePorts, ServerProcess } from './harness/net.js';
import { startKube, type KubeHarness } from './harness/kube.js';

const LEASE_MS = 3000;
const MAIN = join(REPO_ROOT, 'operator', 'main.ts');

interface Replica {
  identity: string;
  proc: ServerProcess;
  xds: number;
  metrics: number;
  health: number;
}

let kube: KubeHarness;
const replicas: Replica[] = [];

async function startReplica(identity: string): Promise<Replica> {
  const [xds, metrics, health] = await freePorts(3);
  const proc = new ServerProcess(
    identity,
    process.execPath,
    [
      '--import=tsx',
      MAIN,
      `--kubeconfig=${kube.kubeconfigPath}`,
      `--xds-listen=127.0.0.1:${xds}`,
      `--metrics-listen=127.0.0.1:${metrics}`,
      `--health-listen=127.0.0.1:${health}`,
      '--leader-election-namespace=default',
      `--lease-duration=${LEASE_MS}`,
      '--renew-deadline=2000',
      '--retry-period=500',
      `--identity=${identity}`,
      '--resync=2000',
    ],
    { logPath: join(kube.dir || '/tmp', `${identity}.log`), cwd: REPO_ROOT, env: process.env },
  );
  const r = { identity, proc, xds, metrics, health };
  replicas.push(r);
  await waitFor(
    `${identity} ready`,
    async () => (await fetch(`http://127.0.0.1:${health}/readyz`)).status === 200,
    60_000,
  );
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
  for (const r of replicas) await r.proc.stop(3000);
  await kube?.stop();
});

t.test('--help lists every flag', async (t) => {
  const r = await runCommand(process.execPath, ['--import=tsx', MAIN, '--help'], { cwd: REPO_ROOT });
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
