// The Helm chart: lints, renders (defaults and every option), its schema rejects wrong values, it stays in
// step with the CRD and the operator's RBAC, every object it renders is accepted by a real API server
// (server-side dry run with the real kubectl), and helm install/upgrade/uninstall work against it.
import t from 'tap';
import { readFileSync, writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { X509Certificate } from 'node:crypto';
import { parseAllDocuments, stringify } from 'yaml';
import { resolveHelm, resolveKubectl, startKube } from '../harness/kube.js';
import { runCommand } from '../harness/proc.js';
import { REDIS, STANDARD_VALUES } from './values-fixtures.js';

const repo = join(dirname(fileURLToPath(import.meta.url)), '..');
const chart = join(repo, 'charts', 'ratelimit');
const helm = resolveHelm();

type Obj = { kind: string; metadata: { name: string }; [k: string]: any };
const docs = (text: string): Obj[] =>
  parseAllDocuments(text)
    .map((d) => d.toJSON())
    .filter(Boolean);

const QUICKSTART = join(chart, 'quickstart-values.yaml');

t.test('helm lint passes (with a Redis address, and with the quickstart values)', async (t) => {
  const r = await runCommand(helm, ['lint', chart, '--set', 'redis.url=redis:6379']);
  t.equal(r.code, 0, r.stdout + r.stderr);
  const q = await runCommand(helm, ['lint', chart, '-f', QUICKSTART]);
  t.equal(q.code, 0, q.stdout + q.stderr);
});

// The defaults plus the one value the chart cannot guess: where Redis is (later --set values win).
const render = (...sets: string[]) =>
  runCommand(helm, [
    'template',
    'rl',
    chart,
    '--namespace',
    'rl-system',
    ...['redis.url=redis:6379', ...sets].flatMap((s) => ['--set', s]),
  ]);
const envOf = (d: Obj) =>
  Object.fromEntries(
    d.spec.template.spec.containers[0].env.map((e: any) => [e.name, e.value ?? e.valueFrom]),
  );
const find = (objs: Obj[], kind: string, name: string) =>
  objs.find((o) => o.kind === kind && o.metadata.name === name)!;

// Every option switched on (the ServiceMonitor and Certificate kinds need their CRDs; the dry run installs stubs).
const ALL_OPTIONS = [
  'ratelimit.autoscaling.enabled=true',
  'serviceMonitor.enabled=true',
  'xds.tls.certManager.enabled=true',
  'xds.tls.certManager.issuerRef.name=rl-ca',
  'ratelimit.tls.enabled=true',
  'ratelimit.tls.secretName=rl-grpc-tls',
  'ratelimit.tls.requireClientCert=true',
  'ratelimit.tls.clientSan=envoy.example',
  'redis.type=sentinel',
  'redis.url=mymaster\\,sentinel-0:26379\\,sentinel-1:26379',
  'redis.auth.existingSecret=redis-auth',
  'redis.sentinelAuth.existingSecret=sentinel-auth',
  'redis.tls.enabled=true',
  'redis.tls.existingSecret=redis-tls',
  'redis.tls.clientCert=true',
  'ratelimit.metrics.statsd.enabled=true',
  'operator.podDisruptionBudget.maxUnavailable=1',
  'metrics.grafanaDashboard.enabled=true',
  'metrics.prometheusRule.enabled=true',
];

t.test('the default render: mTLS xDS, debug on loopback, NetworkPolicies, PDBs, probes', async (t) => {
  const r = await render('redis.auth.existingSecret=redis-auth');
  t.equal(r.code, 0, r.stderr);
  const objs = docs(r.stdout);
  const kinds = objs.map((o) => `${o.kind}/${o.metadata.name}`).sort();
  t.same(kinds, [
    'ClusterRole/rl-ratelimit-operator',
    'ClusterRoleBinding/rl-ratelimit-operator',
    'Deployment/rl-ratelimit',
    'Deployment/rl-ratelimit-operator',
    'NetworkPolicy/rl-ratelimit',
    'NetworkPolicy/rl-ratelimit-operator',
    'PodDisruptionBudget/rl-ratelimit',
    'PodDisruptionBudget/rl-ratelimit-operator',
    'Role/rl-ratelimit-operator-leader-election',
    'RoleBinding/rl-ratelimit-operator-leader-election',
    'Service/rl-ratelimit',
    'Service/rl-ratelimit-xds',
    'ServiceAccount/rl-ratelimit-operator',
  ]);
  const rl = find(objs, 'Deployment', 'rl-ratelimit');
  const env = envOf(rl);
  t.equal(env.CONFIG_TYPE, 'GRPC_XDS_DELTA', 'our pods subscribe to our operator with delta xDS');
  t.equal(
    env.CONFIG_GRPC_XDS_SERVER_URL,
    'rl-ratelimit-xds.rl-system.svc:18000',
    'points at the operator xDS Service',
  );
  t.same(env.CONFIG_GRPC_XDS_NODE_ID, { fieldRef: { fieldPath: 'metadata.name' } }, 'one xDS node per pod');
  t.equal(env.CONFIG_GRPC_XDS_SERVER_USE_TLS, 'true', 'xDS over TLS by default');
  t.equal(env.CONFIG_GRPC_XDS_CLIENT_TLS_CERT, '/etc/ratelimit/xds-tls/tls.crt', 'with a client certificate');
  t.equal(
    env.CONFIG_GRPC_XDS_SERVER_TLS_SAN,
    'rl-ratelimit-xds.rl-system.svc',
    "checking the operator's name",
  );
  t.same(env.REDIS_AUTH, { secretKeyRef: { name: 'redis-auth', key: 'auth' } });
  t.equal(env.DEBUG_HOST, '127.0.0.1', 'debug endpoints bound to loopback');
  const ports = rl.spec.template.spec.containers[0].ports.map((p: any) => p.name);
  t.notOk(ports.includes('debug'), 'the debug port is not exposed');
  t.same(rl.spec.template.spec.volumes, [
    { name: 'xds-tls', secret: { secretName: 'rl-ratelimit-xds-client-tls' } },
  ]);
  t.ok(rl.spec.template.spec.containers[0].readinessProbe.httpGet, 'readiness probe');
  t.same(
    rl.spec.template.spec.containers[0].livenessProbe.grpc,
    { port: 8081, service: 'liveness' },
    "liveness on gRPC health's `liveness` service (the process serves; not config or Redis)",
  );
  const op = find(objs, 'Deployment', 'rl-ratelimit-operator');
  t.match(op.spec.template.spec.containers[0].args, [
    '--xds-listen=0.0.0.0:18000',
    '--metrics-listen=0.0.0.0:8080',
    '--health-listen=0.0.0.0:8081',
    '--log-level=info',
    '--max-send-bytes=4194304',
    '--xds-tls-cert=/etc/ratelimit/xds-tls/tls.crt',
    '--xds-tls-key=/etc/ratelimit/xds-tls/tls.key',
    '--xds-tls-client-ca=/etc/ratelimit/xds-tls/ca.crt',
  ]);
  t.same(op.spec.template.spec.volumes, [
    { name: 'xds-tls', secret: { secretName: 'rl-ratelimit-xds-server-tls' } },
  ]);
  const opNp = find(objs, 'NetworkPolicy', 'rl-ratelimit-operator');
  t.same(
    opNp.spec.ingress[0],
    {
      ports: [{ port: 'xds', protocol: 'TCP' }],
      from: [
        {
          podSelector: {
            matchLabels: { 'app.kubernetes.io/instance': 'rl', 'app.kubernetes.io/component': 'ratelimit' },
          },
        },
      ],
    },
    'xDS only from the ratelimit pods',
  );
  const rlNp = find(objs, 'NetworkPolicy', 'rl-ratelimit');
  t.same(
    rlNp.spec.ingress[0].ports,
    [
      { port: 'grpc', protocol: 'TCP' },
      { port: 'http', protocol: 'TCP' },
    ],
    'callers on gRPC and HTTP',
  );
  t.notOk(JSON.stringify(rlNp).includes('debug'), 'no ingress to the debug port');

  const plain = docs((await render('xds.tls.enabled=false')).stdout);
  const plainEnv = envOf(find(plain, 'Deployment', 'rl-ratelimit'));
  t.notOk('CONFIG_GRPC_XDS_SERVER_USE_TLS' in plainEnv, 'xds.tls.enabled=false turns TLS off');
  t.notOk(find(plain, 'Deployment', 'rl-ratelimit-operator').spec.template.spec.volumes);
});

t.test(
  'every option renders: HPA, ServiceMonitors, Certificates, gRPC TLS, Redis sentinel auth and TLS',
  async (t) => {
    const r = await render(...ALL_OPTIONS);
    t.equal(r.code, 0, r.stderr);
    const objs = docs(r.stdout);
    const rl = find(objs, 'Deployment', 'rl-ratelimit');
    t.notOk('replicas' in rl.spec, 'the HPA owns the replica count');
    t.equal(find(objs, 'HorizontalPodAutoscaler', 'rl-ratelimit').spec.maxReplicas, 10);
    t.equal(objs.filter((o) => o.kind === 'ServiceMonitor').length, 2, 'operator and pods scraped');
    const server = find(objs, 'Certificate', 'rl-ratelimit-xds-server');
    t.equal(server.spec.secretName, 'rl-ratelimit-xds-server-tls');
    t.ok(server.spec.dnsNames.includes('rl-ratelimit-xds.rl-system.svc'), 'the name the pods check');
    t.equal(
      find(objs, 'Certificate', 'rl-ratelimit-xds-client').spec.secretName,
      'rl-ratelimit-xds-client-tls',
    );
    const env = envOf(rl);
    t.equal(env.GRPC_SERVER_USE_TLS, 'true');
    t.equal(env.GRPC_CLIENT_TLS_CACERT, '/etc/ratelimit/grpc-tls/ca.crt');
    t.equal(env.GRPC_CLIENT_TLS_SAN, 'envoy.example');
    t.equal(env.REDIS_TYPE, 'sentinel');
    t.equal(env.REDIS_URL, 'mymaster,sentinel-0:26379,sentinel-1:26379');
    t.same(env.REDIS_SENTINEL_AUTH, { secretKeyRef: { name: 'sentinel-auth', key: 'auth' } });
    t.equal(env.REDIS_TLS, 'true');
    t.equal(env.REDIS_TLS_CACERT, '/etc/ratelimit/redis-tls/ca.crt');
    t.equal(env.REDIS_TLS_CLIENT_CERT, '/etc/ratelimit/redis-tls/tls.crt');
    t.equal(env.USE_STATSD, 'true');
    t.same(
      rl.spec.template.spec.containers[0].livenessProbe.tcpSocket,
      { port: 'grpc' },
      'TLS: TCP liveness',
    );
    const secrets = rl.spec.template.spec.volumes.map((v: any) => v.secret.secretName).sort();
    t.same(secrets, ['redis-tls', 'rl-grpc-tls', 'rl-ratelimit-xds-client-tls']);
    t.equal(find(objs, 'PodDisruptionBudget', 'rl-ratelimit-operator').spec.maxUnavailable, 1);
    const lint = await runCommand(helm, ['lint', chart, ...ALL_OPTIONS.flatMap((s) => ['--set', s])]);
    t.equal(lint.code, 0, lint.stdout + lint.stderr);
  },
);

t.test('metrics.grafanaDashboard and metrics.prometheusRule: the shipped dashboard and alerts', async (t) => {
  const plain = docs((await render()).stdout);
  t.notOk(
    plain.some((o) => o.kind === 'PrometheusRule' || o.metadata.name === 'rl-ratelimit-dashboard'),
    'off by default',
  );
  const r = await render(
    'metrics.grafanaDashboard.enabled=true',
    'metrics.grafanaDashboard.annotations.grafana_folder=Edge',
    'metrics.prometheusRule.enabled=true',
    'metrics.prometheusRule.labels.release=kps',
  );
  t.equal(r.code, 0, r.stderr);
  const objs = docs(r.stdout);
  const cm = find(objs, 'ConfigMap', 'rl-ratelimit-dashboard');
  t.equal((cm.metadata as any).labels.grafana_dashboard, '1', 'the Grafana sidecar label');
  t.equal((cm.metadata as any).annotations.grafana_folder, 'Edge');
  const shipped = readFileSync(join(chart, 'files/monitoring/grafana-dashboard.json'), 'utf8');
  t.same(JSON.parse(cm.data['ratelimit.json']), JSON.parse(shipped), 'the dashboard file, unchanged');
  const rule = find(objs, 'PrometheusRule', 'rl-ratelimit');
  t.equal(rule.apiVersion, 'monitoring.coreos.com/v1');
  t.equal((rule.metadata as any).labels.release, 'kps');
  t.same(
    rule.spec.groups.map((g: any) => g.name),
    ['ratelimit.service', 'ratelimit.xds', 'ratelimit.operator'],
  );
  const alerts = rule.spec.groups.flatMap((g: any) => g.rules.map((x: any) => x.alert));
  for (const a of [
    'RateLimitRedisErrors',
    'RateLimitRedisCircuitOpen',
    'RateLimitFailureModeDecisions',
    'RateLimitConfigLoadErrors',
    'RateLimitConfigNacked',
    'RateLimitPodsNotOnLatestConfig',
    'RateLimitOperatorNoLeader',
    'RateLimitConfigNotAccepted',
  ])
    t.ok(alerts.includes(a), a);
  // Prometheus templates in the annotations reach the cluster as they are (not Helm-rendered).
  t.match(rule.spec.groups[0].rules[0].annotations.description, /\{\{ \$labels\.pod \}\}/);

  // No operator and no xDS in file mode: only the service's alerts.
  const fileMode = await render(
    'metrics.prometheusRule.enabled=true',
    'config.mode=file',
    'config.files.example\\.yaml=domain: example',
  );
  t.equal(fileMode.code, 0, fileMode.stderr);
  t.same(
    find(docs(fileMode.stdout), 'PrometheusRule', 'rl-ratelimit').spec.groups.map((g: any) => g.name),
    ['ratelimit.service'],
  );
  const bad = await render('metrics.prometheusRule.enable=true');
  t.not(bad.code, 0, 'the schema is closed');
  t.match(bad.stderr, /enable/);
});

t.test('xds.protocol: delta by default, sotw on request, nothing else', async (t) => {
  for (const [sets, configType] of [
    [[], 'GRPC_XDS_DELTA'],
    [['xds.protocol=delta'], 'GRPC_XDS_DELTA'],
    [['xds.protocol=sotw'], 'GRPC_XDS_SOTW'],
  ] as const) {
    const r = await render(...sets);
    t.equal(r.code, 0, r.stderr);
    t.equal(envOf(find(docs(r.stdout), 'Deployment', 'rl-ratelimit')).CONFIG_TYPE, configType);
  }
  const bad = await render('xds.protocol=incremental');
  t.not(bad.code, 0, 'the schema refuses other values');
  t.match(bad.stderr, /protocol/);
});

t.test('xds.maxMessageBytes sets the operator and the pods together', async (t) => {
  for (const [sets, bytes] of [
    [[], '4194304'],
    [['xds.maxMessageBytes=16777216'], '16777216'],
  ] as const) {
    const r = await render(...sets);
    t.equal(r.code, 0, r.stderr);
    const objs = docs(r.stdout);
    const operatorArgs: string[] = find(objs, 'Deployment', 'rl-ratelimit-operator').spec.template.spec
      .containers[0].args;
    t.ok(operatorArgs.includes(`--max-send-bytes=${bytes}`), `operator sends at most ${bytes} bytes`);
    t.equal(
      envOf(find(objs, 'Deployment', 'rl-ratelimit')).XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES,
      bytes,
      `pods accept ${bytes} bytes`,
    );
  }
});

t.test(
  'Redis down: the breaker and failure mode settings, and pods stay ready with a failure mode',
  async (t) => {
    const rlEnv = async (...sets: string[]) => {
      const r = await render(...sets);
      t.equal(r.code, 0, r.stderr);
      return envOf(find(docs(r.stdout), 'Deployment', 'rl-ratelimit'));
    };
    // The defaults are the service's own (docs/failure-modes.md): error mode, unready while Redis is away.
    const defaults = await rlEnv();
    t.match(defaults, {
      CACHE_FAILURE_MODE: 'error',
      CACHE_FAILURE_MODE_LOCAL_PODS: '2',
      REDIS_CIRCUIT_BREAKER_ENABLED: 'true',
      REDIS_CIRCUIT_BREAKER_FAILURES: '5',
      REDIS_CIRCUIT_BREAKER_PROBE_INTERVAL: '500ms',
      REDIS_STARTUP_WAIT: '10s',
      REDIS_TIMEOUT: '10s',
      REDIS_HEALTH_CHECK_ACTIVE_CONNECTION: 'true',
      CACHE_WRITE_BEHIND_ENABLED: 'false',
      CACHE_WRITE_BEHIND_INTERVAL: '1s',
      CACHE_WRITE_BEHIND_MAX_KEYS: '100000',
      REDIS_DIRECT_COUNTING: 'true',
      REDIS_PERSECOND_DIRECT_COUNTING: 'true',
    });
    const set = await rlEnv(
      'redis.failureMode=local',
      'redis.failureModeLocalPods=4',
      'redis.circuitBreaker.enabled=false',
      'redis.circuitBreaker.failures=3',
      'redis.circuitBreaker.probeInterval=250ms',
      'redis.startupWait=30s',
      'redis.timeout=200ms',
      'redis.writeBehind.enabled=true',
      'redis.writeBehind.interval=5s',
      'redis.writeBehind.maxKeys=5000',
      'redis.directCounting=false',
    );
    t.match(set, {
      CACHE_FAILURE_MODE: 'local',
      CACHE_FAILURE_MODE_LOCAL_PODS: '4',
      REDIS_CIRCUIT_BREAKER_ENABLED: 'false',
      REDIS_CIRCUIT_BREAKER_FAILURES: '3',
      REDIS_CIRCUIT_BREAKER_PROBE_INTERVAL: '250ms',
      REDIS_STARTUP_WAIT: '30s',
      REDIS_TIMEOUT: '200ms',
      CACHE_WRITE_BEHIND_ENABLED: 'true',
      CACHE_WRITE_BEHIND_INTERVAL: '5s',
      CACHE_WRITE_BEHIND_MAX_KEYS: '5000',
      REDIS_DIRECT_COUNTING: 'false',
      REDIS_PERSECOND_DIRECT_COUNTING: 'false',
    });
    // A failure mode other than error: pods stay ready through an outage, or the mode would never answer.
    for (const mode of ['allow', 'deny', 'local']) {
      const env = await rlEnv(`redis.failureMode=${mode}`);
      t.equal(env.REDIS_HEALTH_CHECK_ACTIVE_CONNECTION, 'false', `${mode}: not unready on a Redis outage`);
    }
    t.equal(
      (await rlEnv('redis.failureMode=error', 'redis.healthCheckActiveConnection=false'))
        .REDIS_HEALTH_CHECK_ACTIVE_CONNECTION,
      'false',
    );
    t.equal(
      (await rlEnv('redis.failureMode=allow', 'redis.healthCheckActiveConnection=false'))
        .REDIS_HEALTH_CHECK_ACTIVE_CONNECTION,
      'false',
    );
    // local divides by the largest fleet the HPA may run.
    t.equal((await rlEnv('ratelimit.autoscaling.enabled=true')).CACHE_FAILURE_MODE_LOCAL_PODS, '10');
    t.equal((await rlEnv('ratelimit.replicas=5')).CACHE_FAILURE_MODE_LOCAL_PODS, '5');
    // Asking for both is refused by the template, with a sentence that says why (the schema leaves the
    // rule to it: JSON Schema's if/not would only say "'not' failed").
    const both = await render('redis.failureMode=local', 'redis.healthCheckActiveConnection=true');
    t.not(both.code, 0, 'failureMode local with healthCheckActiveConnection=true is refused');
    t.match(
      both.stderr,
      /redis\.healthCheckActiveConnection=true contradicts redis\.failureMode=local: pods would go unready during a Redis outage/,
    );
    t.notMatch(both.stderr, /allOf|'not' failed/);
  },
);

t.test('values.schema.json: a wrong value fails the render, naming the value', async (t) => {
  const bad: [string, RegExp][] = [
    ['ratelimit.replicas=two', /ratelimit\.replicas|replicas/],
    ['redis.type=memcache', /redis\.type|type/],
    ['ratelimit.replica=3', /replica/],
    ['redis.timeout=ten', /timeout/],
    ['operator.xdsPort=70000', /xdsPort/],
    ['ratelimit.logFormat=xml', /logFormat/],
    ['xds.tls.enabled=yes', /enabled/],
    ['networkPolicy.callers=all', /callers/],
    ['redis.failureMode=open', /failureMode/],
    ['redis.failureModeLocalPods=0', /failureModeLocalPods/],
    ['redis.circuitBreaker.failures=0', /failures/],
    ['redis.circuitBreaker.probeInterval=soon', /probeInterval/],
    ['redis.startupWait=forever', /startupWait/],
    ['xds.maxMessageBytes=100', /maxMessageBytes/],
    ['redis.writeBehind.interval=often', /interval/],
    ['redis.writeBehind.maxKeys=0', /maxKeys/],
  ];
  for (const [set, field] of bad) {
    const r = await render(set);
    t.not(r.code, 0, `--set ${set} is rejected`);
    t.match(r.stderr, /values don't meet the specifications of the schema/, `${set}: a schema error`);
    t.match(r.stderr, field, `${set}: names the value`);
  }
  const missing = await render('ratelimit.tls.enabled=true');
  t.not(missing.code, 0);
  t.match(missing.stderr, /ratelimit\.tls\.secretName is required/);
  // Every value in values.yaml is described by the schema (additionalProperties: false rejects the rest).
  const schema = JSON.parse(readFileSync(join(chart, 'values.schema.json'), 'utf8'));
  const values = parseAllDocuments(readFileSync(join(chart, 'values.yaml'), 'utf8'))[0].toJSON();
  const undescribed: string[] = [];
  const walk = (v: any, s: any, path: string) => {
    if (!v || typeof v !== 'object' || Array.isArray(v) || !s?.properties) return;
    for (const k of Object.keys(v)) {
      if (!(k in s.properties)) undescribed.push(`${path}${k}`);
      else walk(v[k], s.properties[k], `${path}${k}.`);
    }
  };
  walk(values, schema, '');
  t.same(undescribed, [], 'every value has a schema entry');
});

// The chart's crds/ratelimitconfigs.yaml is the one committed CRD; crds/crd.test.ts checks it is the generated one.
t.test('the chart RBAC equals operator/deploy/rbac.yaml', async (t) => {
  const manifest = docs(readFileSync(join(repo, 'operator', 'deploy', 'rbac.yaml'), 'utf8'));
  const r = await runCommand(helm, ['template', 'rl', chart, '--set', 'redis.url=redis:6379']);
  t.equal(r.code, 0, r.stderr);
  const rendered = docs(r.stdout);
  for (const kind of ['ClusterRole', 'Role']) {
    t.same(
      rendered.find((o) => o.kind === kind)!.rules,
      manifest.find((o) => o.kind === kind)!.rules,
      `${kind} rules match the operator's least-privilege manifest`,
    );
  }
});

const STUB_CRDS = [
  ['servicemonitors', 'ServiceMonitor', 'monitoring.coreos.com'],
  ['prometheusrules', 'PrometheusRule', 'monitoring.coreos.com'],
  ['certificates', 'Certificate', 'cert-manager.io'],
].map(([plural, kind, group]) => ({
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: { name: `${plural}.${group}` },
  spec: {
    group,
    scope: 'Namespaced',
    names: { plural, kind, singular: kind.toLowerCase() },
    versions: [
      {
        name: 'v1',
        served: true,
        storage: true,
        schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
      },
    ],
  },
}));

t.test(
  'a real API server: server-side dry run of every object, helm install, upgrade, uninstall',
  async (t) => {
    const kube = await startKube();
    t.teardown(() => kube.stop());
    const kubectl = resolveKubectl();
    const dir = mkdtempSync(join(tmpdir(), 'rl-chart-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    const env = {
      ...process.env,
      KUBECONFIG: kube.kubeconfigPath,
      HELM_CACHE_HOME: join(dir, 'helm-cache'),
      HELM_CONFIG_HOME: join(dir, 'helm-config'),
      HELM_DATA_HOME: join(dir, 'helm-data'),
    };
    const k = (...args: string[]) => runCommand(kubectl, args, { env });
    const h = (...args: string[]) => runCommand(helm, args, { env, timeoutMs: 120_000 });
    const ns = await k('create', 'namespace', 'rl-system');
    t.equal(ns.code, 0, ns.stderr);
    // Stand-ins for the Prometheus Operator's and cert-manager's CRDs (schema-less): the API server then
    // checks our objects' kinds, groups and metadata.
    writeFileSync(join(dir, 'stub-crds.yaml'), STUB_CRDS.map((c) => JSON.stringify(c)).join('\n---\n'));
    const stubs = await k('apply', '--server-side', '-f', join(dir, 'stub-crds.yaml'));
    t.equal(stubs.code, 0, stubs.stderr);
    const crd = await k('apply', '--server-side', '-f', join(chart, 'crds'));
    t.equal(crd.code, 0, crd.stderr);
    await k('wait', '--for=condition=Established', 'crd', '--all', '--timeout=60s');
    const standardFile = join(dir, 'standard-values.yaml');
    writeFileSync(standardFile, stringify(STANDARD_VALUES));
    const fileModeFile = join(dir, 'file-mode-values.yaml');
    writeFileSync(
      fileModeFile,
      stringify({
        ...REDIS,
        config: {
          mode: 'file',
          files: { 'basic.yaml': readFileSync(join(repo, 'examples', 'config', 'example.yaml'), 'utf8') },
        },
      }),
    );
    for (const [what, args, deployment] of [
      ['defaults', ['--set', 'redis.url=redis:6379'], 'rl-ratelimit'],
      ['every option', ALL_OPTIONS.flatMap((s) => ['--set', s]), 'rl-ratelimit'],
      ['the quickstart values', ['-f', QUICKSTART], 'rl-ratelimit-redis'],
      ['file mode', ['-f', fileModeFile], 'rl-ratelimit'],
      ['the standard values', ['-f', standardFile], 'edge-limits-operator'],
    ] as const) {
      const r = await runCommand(helm, ['template', 'rl', chart, '--namespace', 'rl-system', ...args]);
      t.equal(r.code, 0, `${what}: ${r.stderr}`);
      const file = join(dir, 'rendered.yaml');
      writeFileSync(file, r.stdout);
      const dry = await k('apply', '--dry-run=server', '--server-side', '-n', 'rl-system', '-f', file);
      t.equal(dry.code, 0, `${what}: ${dry.stderr}`);
      t.match(
        dry.stdout,
        new RegExp(`deployment\\.apps/${deployment} serverside-applied \\(server dry run\\)`),
        `${what}: accepted by the API server`,
      );
    }

    // The quickstart of docs/helm.md: install with its values, then upgrade and uninstall.
    const install = await h('install', 'rl', chart, '--namespace', 'rl-system', '-f', QUICKSTART);
    t.equal(install.code, 0, install.stderr);
    t.match(install.stdout, /kubectl get rlc -A -w/, 'NOTES: watch the RateLimitConfigs');
    // The pods become ready only once a RateLimitConfig is accepted: NOTES waits for them after applying one.
    const notes = install.stdout;
    const waitPods = notes.indexOf('rollout status deployment/rl-ratelimit\n');
    t.ok(
      notes.indexOf('rollout status deployment/rl-ratelimit-operator') <
        notes.indexOf('kind: RateLimitConfig') && notes.indexOf('kind: RateLimitConfig') < waitPods,
      'NOTES: wait for the operator, apply a RateLimitConfig, then wait for the rate limit pods',
    );
    t.match(install.stdout, /rl-ratelimit\.rl-system\.svc\.cluster\.local:8081/, 'NOTES: where Envoy points');
    t.match(install.stdout, /rl-ratelimit-headless\.rl-system\.svc\.cluster\.local:8081/);
    t.match(install.stdout, /docs\/envoy\.md/);
    const secretField = async (name: string, key: string) =>
      (await k('get', 'secret', name, '-n', 'rl-system', '-o', `jsonpath={.data.${key.replace('.', '\\.')}}`))
        .stdout;
    const secret = (name: string) => secretField(name, 'tls.crt');
    const serverCert = await secret('rl-ratelimit-xds-server-tls');
    const clientCert = await secret('rl-ratelimit-xds-client-tls');
    const pem = (b64: string) => new X509Certificate(Buffer.from(b64, 'base64'));
    t.ok(
      pem(serverCert).checkIssued(pem(await secretField('rl-ratelimit-xds-client-tls', 'ca.crt'))),
      'the installed server certificate is signed by the CA the pods trust',
    );
    t.equal(
      (await k('get', 'deployment', 'rl-ratelimit-redis', '-n', 'rl-system', '-o', 'name')).stdout.trim(),
      'deployment.apps/rl-ratelimit-redis',
      'the trial Redis is installed',
    );
    const replicas = async () =>
      (await k('get', 'deployment', 'rl-ratelimit', '-n', 'rl-system', '-o', 'jsonpath={.spec.replicas}'))
        .stdout;
    t.equal(await replicas(), '2');
    const upgrade = await h(
      'upgrade',
      'rl',
      chart,
      '--namespace',
      'rl-system',
      '--reuse-values',
      '--set',
      'ratelimit.replicas=3',
    );
    t.equal(upgrade.code, 0, upgrade.stderr);
    t.equal(await replicas(), '3', 'upgrade applied the new value');
    t.equal(await secret('rl-ratelimit-xds-server-tls'), serverCert, 'the generated certificates are kept');
    t.equal(await secret('rl-ratelimit-xds-client-tls'), clientCert);
    const bad = await h(
      'upgrade',
      'rl',
      chart,
      '--namespace',
      'rl-system',
      '--reuse-values',
      '--set',
      'ratelimit.replicas=many',
    );
    t.not(bad.code, 0, 'a wrong value fails helm upgrade');
    t.match(bad.stderr, /schema/);
    t.equal(await replicas(), '3', 'and changes nothing');
    const badInstall = await h(
      'install',
      'rl2',
      chart,
      '--namespace',
      'rl-system',
      '--set',
      'redis.type=memcache',
    );
    t.not(badInstall.code, 0, 'a wrong value fails helm install');
    const uninstall = await h('uninstall', 'rl', '--namespace', 'rl-system', '--wait');
    t.equal(uninstall.code, 0, uninstall.stderr);
    const gone = await k('get', 'deployment', 'rl-ratelimit', '-n', 'rl-system');
    t.not(gone.code, 0, 'uninstall removed the Deployment');
    const crdKept = await k('get', 'crd', 'ratelimitconfigs.ratelimit.envoyproxy.io');
    t.equal(
      crdKept.code,
      0,
      'the CRD stays (Helm never deletes crds/), so RateLimitConfigs survive an uninstall',
    );
  },
);
