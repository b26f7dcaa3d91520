import t from 'tap';
import {
  accessSync,
  chmodSync,
  constants,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import {
  resolveGoTool,
  resolveHelm,
  resolveKubectl,
  resolveReferenceRatelimit,
  resolveReferenceRatelimitClient,
  startKube,
  toolsCacheDir,
} from './kube.js';
import { freePorts, runCommand, ServerProcess, waitUntil } from './proc.js';

t.test('resolveGoTool prefers KUBEBUILDER_ASSETS and says how to build a missing tool', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'e2e-kube-resolve-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const assets = join(dir, 'assets');
  mkdirSync(assets);
  for (const name of ['kube-apiserver', 'etcd']) {
    writeFileSync(join(assets, name), '#!/bin/sh\n');
    chmodSync(join(assets, name), 0o755);
  }
  const emptyCache = join(dir, 'cache');
  const env = { KUBEBUILDER_ASSETS: assets, RATELIMIT_TOOLS_CACHE: emptyCache };
  t.equal(resolveGoTool('kube-apiserver', env), join(assets, 'kube-apiserver'));
  t.equal(resolveGoTool('etcd', env), join(assets, 'etcd'));
  t.equal(toolsCacheDir(env), emptyCache);
  // kubectl is not in these assets and not in the (empty) cache: the message names the build script.
  t.throws(
    () => resolveKubectl(env),
    /kubectl not found at .*cache\/bin\/kubectl: run `bash scripts\/build-go-tools\.sh`/,
  );
  t.throws(() => resolveHelm(env), /build-go-tools\.sh/);
  t.throws(
    () => resolveGoTool('etcd', { KUBEBUILDER_ASSETS: emptyCache }),
    /KUBEBUILDER_ASSETS=.* has no executable etcd/,
  );
});

t.test(
  'a real kube-apiserver serves client-node and kubectl, then stops everything it started',
  async (t) => {
    const startedAt = Date.now();
    const kube = await startKube();
    t.comment(`etcd + kube-apiserver ready in ${Date.now() - startedAt} ms`);
    let stopped = false;
    t.teardown(() => (stopped ? undefined : kube.stop()));
    t.match(kube.server, /^https:\/\/127\.0\.0\.1:\d+$/);
    t.ok(kube.token.length > 0, 'has a bearer token');
    t.equal(kube.existing, false);

    const core = kube.kubeConfig.makeApiClient(CoreV1Api);
    const ns = `e2e-harness-${process.pid}`;
    const created = await core.createNamespace({ body: { metadata: { name: ns } } });
    t.equal(created.metadata?.name, ns);
    await core.createNamespacedConfigMap({
      namespace: ns,
      body: { metadata: { name: 'limits' }, data: { 'config.yaml': 'domain: test\n' } },
    });
    const cm = await core.readNamespacedConfigMap({ name: 'limits', namespace: ns });
    t.same(cm.data, { 'config.yaml': 'domain: test\n' });
    t.ok(cm.metadata?.resourceVersion, 'stored in etcd with a resourceVersion');

    // The same objects through a real kubectl and the generated kubeconfig.
    const kubectl = resolveKubectl();
    const env = { ...process.env, KUBECONFIG: kube.kubeconfigPath };
    const nsList = await runCommand(kubectl, ['get', 'ns', '-o', 'name'], { env });
    t.equal(nsList.code, 0, nsList.stderr);
    t.match(nsList.stdout, new RegExp(`^namespace/${ns}$`, 'm'));
    t.match(nsList.stdout, /^namespace\/default$/m);
    const data = await runCommand(
      kubectl,
      ['get', 'configmap', 'limits', '-n', ns, '-o', 'jsonpath={.data.config\\.yaml}'],
      { env },
    );
    t.equal(data.code, 0, data.stderr);
    t.equal(data.stdout, 'domain: test\n');

    // An existing cluster (here: this one, through its kubeconfig) is used as is, and stop() leaves it alone.
    const attached = await startKube({
      env: { ...process.env, E2E_USE_EXISTING_CLUSTER: 'true', KUBECONFIG: kube.kubeconfigPath },
    });
    t.equal(attached.existing, true);
    t.equal(attached.server, kube.server);
    t.equal(attached.token, kube.token);
    await attached.stop();
    const again = await attached.kubeConfig.makeApiClient(CoreV1Api).readNamespace({ name: ns });
    t.equal(again.metadata?.name, ns, 'still served after the attached harness stopped');

    await kube.stop();
    stopped = true;
    await kube.stop(); // idempotent
    await t.rejects(core.readNamespace({ name: ns }), 'the API server is gone after stop()');
  },
);

t.test('helm runs', async (t) => {
  const helm = resolveHelm();
  const home = mkdtempSync(join(tmpdir(), 'e2e-helm-'));
  t.teardown(() => rmSync(home, { recursive: true, force: true }));
  const r = await runCommand(helm, ['version', '--short'], {
    env: { ...process.env, HELM_CACHE_HOME: home, HELM_CONFIG_HOME: home, HELM_DATA_HOME: home },
  });
  t.equal(r.code, 0, r.stderr);
  t.match(r.stdout, /^v3\.\d+\.\d+/);
});

t.test('the reference ratelimit service and client are executable and start', async (t) => {
  const service = resolveReferenceRatelimit();
  const client = resolveReferenceRatelimitClient();
  for (const p of [service, client])
    t.doesNotThrow(() => accessSync(p, constants.X_OK), `${p} is executable`);

  // client_cmd is a flag-driven CLI: -h lists its flags.
  const help = await runCommand(client, ['-h']);
  t.match(help.stdout + help.stderr, /dial_string/);

  // service_cmd reads its settings from the environment. Give it free ports (never the defaults, which other
  // tests on this machine may use) and a Redis address where nothing listens: it starts, logs, and fails fast.
  const dir = mkdtempSync(join(tmpdir(), 'e2e-refrl-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const [port, grpcPort, debugPort, deadRedisPort] = await freePorts(4);
  const logPath = join(dir, 'service_cmd.log');
  const proc = new ServerProcess('service_cmd', service, [], {
    logPath,
    cwd: dir,
    env: {
      PATH: process.env.PATH,
      HOST: '127.0.0.1',
      PORT: String(port),
      GRPC_HOST: '127.0.0.1',
      GRPC_PORT: String(grpcPort),
      DEBUG_HOST: '127.0.0.1',
      DEBUG_PORT: String(debugPort),
      USE_STATSD: 'false',
      LOG_LEVEL: 'debug',
      RUNTIME_ROOT: join(dir, 'runtime'),
      RUNTIME_SUBDIRECTORY: 'ratelimit',
      REDIS_SOCKET_TYPE: 'tcp',
      REDIS_URL: `127.0.0.1:${deadRedisPort}`,
    },
  });
  t.teardown(() => proc.stop(2_000));
  // Started means: spawned, and it wrote something (or exited on its own) within the deadline.
  await waitUntil(() => !proc.running || readIfExists(logPath).length > 0, {
    deadlineMs: 30_000,
    what: 'service_cmd to write its first log line',
    context: () => proc.logTail(20),
  });
  t.ok(proc.pid > 0, 'spawned');
  t.notMatch(proc.exitReason() ?? '', /failed to start/, 'the binary could be executed');
  await proc.stop(2_000);
  t.match(readIfExists(logPath), /redis|settings|runtime/i, 'logs about its settings or Redis');
});

function readIfExists(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return '';
  }
}
