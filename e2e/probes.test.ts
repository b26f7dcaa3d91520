// The chart's probes, as a kubelet runs them, against the built service started with the chart's own
// environment: through "no config yet", a Redis outage longer than liveness's patience, and Redis coming
// back. A probe that restarts a pod for something outside the process (a missing config, Redis) turns an
// install or an outage into a crash loop; readiness is where those belong.
//
// Time is scaled: the kubelet's decisions depend only on the sequence of probe results, so each phase
// runs at least as many probes as its real length would (the outage: ceil(90 s / periodSeconds) liveness
// probes, more than failureThreshold) while the state under test holds, at the rendered periods × SCALE.
// Recovery is measured in real time: the service must answer ready within seconds of Redis returning.
import t from 'tap';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { builtBin, REPO_ROOT } from '../harness/dist.js';
import { Prober, type ProbeSpec } from '../harness/kubelet.js';
import { freePorts, LOOPBACK, ServerProcess, waitForPort, waitUntil } from '../harness/net.js';
import { startRedis } from '../harness/redis/index.js';
import { findObject, helmTemplate } from '../harness/system.js';

const SCALE = 0.05;
const OUTAGE_S = 90;

t.test('the rendered probes never restart the service; readiness follows config and Redis', async (t) => {
  // File mode: the test writes the ConfigMap's files itself (none at first: "no config yet").
  const objs = await helmTemplate('rl', 'rl-system', [
    '--set',
    'redis.url=redis:6379',
    '--set',
    'config.mode=file',
    '--set-string',
    'config.files.a\\.yaml=domain: a',
  ]);
  const deployment = findObject(objs, 'Deployment', 'rl-ratelimit');
  const container = deployment.spec.template.spec.containers[0];
  const liveness: ProbeSpec = container.livenessProbe;
  const readiness: ProbeSpec = container.readinessProbe;
  t.ok(liveness && readiness, 'the chart renders both probes');
  const env: Record<string, string> = {};
  for (const e of container.env) if (e.value !== undefined) env[e.name] = String(e.value);
  t.equal(env.HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED, 'true', 'the chart waits for a config to be ready');
  t.equal(env.REDIS_HEALTH_CHECK_ACTIVE_CONNECTION, 'true', 'the chart checks Redis (failureMode: error)');

  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const dir = mkdtempSync(join(tmpdir(), 'rl-probes-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  mkdirSync(join(dir, 'config'));
  const [grpcPort, httpPort, debugPort, promPort] = await freePorts(4);
  const named: Record<string, number> = { grpc: grpcPort, http: httpPort, metrics: promPort };
  const byNumber = new Map<number, number>();
  for (const p of container.ports) byNumber.set(p.containerPort, named[p.name]);
  const ports = (p: number | string) => {
    const local = typeof p === 'number' ? byNumber.get(p) : named[p];
    if (local === undefined) throw new Error(`probe port ${p} is not a port of the container`);
    return local;
  };

  const proc = new ServerProcess('ratelimit', process.execPath, [builtBin('ratelimit')], {
    logPath: join(dir, 'ratelimit.log'),
    cwd: REPO_ROOT,
    env: {
      PATH: process.env.PATH,
      ...env,
      // What differs on one host: loopback listeners, the config directory, and where Redis is.
      HOST: LOOPBACK,
      PORT: String(httpPort),
      GRPC_HOST: LOOPBACK,
      GRPC_PORT: String(grpcPort),
      DEBUG_PORT: String(debugPort),
      PROMETHEUS_ADDR: `${LOOPBACK}:${promPort}`,
      RUNTIME_ROOT: dir,
      REDIS_URL: redis.url,
    },
  });
  t.teardown(() => proc.stop());
  const context = () => proc.logTail();
  const abort = () => proc.exitReason();

  // The kubelet's initialDelaySeconds is its allowance for the start, which on a loaded test machine can
  // take longer than the scaled delay: probing begins once the gRPC listener (opened last) accepts.
  await waitForPort(grpcPort, { what: 'the service to listen', deadlineMs: 60_000, context, abort });
  const prober = new Prober(liveness, readiness, ports, SCALE);
  t.teardown(() => prober.stop());
  prober.start();
  const livePeriodMs = (liveness.periodSeconds ?? 10) * 1000 * SCALE;
  const readyPeriodMs = (readiness.periodSeconds ?? 10) * 1000 * SCALE;
  const probesFor = (seconds: number, spec: ProbeSpec) =>
    Math.max(Math.ceil(seconds / (spec.periodSeconds ?? 10)), (spec.failureThreshold ?? 3) + 1);

  // Phase 1: no config yet, for as long as the outage below (longer than liveness's initial delay and
  // failureThreshold × periodSeconds).
  const phaseProbes = probesFor(OUTAGE_S + (liveness.initialDelaySeconds ?? 0), liveness);
  const c1 = prober.count.liveness;
  await waitUntil(() => prober.count.liveness >= c1 + phaseProbes, {
    what: `${phaseProbes} liveness probes with no config`,
    deadlineMs: phaseProbes * livePeriodMs * 4 + 30_000,
    context,
    abort,
  });
  t.notOk(prober.restartedBecause, 'no config yet: liveness never fails', {
    failures: prober.restartedBecause,
  });
  t.notOk(prober.ready, 'no config yet: not ready');

  // Phase 2: the first config arrives; ready within seconds.
  writeFileSync(
    join(dir, 'config', 'a.yaml'),
    'domain: a\ndescriptors:\n  - key: k\n    rate_limit: { unit: minute, requests_per_unit: 5 }\n',
  );
  let since = performance.now();
  await waitUntil(() => prober.ready, {
    what: 'ready after the first config',
    deadlineMs: 15_000,
    context,
    abort,
  });
  t.pass(`ready ${Math.round(performance.now() - since)} ms after the first config`);

  // Phase 3: Redis stopped for OUTAGE_S (scaled): not ready, never restarted.
  await redis.kill();
  since = performance.now();
  await waitUntil(() => !prober.ready, {
    what: 'not ready while Redis is down',
    deadlineMs: 15_000 + readyPeriodMs * (readiness.failureThreshold ?? 3),
    context,
    abort,
  });
  t.pass(`not ready ${Math.round(performance.now() - since)} ms after Redis stopped`);
  const outageProbes = probesFor(OUTAGE_S, liveness);
  const c3 = prober.count.liveness;
  const r3 = prober.count.readiness;
  await waitUntil(() => prober.count.liveness >= c3 + outageProbes, {
    what: `${outageProbes} liveness probes while Redis is down`,
    deadlineMs: outageProbes * livePeriodMs * 4 + 30_000,
    context,
    abort,
  });
  t.notOk(prober.ready, 'still not ready at the end of the outage');
  t.ok(prober.count.readiness > r3, 'readiness kept probing during the outage');
  t.notOk(prober.restartedBecause, `Redis down for ${OUTAGE_S} s: liveness never fails`, {
    failures: prober.restartedBecause,
  });

  // Phase 4: Redis back: ready again within seconds, without a restart.
  await redis.restart();
  since = performance.now();
  await waitUntil(() => prober.ready, {
    what: 'ready after Redis is back',
    deadlineMs: 15_000,
    context,
    abort,
  });
  t.pass(`ready again ${Math.round(performance.now() - since)} ms after Redis came back`);
  t.notOk(prober.restartedBecause, 'never a restart');
  t.ok(proc.running, 'the process is the one started at the beginning');
});
