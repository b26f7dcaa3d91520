// The whole system as the Helm chart deploys it, on real components on loopback: a real API server and
// etcd, two operator processes and three ratelimit processes started from the built bins (dist/) with
// exactly the arguments and environment `helm template` renders for their pods (Secrets written where
// the kubelet mounts them; only listen addresses and the Services' DNS names are replaced by loopback
// ports), xDS over mutual TLS through a stand-in for the xDS Service, counters in a Redis cluster.
// The examples/ resources are applied; an Envoy-like client (one call per request, 20 ms timeout,
// failure mode allow) drives a bounded load; then update, delete, conflict, and the loss of the operator
// leader, of a Redis master and of a ratelimit process, each recovering within the bounds the README
// documents; the reference client_cmd gets the same answers as ours.
import { CoordinationV1Api, CoreV1Api } from '@kubernetes/client-node';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import type { RateLimitConfigObject } from '../operator/resource.js';
import {
  applyRlc,
  condition,
  deleteRlc,
  getRlc,
  installCrd,
  readExamples,
  rlcFromYaml,
  waitFor,
} from '../operator/testing.js';
import { roomInWindow } from '../ratelimit/test-support.js';
import { builtBin, REPO_ROOT } from '../harness/dist.js';
import { resolveReferenceRatelimitClient, startKube, type KubeHarness } from '../harness/kube.js';
import { freePorts, LOOPBACK, makeTempDir, ServerProcess } from '../harness/net.js';
import { runCommand } from '../harness/proc.js';
import { slotOf, startRedisCluster, type RedisCluster } from '../harness/redis/index.js';
import {
  findObject,
  helmTemplate,
  RenderedContainer,
  request,
  RlsClient,
  TcpBalancer,
  type FilterOutcome,
  type Secrets,
} from '../harness/system.js';
import { makeCerts, type Certs } from '../harness/tls.js';

const RELEASE = 'rl';
const NS = 'rl-system';
const APPS = 'demo'; // where the RateLimitConfigs live
const FULLNAME = 'rl-ratelimit';
const XDS_HOST = `${FULLNAME}-xds.${NS}.svc`;

// Recovery bounds, as documented in the README ("What a failure costs"). Generous: a loaded 2-core machine.
const CONFIG_PROPAGATION_MS = 15_000; // an applied change reaches every pod
const OPERATOR_LOSS_MS = 30_000; // pods on a killed replica reconnect (10 s backoff) and get changes; a new leader writes status (15 s lease)
const REDIS_FAILOVER_MS = 30_000; // decisions counted again after a master dies (2 s node timeout + failover + slot refresh)
const POD_RESTART_MS = 30_000; // a restarted pod serves again (start + config over xDS)

interface Operator {
  name: string;
  proc: ServerProcess;
  xds: number;
  metrics: number;
  health: number;
}
interface Pod {
  name: string;
  env: Record<string, string>;
  proc: ServerProcess;
  grpc: number;
  http: number;
  client: RlsClient;
}

let kube: KubeHarness;
let cluster: RedisCluster;
let certs: Certs;
let balancer: TcpBalancer;
let dir: string;
const operators: Operator[] = [];
const pods: Pod[] = [];

const kc = () => kube.kubeConfig;

async function metric(op: Operator, name: string): Promise<number> {
  const text = await (await fetch(`http://${LOOPBACK}:${op.metrics}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line ? Number(line.split(' ').pop()) : NaN;
}

async function startOperator(c: RenderedContainer, secrets: Secrets, name: string): Promise<Operator> {
  const mounts = c.mountSecrets(join(dir, name), secrets);
  const [xds, metrics, health] = await freePorts(3);
  const listen: Record<string, number> = { xds, metrics, health };
  // The rendered args, with only the listen addresses moved to loopback ports.
  const args = c.args(mounts).map((a) => {
    const m = /^--(xds|metrics|health)-listen=0\.0\.0\.0:\d+$/.exec(a);
    return m ? `--${m[1]}-listen=${LOOPBACK}:${listen[m[1]]}` : a;
  });
  const env = c.env({ name, namespace: NS }, secrets, mounts);
  const proc = new ServerProcess(
    name,
    process.execPath,
    [builtBin('ratelimit-operator'), ...args, `--kubeconfig=${kube.kubeconfigPath}`],
    { logPath: join(dir, `${name}.log`), cwd: REPO_ROOT, env: { PATH: process.env.PATH, ...env } },
  );
  const op = { name, proc, xds, metrics, health };
  await waitFor(
    `${name} ready`,
    async () => (await fetch(`http://${LOOPBACK}:${health}/readyz`)).status === 200,
    60_000,
    200,
  );
  return op;
}

async function startPod(c: RenderedContainer, secrets: Secrets, name: string): Promise<Pod> {
  const mounts = c.mountSecrets(join(dir, name), secrets);
  const env = c.env({ name, namespace: NS }, secrets, mounts);
  const [grpc, http, debug, prom] = await freePorts(4);
  // Only what differs between pods on one host: listen addresses, and the xDS Service's name.
  Object.assign(env, {
    HOST: LOOPBACK,
    PORT: String(http),
    GRPC_HOST: LOOPBACK,
    GRPC_PORT: String(grpc),
    DEBUG_PORT: String(debug),
    PROMETHEUS_ADDR: `${LOOPBACK}:${prom}`,
    CONFIG_GRPC_XDS_SERVER_URL: env.CONFIG_GRPC_XDS_SERVER_URL.replace(
      /^[^:]+:\d+$/,
      `${LOOPBACK}:${balancer.port}`,
    ),
  });
  const proc = new ServerProcess(name, process.execPath, [builtBin('ratelimit')], {
    logPath: join(dir, `${name}.log`),
    cwd: REPO_ROOT,
    env: { PATH: process.env.PATH, ...env },
  });
  const client = new RlsClient(`${LOOPBACK}:${grpc}`);
  const pod = { name, env, proc, grpc, http, client };
  await waitFor(
    `${name} healthy (config over xDS)`,
    async () => {
      if (!proc.running) throw new Error(`${name} exited: ${proc.logTail()}`);
      return (await fetch(`http://${LOOPBACK}:${http}/healthcheck`)).status === 200;
    },
    POD_RESTART_MS,
    200,
  );
  await client.connect();
  return pod;
}

/** The limit every running pod applies to one request (undefined: no limit), polled until `want` holds. */
async function everyPodServes(
  what: string,
  want: (limit: number | undefined) => boolean,
  deadlineMs: number,
) {
  let n = 0;
  const started = Date.now();
  await waitFor(
    what,
    async () => {
      for (const p of pods.filter((x) => x.proc.running)) {
        const res = await p.client.call(request(...probeFor(what, n++)));
        if (!want(res.statuses[0]?.currentLimit?.requestsPerUnit)) return false;
      }
      return true;
    },
    deadlineMs,
    250,
  );
  return Date.now() - started;
}
let probeDomain = 'basic';
let probeKey = 'remote_address';
function probeFor(what: string, n: number): [string, [string, string]] {
  return [probeDomain, [probeKey, `probe-${what.length}-${n}`]];
}

/** The release's values: the defaults, with the Redis cluster's nodes (commas escaped for --set). */
const chartValues = () => [
  '--set',
  'redis.type=cluster',
  '--set',
  `redis.url=${cluster.urls.replaceAll(',', '\\,')}`,
];

const secretsFor = (c: Certs): Secrets => ({
  // The operator's server certificate, and the CA its pods' client certificates are signed by.
  [`${FULLNAME}-xds-server-tls`]: {
    'tls.crt': readFileSync(c.certPath, 'utf8'),
    'tls.key': readFileSync(c.keyPath, 'utf8'),
    'ca.crt': readFileSync(c.caPath, 'utf8'),
  },
  // The pods' client certificate, and the CA the operator's certificate is signed by.
  [`${FULLNAME}-xds-client-tls`]: {
    'tls.crt': readFileSync(c.clientCertPath, 'utf8'),
    'tls.key': readFileSync(c.clientKeyPath, 'utf8'),
    'ca.crt': readFileSync(c.caPath, 'utf8'),
  },
});

t.before(async () => {
  builtBin('ratelimit'); // build dist/ first if stale, outside the timed parts
  dir = makeTempDir('e2e-system');
  [kube, cluster, certs] = await Promise.all([
    startKube(),
    startRedisCluster({ masters: 3, replicasPerMaster: 1, nodeTimeoutMs: 2000 }),
    makeCerts(undefined, { serverNames: [XDS_HOST], clientName: `${FULLNAME}.${NS}.svc` }),
  ]);
  const core = kc().makeApiClient(CoreV1Api);
  for (const name of [NS, APPS]) await core.createNamespace({ body: { metadata: { name } } });
  await installCrd(kc());
});

t.teardown(async () => {
  for (const p of pods) {
    p.client.close();
    await p.proc.stop();
  }
  for (const o of operators) await o.proc.stop();
  await balancer?.close();
  await cluster?.stop();
  await kube?.stop();
  certs?.remove();
});

t.test('the chart renders mTLS xDS and the processes start from it', async (t) => {
  const objs = await helmTemplate(RELEASE, NS, chartValues());
  const opC = new RenderedContainer(findObject(objs, 'Deployment', `${FULLNAME}-operator`));
  const rlC = new RenderedContainer(findObject(objs, 'Deployment', FULLNAME));
  const secrets = secretsFor(certs);

  for (const name of ['operator-a', 'operator-b']) operators.push(await startOperator(opC, secrets, name));
  balancer = new TcpBalancer(operators.map((o) => o.xds));
  await balancer.start();

  // The examples/ resources, and two of the test's own, before the pods start (they need a config).
  for (const ex of readExamples(join(REPO_ROOT, 'examples', 'crds')))
    for (const obj of ex.objects) await applyRlc(kc(), obj, { namespace: APPS });
  await applyRlc(kc(), LOAD, { namespace: APPS });
  for (const ex of readExamples(join(REPO_ROOT, 'examples', 'crds'))) {
    for (const obj of ex.objects) {
      const got = await waitFor(`${obj.metadata.name} Accepted`, async () => {
        const o = await getRlc(kc(), obj.metadata.name!, APPS);
        return condition(o, 'Accepted') ? o : undefined;
      });
      t.equal(condition(got, 'Accepted')!.status, 'True', `${ex.file}: ${obj.metadata.name} Accepted`);
    }
  }

  for (let i = 0; i < 3; i++) pods.push(await startPod(rlC, secrets, `${FULLNAME}-pod-${i}`));
  const env = pods[0].env;
  t.equal(env.CONFIG_TYPE, 'GRPC_XDS_DELTA', 'pods subscribe with delta xDS');
  t.equal(env.CONFIG_GRPC_XDS_SERVER_USE_TLS, 'true', 'xDS over TLS');
  t.ok(env.CONFIG_GRPC_XDS_CLIENT_TLS_CERT, 'pods present a client certificate (mutual TLS)');
  t.equal(env.CONFIG_GRPC_XDS_SERVER_TLS_SAN, XDS_HOST, "pods check the operator's name");
  t.equal(env.DEBUG_HOST, '127.0.0.1', 'debug endpoints on loopback');
  t.equal(env.REDIS_TYPE, 'cluster');

  // Every pod was served by some operator: each has a config (healthy) and decides with the example limit.
  for (const p of pods) {
    const res = await p.client.call(request('basic', ['remote_address', `hello-${p.name}`]));
    t.equal(res.statuses[0].currentLimit?.requestsPerUnit, 5, `${p.name} enforces examples/crds/basic.yaml`);
  }
});

t.test(
  "xDS is mutual TLS: a client without a certificate is refused, one with the pods' is kept",
  async (t) => {
    const { connect } = await import('node:tls');
    // 'kept' when the connection is still open 1.5 s after the handshake and the HTTP/2 preface.
    const attempt = (withCert: boolean) =>
      new Promise<string>((resolve) => {
        const s = connect({
          host: LOOPBACK,
          port: operators.find((o) => o.proc.running)!.xds,
          ca: readFileSync(certs.caPath),
          servername: XDS_HOST,
          ALPNProtocols: ['h2'],
          ...(withCert
            ? { cert: readFileSync(certs.clientCertPath), key: readFileSync(certs.clientKeyPath) }
            : {}),
        });
        s.once('secureConnect', () => {
          // TLS 1.3: the server checks the client certificate after the client's handshake ends.
          s.write('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');
          setTimeout(() => {
            resolve('kept');
            s.destroy();
          }, 1500).unref();
        });
        s.once('close', () => resolve('closed'));
        s.once('error', (e) => resolve(`error: ${e.message}`));
      });
    t.equal(await attempt(true), 'kept', "the pods' client certificate is accepted");
    const without = await attempt(false);
    t.not(without, 'kept', `no client certificate: refused (${without})`);
  },
);

const LOAD_LIMIT = 300;
const LOAD: RateLimitConfigObject = rlcFromYaml(
  'e2e-load',
  `domain: e2e-load
descriptors:
  - key: tenant
    rate_limit: { unit: day, requests_per_unit: ${LOAD_LIMIT} }
`,
);

/** Sum over the pods of one of the descriptor's Prometheus counters (the scrape flushes the stats). */
async function podCounter(stat: string, domain: string, key: string): Promise<number> {
  let sum = 0;
  for (const p of pods) {
    const addr = p.env.PROMETHEUS_ADDR;
    const text = await (await fetch(`http://${addr}/metrics`)).text();
    const line = text
      .split('\n')
      .find(
        (l) =>
          l.startsWith(`ratelimit_service_rate_limit_${stat}{`) &&
          l.includes(`domain="${domain}"`) &&
          l.includes(`key1="${key}"`),
      );
    sum += line ? Number(line.split(' ').pop()) : 0;
  }
  return sum;
}

t.test('bounded load through three pods: the allowed total equals the limit', async (t) => {
  const total = 2 * LOAD_LIMIT;
  const counts: Record<FilterOutcome, number> = { OK: 0, OVER_LIMIT: 0, FAILED_OPEN: 0 };
  const tenant = `acme-${Date.now()}`;
  const within0 = await podCounter('within_limit', 'e2e-load', 'tenant');
  const hits0 = await podCounter('total_hits', 'e2e-load', 'tenant');
  let sent = 0;
  const worker = async () => {
    while (sent < total) {
      const pod = pods[sent++ % pods.length];
      counts[await pod.client.filter(request('e2e-load', ['tenant', tenant]))]++;
    }
  };
  await Promise.all(Array.from({ length: 6 }, worker));
  t.comment(`Envoy-side outcomes: ${JSON.stringify(counts)} (FAILED_OPEN: over the 20 ms timeout, allowed)`);
  t.equal(counts.OK + counts.OVER_LIMIT + counts.FAILED_OPEN, total, 'one call per request');
  t.ok(counts.OK <= LOAD_LIMIT, `never more allowed by the service than the limit (${counts.OK})`);
  t.ok(counts.OVER_LIMIT <= total - LOAD_LIMIT, 'never more refused than the hits over the limit');
  // The service's own count of what it allowed, over the three pods, once every answered hit is in the
  // stats (calls that timed out on the client side were still decided by a pod).
  await waitFor(
    'the pods count every answered hit',
    async () =>
      (await podCounter('total_hits', 'e2e-load', 'tenant')) - hits0 >= counts.OK + counts.OVER_LIMIT,
    CONFIG_PROPAGATION_MS,
    250,
  );
  const allowed = (await podCounter('within_limit', 'e2e-load', 'tenant')) - within0;
  t.equal(allowed, LOAD_LIMIT, 'allowed total across the three pods = the limit, exactly');
  for (const p of pods) {
    const res = await p.client.call(request('e2e-load', ['tenant', tenant]));
    t.equal(res.overallCode, 'OVER_LIMIT', `${p.name}: the shared counter is exhausted`);
  }
});

t.test('the reference client_cmd gets the same answers as ours', async (t) => {
  const clientCmd = resolveReferenceRatelimitClient();
  await roomInWindow(60, 15_000);
  const value = `ref-${Date.now()}`;
  const seen: string[] = [];
  for (let i = 0; i < 7; i++) {
    const pod = pods[i % pods.length];
    if (i % 2 === 0) {
      const res = await pod.client.call(request('basic', ['remote_address', value]));
      seen.push(`${res.overallCode}/${res.statuses[0].limitRemaining ?? 0}`);
    } else {
      const r = await runCommand(clientCmd, [
        '-dial_string',
        `${LOOPBACK}:${pod.grpc}`,
        '-domain',
        'basic',
        '-descriptors',
        `remote_address=${value}`,
      ]);
      t.equal(r.code, 0, r.stderr);
      const code = /overall_code:\s*(\w+)/.exec(r.stdout)?.[1];
      const remaining = /limit_remaining:\s*(\d+)/.exec(r.stdout)?.[1] ?? '0';
      seen.push(`${code}/${remaining}`);
    }
  }
  // examples/crds/basic.yaml: 5 per minute, shared by every pod, whichever client calls.
  t.same(seen, ['OK/4', 'OK/3', 'OK/2', 'OK/1', 'OK/0', 'OVER_LIMIT/0', 'OVER_LIMIT/0']);
});

t.test('update, conflict and delete reach every pod', async (t) => {
  probeDomain = 'basic';
  probeKey = 'remote_address';
  const basic = readExamples(join(REPO_ROOT, 'examples', 'crds')).find((e) => e.file === 'basic.yaml')!
    .objects[0];
  const updated = structuredClone(basic);
  (updated.spec as any).descriptors[0].rate_limit.requests_per_unit = 7;
  await applyRlc(kc(), updated, { namespace: APPS });
  const upd = await everyPodServes('update to 7', (l) => l === 7, CONFIG_PROPAGATION_MS);
  t.pass(`update served by all pods after ${upd} ms`);

  // A second resource claiming the same domain without mergeDomain loses, says why, changes nothing.
  const rival = rlcFromYaml(
    'basic-rival',
    `domain: basic
descriptors:
  - key: remote_address
    rate_limit: { unit: minute, requests_per_unit: 1000 }
`,
  );
  await applyRlc(kc(), rival, { namespace: APPS });
  const lost = await waitFor('rival rejected', async () => {
    const o = await getRlc(kc(), 'basic-rival', APPS);
    return condition(o, 'Accepted')?.status === 'False' ? o : undefined;
  });
  t.equal(condition(lost, 'Accepted')!.reason, 'DomainConflict');
  await everyPodServes('still 7 after conflict', (l) => l === 7, CONFIG_PROPAGATION_MS);
  await deleteRlc(kc(), 'basic-rival', APPS);

  await deleteRlc(kc(), 'basic', APPS);
  const del = await everyPodServes('delete', (l) => l === undefined, CONFIG_PROPAGATION_MS);
  t.pass(`delete served by all pods after ${del} ms`);
  await applyRlc(kc(), basic, { namespace: APPS });
  await everyPodServes('re-created at 5', (l) => l === 5, CONFIG_PROPAGATION_MS);
});

t.test(
  'killing the operator leader: changes still reach every pod, a new leader writes status',
  async (t) => {
    const leader = await waitFor('a leader', async () => {
      for (const o of operators) if ((await metric(o, 'ratelimit_operator_leader')) === 1) return o;
      return undefined;
    });
    const other = operators.find((o) => o !== leader)!;
    const leases = kc().makeApiClient(CoordinationV1Api);
    const holder = async () =>
      (await leases.readNamespacedLease({ name: 'ratelimit-operator', namespace: NS })).spec?.holderIdentity;
    const before = await holder();
    const killedAt = Date.now();
    await leader.proc.kill();
    const obj = structuredClone(LOAD);
    (obj.spec as any).descriptors[0].rate_limit.requests_per_unit = LOAD_LIMIT + 1;
    const applied = await applyRlc(kc(), obj, { namespace: APPS });
    probeDomain = 'e2e-load';
    probeKey = 'tenant';
    const ms = await everyPodServes(
      'update after leader loss',
      (l) => l === LOAD_LIMIT + 1,
      OPERATOR_LOSS_MS,
    );
    t.pass(`every pod serves the change ${Date.now() - killedAt} ms after the kill (${ms} ms polling)`);
    await waitFor(
      'the survivor leads',
      async () => (await metric(other, 'ratelimit_operator_leader')) === 1,
      OPERATOR_LOSS_MS,
    );
    const after = await holder();
    t.ok(after && after !== before, `the Lease moved from ${before} to ${after}`);
    const gen = applied.metadata.generation;
    await waitFor(
      'status of the change written by the new leader',
      async () => condition(await getRlc(kc(), 'e2e-load', APPS), 'Accepted')?.observedGeneration === gen,
      OPERATOR_LOSS_MS,
    );
    t.pass(`new leader and status within ${Date.now() - killedAt} ms`);
  },
);

t.test('killing a Redis master: decisions are counted again within the bound', async (t) => {
  const killed = await cluster.killMaster(0);
  // Tenants whose counters live on the killed master: the key is the reference's
  // <domain>_<key>_<value>_<window start> (a day window here).
  const window = Math.floor(Date.now() / 86_400_000) * 86_400;
  const onKilled = (v: string) => {
    const slot = slotOf(`e2e-load_tenant_${v}_${window}`);
    return killed.slots.some(([a, b]) => slot >= a && slot <= b);
  };
  const values: string[] = [];
  for (let i = 0; values.length < 6; i++) if (onKilled(`redis-${i}`)) values.push(`redis-${i}`);
  let failed = 0;
  await waitFor(
    'every pod counts every key of the killed master',
    async () => {
      for (const p of pods)
        for (const v of values) {
          try {
            // Counted: a second hit leaves one less.
            const a = await p.client.call(request('e2e-load', ['tenant', v]), 2000);
            const b = await p.client.call(request('e2e-load', ['tenant', v]), 2000);
            if (a.overallCode !== 'OK' || b.statuses[0].limitRemaining !== a.statuses[0].limitRemaining! - 1)
              return false;
          } catch {
            failed++;
            return false;
          }
        }
      return true;
    },
    REDIS_FAILOVER_MS,
    250,
  );
  const failover = await cluster.waitForFailover();
  t.ok(failed > 0, `calls for the killed master's slots failed meanwhile (${failed} failed polls)`);
  t.pass(
    `counted again ${Date.now() - killed.killedAt} ms after the master died (replica promoted after ${failover.elapsedMs} ms)`,
  );
});

/**
 * Runs `round` (fresh values each time) until one run starts and ends in the same minute, so that a check
 * against a per-minute limit never depends on how long anything took: a run that crossed a minute boundary
 * counted in two windows and is run again.
 */
async function inOneMinute<T>(round: () => Promise<T>): Promise<T> {
  for (let run = 1; ; run++) {
    await roomInWindow(60, 10_000);
    const minute = Math.floor(Date.now() / 60_000);
    const result = await round();
    if (Math.floor(Date.now() / 60_000) === minute) return result;
    if (run === 5) throw new Error('five runs in a row crossed a minute boundary');
  }
}

/** `calls` hits of a fresh remote_address of examples/crds/basic.yaml (5 per minute), pod i % length each. */
async function basicHits(through: Pod[], calls: number, tag: string): Promise<string[]> {
  const value = `${tag}-${Date.now()}-${Math.random()}`;
  const codes: string[] = [];
  for (let i = 0; i < calls; i++) {
    const res = await through[i % through.length].client.call(request('basic', ['remote_address', value]));
    codes.push(res.overallCode);
  }
  return codes;
}

t.test('killing a ratelimit pod: the others keep the shared count; a restarted pod rejoins', async (t) => {
  const victim = pods[2];
  await victim.proc.kill();
  victim.client.close();
  const two = await inOneMinute(() => basicHits([pods[0], pods[1]], 8, 'after-kill'));
  t.equal(two.filter((c) => c === 'OK').length, 5, 'two pods share the counter: exactly the limit allowed');
  const started = Date.now();
  const rlC = new RenderedContainer(
    findObject(await helmTemplate(RELEASE, NS, chartValues()), 'Deployment', FULLNAME),
  );
  pods[2] = await startPod(rlC, secretsFor(certs), victim.name);
  t.pass(`restarted pod healthy after ${Date.now() - started} ms`);
  // Through the three pods in turn (0, 1, 2, 0, 1, 2, 0, 1): the restarted pod's hit counts for the
  // others, and it refuses once they have used the limit.
  const three = await inOneMinute(() => basicHits(pods, 8, 'after-restart'));
  t.same(
    three,
    ['OK', 'OK', 'OK', 'OK', 'OK', 'OVER_LIMIT', 'OVER_LIMIT', 'OVER_LIMIT'],
    'the restarted pod sees the shared counter',
  );
});
