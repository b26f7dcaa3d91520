// The chart from nothing to a cluster, and the values well-kept charts accept: the image `npm run image`
// builds is the chart's default, the quickstart's trial Redis, the xDS certificates the chart generates
// (a real CA and a real mutual-TLS handshake between the two certificates), the headless Service, file
// mode (the ConfigMap mounted where the service reads, reloaded through the kubelet's ..data swap), the
// standard values (overrides, security contexts, extraEnv/envFrom/extraVolumes, scheduling) and a closed
// schema that still rejects what it does not know. The quickstart on a real API server is in chart.test.ts.
import t from 'tap';
import { createPrivateKey, X509Certificate } from 'node:crypto';
import {
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createServer, connect, type TLSSocket } from 'node:tls';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments, stringify } from 'yaml';
import { resolveHelm } from '../harness/kube.js';
import { runCommand } from '../harness/proc.js';
import { REDIS, STANDARD_VALUES } from './values-fixtures.js';
import { FileConfigProvider, type ConfigUpdate } from '../ratelimit/sources/index.js';

const repo = join(dirname(fileURLToPath(import.meta.url)), '..');
const chart = join(repo, 'charts', 'ratelimit');
const helm = resolveHelm();
const tmp = mkdtempSync(join(tmpdir(), 'rl-chart-conv-'));
t.teardown(() => rmSync(tmp, { recursive: true, force: true }));

type Obj = { kind: string; metadata: { name: string; [k: string]: any }; [k: string]: any };
const docs = (text: string): Obj[] =>
  parseAllDocuments(text)
    .map((d) => d.toJSON())
    .filter(Boolean);
let files = 0;
/** helm template with a values object (-f) and --set values; the release is rl in rl-system. */
const render = (values: object, ...sets: string[]) => {
  const file = join(tmp, `values-${files++}.yaml`);
  writeFileSync(file, stringify(values));
  return runCommand(helm, [
    'template',
    'rl',
    chart,
    '--namespace',
    'rl-system',
    '-f',
    file,
    ...sets.flatMap((s) => ['--set', s]),
  ]);
};
const rendered = async (values: object, ...sets: string[]) => {
  const r = await render(values, ...sets);
  if (r.code !== 0) throw new Error(`helm template failed: ${r.stderr}`);
  return docs(r.stdout);
};
const find = (objs: Obj[], kind: string, name: string) => {
  const o = objs.find((x) => x.kind === kind && x.metadata.name === name);
  if (!o) throw new Error(`no ${kind}/${name} in ${objs.map((x) => `${x.kind}/${x.metadata.name}`)}`);
  return o;
};
const container = (d: Obj) => d.spec.template.spec.containers[0];
const envOf = (d: Obj): Record<string, any> =>
  Object.fromEntries(container(d).env.map((e: any) => [e.name, e.value ?? e.valueFrom]));
const quickstart = parseAllDocuments(readFileSync(join(chart, 'quickstart-values.yaml'), 'utf8'))[0].toJSON();

t.test('npm run image builds the image the chart runs by default', async (t) => {
  const pkg = JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8'));
  const appVersion = /^appVersion: '?([^'\n]+)'?$/m.exec(readFileSync(join(chart, 'Chart.yaml'), 'utf8'))![1];
  const repository = parseAllDocuments(readFileSync(join(chart, 'values.yaml'), 'utf8'))[0].toJSON().image
    .repository;
  t.equal(repository, 'envoy-ratelimit-ts', 'a local name, not a registry nobody publishes to');
  t.equal(pkg.scripts.image, 'node scripts/build-image.mjs');
  t.equal(
    pkg.version,
    appVersion,
    'the script tags envoy-ratelimit-ts:<package version>, the chart appVersion',
  );
  t.match(
    readFileSync(join(repo, 'scripts', 'build-image.mjs'), 'utf8'),
    `\`${repository}:\${pkg.version}\``,
  );
  const objs = await rendered(REDIS);
  for (const name of ['rl-ratelimit', 'rl-ratelimit-operator']) {
    t.equal(container(find(objs, 'Deployment', name)).image, `envoy-ratelimit-ts:${appVersion}`, name);
  }
});

t.test('redis.deploy: a trial Redis in the release, and REDIS_URL points at it', async (t) => {
  const objs = await rendered({ redis: { deploy: true } });
  const redis = find(objs, 'Deployment', 'rl-ratelimit-redis');
  t.equal(container(redis).image, 'redis:7.4-alpine', 'the official image');
  t.same(container(redis).ports, [{ name: 'redis', containerPort: 6379 }]);
  t.equal(redis.spec.template.spec.securityContext.runAsNonRoot, true);
  const svc = find(objs, 'Service', 'rl-ratelimit-redis');
  t.same(svc.spec.selector, redis.spec.selector.matchLabels, 'the Service selects the Redis pod');
  t.equal(envOf(find(objs, 'Deployment', 'rl-ratelimit')).REDIS_URL, 'rl-ratelimit-redis:6379');
  const np = find(objs, 'NetworkPolicy', 'rl-ratelimit-redis');
  t.same(np.spec.ingress[0].from[0].podSelector.matchLabels, {
    'app.kubernetes.io/instance': 'rl',
    'app.kubernetes.io/component': 'ratelimit',
  });
  // Off by default; no Redis at all is a readable error, not pods dialling a made-up host.
  const off = await render(REDIS);
  t.notOk(
    docs(off.stdout).some((o) => o.metadata.name === 'rl-ratelimit-redis'),
    'no Redis unless asked',
  );
  const none = await render({});
  t.not(none.code, 0);
  t.match(none.stderr, /redis\.url is empty: set it to your Redis .* or set redis\.deploy=true/);
});

/** base64 data of a rendered Secret, decoded. */
const secretData = (s: Obj): Record<string, string> =>
  Object.fromEntries(
    Object.entries(s.data as Record<string, string>).map(([k, v]) => [
      k,
      Buffer.from(v, 'base64').toString(),
    ]),
  );

t.test('xds.tls.generate: a CA and a server/client pair that complete mutual TLS', async (t) => {
  const objs = await rendered({ ...REDIS, xds: { tls: { generate: true } } });
  const server = secretData(find(objs, 'Secret', 'rl-ratelimit-xds-server-tls'));
  const client = secretData(find(objs, 'Secret', 'rl-ratelimit-xds-client-tls'));
  t.same(Object.keys(server).sort(), ['ca.crt', 'tls.crt', 'tls.key']);
  t.same(Object.keys(client).sort(), ['ca.crt', 'tls.crt', 'tls.key']);
  t.equal(server['ca.crt'], client['ca.crt'], 'one CA in both Secrets: each side trusts the other');
  const ca = new X509Certificate(server['ca.crt']);
  t.ok(ca.ca, 'ca.crt is a CA certificate');
  t.match(ca.subject, /CN=rl-ratelimit-xds-ca/);
  const srv = new X509Certificate(server['tls.crt']);
  const cli = new X509Certificate(client['tls.crt']);
  for (const [name, cert, key] of [
    ['server', srv, server['tls.key']],
    ['client', cli, client['tls.key']],
  ] as const) {
    t.notOk(cert.ca, `${name}: not a CA`);
    t.ok(cert.checkIssued(ca), `${name}: issued by the CA`);
    t.ok(cert.verify(ca.publicKey), `${name}: signed by the CA's key`);
    t.equal(cert.issuer, ca.subject, `${name}: issuer is the CA's subject`);
    t.ok(cert.checkPrivateKey(createPrivateKey(key)), `${name}: tls.key is its key`);
    t.ok(new Date(cert.validTo).getTime() > Date.now() + 3000 * 86_400_000, `${name}: valid ~10 years`);
  }
  const rl = find(objs, 'Deployment', 'rl-ratelimit');
  const san = envOf(rl).CONFIG_GRPC_XDS_SERVER_TLS_SAN;
  t.equal(san, 'rl-ratelimit-xds.rl-system.svc');
  t.match(srv.subjectAltName, new RegExp(`DNS:${san.replaceAll('.', '\\.')}(,|$)`), 'the name pods require');
  t.match(srv.subjectAltName, /DNS:rl-ratelimit-xds\.rl-system\.svc\.cluster\.local/);
  t.match(cli.subjectAltName, /DNS:rl-ratelimit\.rl-system\.svc/);
  // The mounts use exactly these Secrets.
  t.same(rl.spec.template.spec.volumes, [
    { name: 'xds-tls', secret: { secretName: 'rl-ratelimit-xds-client-tls' } },
  ]);

  // The real thing: the operator's side requires a client certificate from the CA, the pods' side checks
  // the operator's certificate and name, as the operator and the xDS client do.
  const tlsServer = createServer(
    {
      cert: server['tls.crt'],
      key: server['tls.key'],
      ca: server['ca.crt'],
      requestCert: true,
      rejectUnauthorized: true,
    },
    (s) => s.end('xds'),
  );
  await new Promise<void>((r) => tlsServer.listen(0, '127.0.0.1', r));
  t.teardown(() => tlsServer.close());
  const port = (tlsServer.address() as { port: number }).port;
  const dial = (opts: object) =>
    new Promise<string>((resolve, reject) => {
      const s: TLSSocket = connect({ host: '127.0.0.1', port, servername: san, ...opts });
      let got = '';
      s.setEncoding('utf8');
      s.on('data', (d) => (got += d));
      s.on('end', () => resolve(got));
      s.on('error', reject);
    });
  t.equal(
    await dial({ cert: client['tls.crt'], key: client['tls.key'], ca: client['ca.crt'] }),
    'xds',
    'mutual TLS handshake between the generated certificates',
  );
  await t.rejects(
    dial({ cert: client['tls.crt'], key: client['tls.key'], ca: client['ca.crt'], servername: 'other.svc' }),
    /altnames|Hostname/i,
    'a different name is refused: the SAN check is real',
  );

  const both = await render({
    ...REDIS,
    xds: { tls: { generate: true, certManager: { enabled: true, issuerRef: { name: 'ca' } } } },
  });
  t.not(both.code, 0);
  t.match(both.stderr, /xds\.tls\.certManager\.enabled and xds\.tls\.generate are both set/);
  t.notOk(
    (await rendered(REDIS)).some((o) => o.kind === 'Secret'),
    'off by default (Secrets from you or cert-manager)',
  );
});

t.test('ratelimit.service.headless: a headless Service for Envoy STRICT_DNS', async (t) => {
  const objs = await rendered({ ...REDIS, ratelimit: { service: { headless: true } } });
  const headless = find(objs, 'Service', 'rl-ratelimit-headless');
  t.equal(headless.spec.clusterIP, 'None', 'DNS answers every pod address');
  t.same(headless.spec.selector, find(objs, 'Service', 'rl-ratelimit').spec.selector, 'the same pods');
  t.same(headless.spec.selector, find(objs, 'Deployment', 'rl-ratelimit').spec.selector.matchLabels);
  t.match(headless.spec.ports, [{ name: 'grpc', port: 8081, targetPort: 'grpc', appProtocol: 'grpc' }]);
  t.notOk(
    (await rendered(REDIS)).some((o) => o.metadata.name === 'rl-ratelimit-headless'),
    'off by default',
  );
});

t.test(
  'ratelimit.nodeOptions: the service runs with the GC settings for one core, and they can be unset',
  async (t) => {
    const deployment = async (values: object) => find(await rendered(values), 'Deployment', 'rl-ratelimit');
    t.equal(envOf(await deployment(REDIS)).NODE_OPTIONS, '--max-semi-space-size=4', 'on by default');
    t.equal(
      envOf(await deployment({ ...REDIS, ratelimit: { nodeOptions: '--max-semi-space-size=8' } }))
        .NODE_OPTIONS,
      '--max-semi-space-size=8',
    );
    t.notOk(
      'NODE_OPTIONS' in envOf(await deployment({ ...REDIS, ratelimit: { nodeOptions: '' } })),
      '"" sets none',
    );
    const operator = find(await rendered(REDIS), 'Deployment', 'rl-ratelimit-operator');
    t.notOk('NODE_OPTIONS' in envOf(operator), 'the operator keeps Node defaults');
  },
);

t.test(
  'ratelimit.nodeFlags: GC on the main thread by default, on the command line; [] for none',
  async (t) => {
    const command = async (values: object) =>
      container(find(await rendered(values), 'Deployment', 'rl-ratelimit')).command as string[];
    t.same(await command(REDIS), ['node', '--single-threaded-gc', 'bin/ratelimit.js'], 'on by default');
    t.same(
      await command({ ...REDIS, ratelimit: { nodeFlags: [] } }),
      ['node', 'bin/ratelimit.js'],
      '[] for none',
    );
    await t.rejects(
      rendered({ ...REDIS, ratelimit: { nodeFlags: ['--x; rm -rf /'] } }),
      /nodeFlags/,
      'the schema refuses what is not a flag',
    );
  },
);

const limitYaml = (domain: string) =>
  `domain: ${domain}\ndescriptors:\n  - key: remote_address\n    rate_limit: { unit: minute, requests_per_unit: 60 }\n`;

t.test('config.mode=file: a ConfigMap mounted where the service reads, reloaded on change', async (t) => {
  const objs = await rendered({
    ...REDIS,
    config: { mode: 'file', files: { 'example.yaml': limitYaml('example') } },
  });
  const cm = find(objs, 'ConfigMap', 'rl-ratelimit-config');
  t.same(cm.data, { 'example.yaml': limitYaml('example') }, 'one key per file, text unchanged');
  const rl = find(objs, 'Deployment', 'rl-ratelimit');
  const env = envOf(rl);
  t.equal(env.CONFIG_TYPE, 'FILE');
  t.notOk('CONFIG_GRPC_XDS_SERVER_URL' in env, 'no xDS client');
  const vol = rl.spec.template.spec.volumes.find((v: any) => v.configMap);
  t.same(vol.configMap, { name: 'rl-ratelimit-config' });
  const mount = container(rl).volumeMounts.find((m: any) => m.name === vol.name);
  // The directory the service reads (RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY) is the mount.
  const readDir = join(
    env.RUNTIME_ROOT,
    env.RUNTIME_SUBDIRECTORY ?? '',
    env.RUNTIME_APPDIRECTORY ?? 'config',
  );
  t.equal(mount.mountPath, readDir, 'mounted at the directory the service reads');
  t.equal(mount.readOnly, true);
  // File mode renders no operator, xDS Service, xDS certificates or operator RBAC.
  const names = objs.map((o) => `${o.kind}/${o.metadata.name}`);
  t.notOk(
    names.some((n) => /operator|xds|ClusterRole|Certificate/.test(n)),
    `nothing of the operator: ${names}`,
  );
  t.notOk(
    container(rl).volumeMounts.some((m: any) => m.name === 'xds-tls'),
    'no xDS certificates mounted',
  );

  // The kubelet's ConfigMap volume, as its atomic writer lays it out: the files are symlinks through
  // ..data, which points at a timestamped directory; an update writes a new directory and renames a new
  // ..data link over the old one. The service, with the rendered settings, reloads on that swap.
  const podRoot = join(tmp, 'pod');
  const mountDir = join(podRoot, readDir);
  mkdirSync(mountDir, { recursive: true });
  const writeVersion = (version: string, data: Record<string, string>) => {
    mkdirSync(join(mountDir, version));
    for (const [name, text] of Object.entries(data)) writeFileSync(join(mountDir, version, name), text);
    symlinkSync(version, join(mountDir, '..data_tmp'));
    renameSync(join(mountDir, '..data_tmp'), join(mountDir, '..data'));
    for (const name of Object.keys(data)) {
      try {
        symlinkSync(join('..data', name), join(mountDir, name));
      } catch {
        // already linked through ..data
      }
    }
  };
  writeVersion('..2026_01_01_00_00_00.1', cm.data);
  const updates: ConfigUpdate[] = [];
  const provider = new FileConfigProvider(
    {
      root: join(podRoot, env.RUNTIME_ROOT),
      subdirectory: env.RUNTIME_SUBDIRECTORY,
      appDirectory: env.RUNTIME_APPDIRECTORY,
      watchRoot: env.RUNTIME_WATCH_ROOT !== 'false',
    },
    (u) => updates.push(u),
  );
  t.teardown(() => provider.close());
  await provider.start();
  const domains = () => {
    const last = updates.at(-1);
    return last && 'config' in last ? [...last.config.domains] : [];
  };
  t.same(domains(), ['example'], 'the mounted file is loaded');
  writeVersion('..2026_01_01_00_01_00.2', { 'example.yaml': limitYaml('changed') });
  rmSync(join(mountDir, '..2026_01_01_00_00_00.1'), { recursive: true });
  const deadline = Date.now() + 30_000;
  while (domains()[0] !== 'changed' && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  t.same(domains(), ['changed'], 'the ..data swap is reloaded');
  t.notOk(
    updates.some((u) => 'error' in u),
    'no load error along the way',
  );

  const empty = await render({ ...REDIS, config: { mode: 'file' } });
  t.not(empty.code, 0);
  t.match(empty.stderr, /config\.mode=file needs at least one ratelimit YAML file in config\.files/);
  const badName = await render({ ...REDIS, config: { mode: 'file', files: { 'a/b.yaml': 'x' } } });
  t.not(badName.code, 0, 'a file name that cannot be a ConfigMap key is refused');
});

t.test('the standard values: overrides, security contexts, env, volumes, scheduling', async (t) => {
  const objs = await rendered(STANDARD_VALUES);
  for (const o of objs) {
    if (o.kind === 'CustomResourceDefinition') continue;
    t.match(o.metadata.name, /^edge-limits/, `${o.kind}/${o.metadata.name}: fullnameOverride`);
    t.equal(o.metadata.labels['app.kubernetes.io/name'], 'rl', `${o.kind}: nameOverride in the labels`);
  }
  for (const [name, component] of [
    ['edge-limits', 'ratelimit'],
    ['edge-limits-operator', 'operator'],
  ] as const) {
    const d = find(objs, 'Deployment', name);
    const pod = d.spec.template.spec;
    const c = container(d);
    t.same(
      pod.securityContext,
      { runAsNonRoot: true, runAsUser: 10001, fsGroup: 10001 },
      `${component}: podSecurityContext merged, null drops a key`,
    );
    t.same(
      c.securityContext,
      {
        allowPrivilegeEscalation: false,
        readOnlyRootFilesystem: true,
        capabilities: { drop: ['ALL'] },
        runAsGroup: 10001,
      },
      `${component}: securityContext`,
    );
    const env = envOf(d);
    t.equal(env.PLAIN, 'x', `${component}: extraEnv value`);
    t.same(
      env.FROM_SECRET,
      { secretKeyRef: { name: 'creds', key: 'token' } },
      `${component}: extraEnv valueFrom`,
    );
    t.same(c.envFrom, [{ configMapRef: { name: `${component}-env` } }], `${component}: envFrom`);
    t.match(
      pod.volumes,
      [{ name: 'xds-tls' }, { name: 'scratch', emptyDir: {} }],
      `${component}: extraVolumes`,
    );
    t.match(c.volumeMounts, [{ name: 'xds-tls' }, { name: 'scratch', mountPath: '/scratch' }]);
    t.equal(d.spec.template.metadata.annotations['example.com/a'], 'b', `${component}: podAnnotations`);
    t.equal(d.spec.template.metadata.labels.team, 'edge', `${component}: podLabels`);
    t.equal(pod.priorityClassName, 'high', `${component}: priorityClassName`);
    t.same(pod.nodeSelector, { 'kubernetes.io/os': 'linux' });
    t.equal(pod.tolerations[0].key, 'dedicated');
    t.same(pod.affinity, { nodeAffinity: {} });
    t.equal(pod.topologySpreadConstraints[0].topologyKey, 'topology.kubernetes.io/zone');
  }
  // The names the pods dial and check follow the override.
  const env = envOf(find(objs, 'Deployment', 'edge-limits'));
  t.equal(env.CONFIG_GRPC_XDS_SERVER_URL, 'edge-limits-xds.rl-system.svc:18000');
  t.equal(env.CONFIG_GRPC_XDS_SERVER_TLS_SAN, 'edge-limits-xds.rl-system.svc');
  find(objs, 'Service', 'edge-limits-xds');
});

t.test('the schema stays closed: near misses of the standard values are rejected', async (t) => {
  const bad: [object, RegExp][] = [
    [{ fullNameOverride: 'x' }, /fullNameOverride/],
    [{ nameOverride: 'Not A Name' }, /nameOverride/],
    [{ ratelimit: { extraEnvs: [] } }, /extraEnvs/],
    [{ ratelimit: { extraEnv: [{ name: 'A', valueFrm: {} }] } }, /valueFrm/],
    [{ ratelimit: { extraEnv: { A: 'b' } } }, /extraEnv/],
    [{ operator: { securityContexts: {} } }, /securityContexts/],
    [{ ratelimit: { extraVolumeMounts: [{ name: 'x' }] } }, /mountPath/],
    [{ ratelimit: { service: { headles: true } } }, /headles/],
    [{ redis: { url: 'redis:6379', deploy: 'sometimes' } }, /deploy/],
    [{ xds: { tls: { generate: 'sometimes' } } }, /generate/],
    [{ config: { mode: 'files' } }, /mode/],
  ];
  for (const [values, field] of bad) {
    const r = await render({ ...REDIS, ...values });
    t.not(r.code, 0, `${JSON.stringify(values)} is rejected`);
    t.match(r.stderr, /values don't meet the specifications of the schema/, 'by the schema');
    t.match(r.stderr, field, 'naming the value');
  }
  t.equal((await render(quickstart)).code, 0, 'the quickstart values are accepted');
});

t.test('the failure mode / readiness rule fails with its own sentence', async (t) => {
  const r = await render({
    redis: { url: 'redis:6379', failureMode: 'local', healthCheckActiveConnection: true },
  });
  t.not(r.code, 0);
  t.match(
    r.stderr,
    'redis.healthCheckActiveConnection=true contradicts redis.failureMode=local: pods would go unready during a Redis outage and the failure mode would never answer; leave redis.healthCheckActiveConnection empty or false',
  );
  t.notMatch(r.stderr, /allOf|'not' failed/, 'not a JSON-schema riddle');
});

t.test(
  'the bounds of a pod: drain time, local-mode and write-behind memory become its settings',
  async (t) => {
    const objs = await rendered({
      redis: { url: 'redis:6379', failureModeLocalMaxBytes: 8388608, writeBehind: { maxBytes: 4194304 } },
      ratelimit: { shutdownDrainSeconds: 20, terminationGracePeriodSeconds: 40 },
    });
    const d = find(objs, 'Deployment', 'rl-ratelimit');
    const env = envOf(d);
    t.equal(env.SHUTDOWN_DRAIN_TIMEOUT, '20s');
    t.equal(env.CACHE_FAILURE_MODE_LOCAL_MAX_BYTES, '8388608');
    t.equal(env.CACHE_WRITE_BEHIND_MAX_BYTES, '4194304');
    t.equal(d.spec.template.spec.terminationGracePeriodSeconds, 40);
    const r = await render({ redis: { url: 'redis:6379' }, ratelimit: { shutdownDrainSeconds: 29 } });
    t.not(r.code, 0, 'a drain the grace period cannot hold is refused');
    t.match(
      r.stderr,
      'ratelimit.shutdownDrainSeconds=29 needs ratelimit.terminationGracePeriodSeconds above 31',
    );
  },
);
