// The Envoy examples (examples/envoy/) checked like code: every field decoded strictly with Envoy's own
// protos, so a typo fails here and not at someone's Envoy start; and the requests docs/envoy.md
// describes, turned into descriptors by an emulation of Envoy's rate limit actions driven by envoy.yaml,
// decided by the real built service on examples/config with a real Redis.
import t from 'tap';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { parse, parseAllDocuments } from 'yaml';
import { rateLimitServiceDefinition } from '../proto/index.js';
import type { WireRateLimitRequest, WireRateLimitResponse } from '../proto/index.js';
import { builtBin, REPO_ROOT } from '../harness/dist.js';
import {
  BOOTSTRAP,
  EnvoyProtos,
  HCM,
  RATELIMIT_FILTER,
  RATELIMIT_PER_ROUTE,
  ROUTER_FILTER,
  RateLimitFilterEmulation,
  filterOutcome,
  type EmulatedRequest,
  type Json,
} from '../harness/envoy-actions.js';
import {
  freePort,
  LOOPBACK,
  quietListenEnv,
  makeTempDir,
  removeTempDir,
  ServerProcess,
  waitForPort,
  waitUntil,
} from '../harness/net.js';
import { startRedis } from '../harness/redis/index.js';
import { resolveGoTool } from '../harness/kube.js';
import { runCommand } from '../harness/proc.js';

const ENVOY_YAML = join(REPO_ROOT, 'examples', 'envoy', 'envoy.yaml');
const ISTIO_YAML = join(REPO_ROOT, 'examples', 'envoy', 'istio-envoyfilter.yaml');
const RLQS_YAML = join(REPO_ROOT, 'examples', 'envoy', 'rate-limit-quota.yaml');
const RLQS_FILTER = 'envoy.extensions.filters.http.rate_limit_quota.v3.RateLimitQuotaFilterConfig';

const protos = new EnvoyProtos();

/** Every `@type` anywhere in a decoded value. */
function anyTypes(v: Json, out = new Set<string>()): Set<string> {
  if (Array.isArray(v)) for (const x of v) anyTypes(x, out);
  else if (v && typeof v === 'object') {
    if (typeof v['@type'] === 'string') out.add(v['@type']);
    for (const x of Object.values(v)) anyTypes(x, out);
  }
  return out;
}

function decodeEnvoyYaml(text: string) {
  return protos.decode(BOOTSTRAP, parse(text));
}

/** Istio's applyTo → the Envoy message a patch value is. */
const ISTIO_PATCH_TYPES: Record<string, string> = {
  HTTP_FILTER: 'envoy.extensions.filters.network.http_connection_manager.v3.HttpFilter',
  NETWORK_FILTER: 'envoy.config.listener.v3.Filter',
  LISTENER: 'envoy.config.listener.v3.Listener',
  FILTER_CHAIN: 'envoy.config.listener.v3.FilterChain',
  CLUSTER: 'envoy.config.cluster.v3.Cluster',
  ROUTE_CONFIGURATION: 'envoy.config.route.v3.RouteConfiguration',
  VIRTUAL_HOST: 'envoy.config.route.v3.VirtualHost',
  HTTP_ROUTE: 'envoy.config.route.v3.Route',
};

function decodeIstio(text: string): { errors: string[]; values: Json[] } {
  const errors: string[] = [];
  const values: Json[] = [];
  parseAllDocuments(text).forEach((doc, i) => {
    const obj = doc.toJSON();
    if (obj.apiVersion !== 'networking.istio.io/v1alpha3' || obj.kind !== 'EnvoyFilter') {
      errors.push(`document ${i}: not a networking.istio.io/v1alpha3 EnvoyFilter`);
      return;
    }
    (obj.spec.configPatches as Json[]).forEach((p, j) => {
      const type = ISTIO_PATCH_TYPES[p.applyTo];
      if (!type) {
        errors.push(`document ${i} patch ${j}: applyTo ${p.applyTo} not checked`);
        return;
      }
      // A MERGE patch is a partial message: its own required fields may be missing.
      const r = protos.decode(type, p.patch.value, {
        partial: p.patch.operation === 'MERGE',
        path: `doc${i}.configPatches[${j}].patch.value`,
      });
      errors.push(...r.errors);
      values.push(r.value);
    });
  });
  return { errors, values };
}

t.test('examples/envoy/envoy.yaml decodes strictly as an Envoy v3 Bootstrap', async (t) => {
  const r = decodeEnvoyYaml(readFileSync(ENVOY_YAML, 'utf8'));
  t.same(r.errors, [], 'no unknown field, bad enum, bad duration or broken validate rule');
  const types = anyTypes(r.value);
  for (const ty of [HCM, RATELIMIT_FILTER, RATELIMIT_PER_ROUTE, ROUTER_FILTER])
    t.ok(types.has(ty), `${ty} is used and was decoded`);
  const em = new RateLimitFilterEmulation(r.value, 'ingress');
  t.equal(em.filter.enable_x_ratelimit_headers, 'DRAFT_VERSION_03');
  t.equal(em.filter.failure_mode_deny ?? false, false, 'fails open');
  t.equal(em.filter.timeout, 50, 'timeout 0.05s, as docs/envoy.md says');
  const clusters: Json[] = r.value.static_resources.clusters;
  const rl = clusters.find(
    (c) => c.name === em.filter.rate_limit_service.grpc_service.envoy_grpc.cluster_name,
  );
  t.ok(rl, 'the filter points at a defined cluster');
  const proto = rl.typed_extension_protocol_options['envoy.extensions.upstreams.http.v3.HttpProtocolOptions'];
  t.ok(proto.explicit_http_config.http2_protocol_options, 'the ratelimit cluster speaks HTTP/2');
  t.ok(rl.health_checks?.[0]?.grpc_health_check, 'the ratelimit cluster is health checked over gRPC');
  // The access log prints the named limit from the metadata keys the service writes.
  const hcm = r.value.static_resources.listeners[0].filter_chains[0].filters[0].typed_config;
  const log = hcm.access_log[0].typed_config;
  t.equal(log['@type'], 'envoy.extensions.access_loggers.stream.v3.StdoutAccessLog');
  const format: string = log.log_format.text_format_source.inline_string;
  for (const key of ['namedLimit', 'namedLimits'])
    t.match(format, `%DYNAMIC_METADATA(envoy.filters.http.ratelimit:${key})%`);
  t.ok(format.endsWith('\n'), 'one line per request');
});

t.test('examples/envoy/istio-envoyfilter.yaml: every patch value decodes strictly', async (t) => {
  const r = decodeIstio(readFileSync(ISTIO_YAML, 'utf8'));
  t.same(r.errors, []);
  t.equal(r.values.length, 2);
  t.ok(anyTypes(r.values).has(RATELIMIT_FILTER), 'the inserted filter is the ratelimit filter');
  t.ok(r.values[1].rate_limits.length >= 4, 'the virtual host patch carries the actions');
});

t.test("examples/envoy/istio-envoyfilter.yaml decodes strictly into Istio's EnvoyFilter type", async (t) => {
  // tools/istio-check: istio.io/api's networking.v1alpha3.EnvoyFilter, the message behind Istio's CRD.
  const istioCheck = resolveGoTool('istio-check');
  const r = await runCommand(istioCheck, [ISTIO_YAML]);
  t.equal(r.code, 0, r.stdout + r.stderr);
  t.equal(r.stdout.split('\n').filter((l) => / ok EnvoyFilter$/.test(l)).length, 2, 'both EnvoyFilters');
  t.notMatch(r.stdout, / skipped /, 'nothing left unchecked');
  // Strict: a misspelt field or a wrong enum name in a copy is refused, named.
  const dir = mkdtempSync(join(tmpdir(), 'rl-istio-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const istio = readFileSync(ISTIO_YAML, 'utf8');
  for (const [what, from, to, named] of [
    ['a misspelt field', 'applyTo:', 'aplyTo:', 'unknown field "aplyTo"'],
    ['a wrong enum name', 'context: GATEWAY', 'context: GATEWAYS', 'GATEWAYS'],
  ] as const) {
    const bad = join(dir, 'bad.yaml');
    writeFileSync(bad, istio.replace(from, to));
    const b = await runCommand(istioCheck, [bad]);
    t.equal(b.code, 1, `${what} is refused`);
    t.ok(b.stdout.includes(named), `${what} is named: ${b.stdout}`);
  }
});

t.test('examples/envoy/rate-limit-quota.yaml decodes strictly as an Envoy v3 Bootstrap', async (t) => {
  const good = readFileSync(RLQS_YAML, 'utf8');
  const r = decodeEnvoyYaml(good);
  t.same(r.errors, [], 'no unknown field, bad enum, bad duration or broken validate rule');
  const types = anyTypes(r.value);
  for (const ty of [
    HCM,
    RLQS_FILTER,
    'envoy.extensions.filters.http.rate_limit_quota.v3.RateLimitQuotaBucketSettings',
    'envoy.type.matcher.v3.HttpRequestHeaderMatchInput',
    ROUTER_FILTER,
  ])
    t.ok(types.has(ty), `${ty} is used and was decoded`);
  const hcm = r.value.static_resources.listeners[0].filter_chains[0].filters[0].typed_config;
  const f = hcm.http_filters.find((x: Json) => x.typed_config['@type'] === RLQS_FILTER).typed_config;
  const rl = r.value.static_resources.clusters.find(
    (c: Json) => c.name === f.rlqs_server.envoy_grpc.cluster_name,
  );
  t.ok(rl, 'rlqs_server points at a defined cluster');
  t.ok(
    rl.typed_extension_protocol_options['envoy.extensions.upstreams.http.v3.HttpProtocolOptions']
      .explicit_http_config.http2_protocol_options,
    'that cluster speaks HTTP/2',
  );
  const cases: [string, string, RegExp][] = [
    ['reporting_interval: 1s', 'reporting_interval: 0.1s', /reporting_interval: .*greater than/],
    ['reporting_interval: 1s', 'reporting_intervall: 1s', /reporting_intervall: unknown field/],
    [
      'reuse_last_assignment: {}',
      'reuse_last_assignment: {}\n                                fallback_rate_limit: { blanket_rule: DENY_ALL }',
      /oneof expired_assignment_behavior has/,
    ],
    ['code: TooManyRequests', 'code: TooManyRequest', /code: .*not a value/],
    ['max_tokens: 10', 'max_tokens: 0', /max_tokens: /],
  ];
  for (const [from, to, want] of cases) {
    t.ok(good.includes(from), `the example has ${from}`);
    t.match(decodeEnvoyYaml(good.replace(from, to)).errors.join('\n'), want, `${from} → ${to} is rejected`);
  }
});

t.test('the strict decoder fails on what Envoy would reject', async (t) => {
  const good = readFileSync(ENVOY_YAML, 'utf8');
  const cases: [string, string, RegExp][] = [
    [
      'failure_mode_deny: false',
      'failure_mode_denny: false',
      /failure_mode_denny: unknown field in .*RateLimit/,
    ],
    ['DRAFT_VERSION_03', 'DRAFT_VERSION_3', /enable_x_ratelimit_headers: .*not a value/],
    ['timeout: 0.05s', 'timeout: 50ms', /timeout: a duration is a string/],
    [
      'vh_rate_limits: INCLUDE',
      'vh_ratelimits: INCLUDE',
      /vh_ratelimits: unknown field in .*RateLimitPerRoute/,
    ],
    ['- remote_address: {}', '- remote_adress: {}', /remote_adress: unknown field in .*RateLimit.Action/],
    ['present_match: true', 'present_match: "yes"', /present_match: expected bool/],
    ['cluster_name: ratelimit }', 'cluster_nam: ratelimit }', /cluster_nam: unknown field/],
    ['ratelimit.v3.RateLimitPerRoute', 'ratelimit.v3.RateLimitPerRout', /no message .*RateLimitPerRout/],
    ['descriptor_value: banned', 'descriptor_value: ""', /descriptor_value: at least 1 characters/],
  ];
  for (const [from, to, want] of cases) {
    t.ok(good.includes(from), `the example has ${from}`);
    const r = decodeEnvoyYaml(good.replace(from, to));
    t.match(r.errors.join('\n'), want, `${from} → ${to} is rejected`);
  }
  // proto3 JSON accepts lowerCamel names as well
  const camel = decodeEnvoyYaml(good.replace('failure_mode_deny: false', 'failureModeDeny: false'));
  t.same(camel.errors, [], 'lowerCamel field names are accepted');
  const istio = readFileSync(ISTIO_YAML, 'utf8');
  t.match(
    decodeIstio(istio.replace('descriptor_key: user', 'descriptor_kye: user')).errors.join('\n'),
    /descriptor_kye/,
  );
});

t.test('the emulated actions give the documented descriptors', async (t) => {
  const em = new RateLimitFilterEmulation(decodeEnvoyYaml(readFileSync(ENVOY_YAML, 'utf8')).value, 'ingress');
  const entries = (req: EmulatedRequest) =>
    em.call(req).request?.descriptors?.map((d) => d.entries!.map((e) => `${e.key}=${e.value}`).join(','));
  t.same(entries({ path: '/', peer: '192.0.2.1' }), ['remote_address=192.0.2.1']);
  t.same(
    entries({ path: '/', peer: '192.0.2.1', headers: { 'x-forwarded-for': '198.51.100.7' } }),
    ['remote_address=192.0.2.1'],
    "the edge ignores a client's own x-forwarded-for",
  );
  t.same(entries({ path: '/api/orders', peer: '192.0.2.1', headers: { 'x-user': 'alice' } }), [
    'path=/api,user=alice',
    'remote_address=192.0.2.1',
  ]);
  t.same(
    entries({ path: '/api/orders', peer: '192.0.2.1' }),
    ['remote_address=192.0.2.1'],
    'no x-user: no path descriptor',
  );
  t.same(entries({ path: '/x', peer: '192.0.2.1', headers: { 'x-tenant': 'free-a' } }), [
    'remote_address=192.0.2.1',
    'tenant=free-a',
  ]);
  t.same(
    entries({ path: '/', peer: '192.0.2.1', headers: { 'user-agent': 'BadBot/1.0', 'x-canary': '1' } }),
    ['remote_address=192.0.2.1', 'client=banned', 'client=canary'],
  );
  t.equal(
    em.call({ path: '/', peer: 'unix:/tmp/s' }).request,
    undefined,
    'no descriptor: the filter calls nothing',
  );
});

/** A minimal bootstrap around one virtual host, decoded strictly like the examples. */
function emulationOf(vh: Json, opts: { filter?: Json; hcm?: Json } = {}): RateLimitFilterEmulation {
  const bootstrap = {
    static_resources: {
      listeners: [
        {
          name: 'l',
          address: { socket_address: { address: '127.0.0.1', port_value: 1 } },
          filter_chains: [
            {
              filters: [
                {
                  name: 'envoy.filters.network.http_connection_manager',
                  typed_config: {
                    '@type': `type.googleapis.com/${HCM}`,
                    stat_prefix: 'x',
                    ...opts.hcm,
                    http_filters: [
                      {
                        name: 'envoy.filters.http.ratelimit',
                        typed_config: {
                          '@type': `type.googleapis.com/${RATELIMIT_FILTER}`,
                          domain: 'd',
                          rate_limit_service: { grpc_service: { envoy_grpc: { cluster_name: 'rl' } } },
                          ...opts.filter,
                        },
                      },
                      {
                        name: 'envoy.filters.http.router',
                        typed_config: { '@type': `type.googleapis.com/${ROUTER_FILTER}` },
                      },
                    ],
                    route_config: { virtual_hosts: [{ name: 'vh', domains: ['*'], ...vh }] },
                  },
                },
              ],
            },
          ],
        },
      ],
    },
  };
  const r = protos.decode(BOOTSTRAP, bootstrap);
  if (r.errors.length) throw new Error(r.errors.join('\n'));
  return new RateLimitFilterEmulation(r.value, 'l');
}

t.test("the emulation follows Envoy's documented action semantics", async (t) => {
  const descriptors = (em: RateLimitFilterEmulation, req: EmulatedRequest) =>
    em.call(req).request?.descriptors?.map((d) => d.entries!.map((e) => `${e.key}=${e.value}`).join(','));
  const route = (extra: Json = {}) => ({ match: { prefix: '/' }, route: { cluster: 'backend', ...extra } });

  // request_headers: absent → descriptor dropped; with skip_if_absent only the entry.
  const rh = emulationOf({
    routes: [route()],
    rate_limits: [
      {
        actions: [
          { generic_key: { descriptor_value: 'a' } },
          { request_headers: { header_name: 'x-a', descriptor_key: 'a' } },
        ],
      },
      {
        actions: [
          { generic_key: { descriptor_value: 'b' } },
          { request_headers: { header_name: 'x-b', descriptor_key: 'b', skip_if_absent: true } },
        ],
      },
    ],
  });
  t.same(descriptors(rh, { path: '/', peer: '192.0.2.1' }), ['generic_key=b']);
  t.same(descriptors(rh, { path: '/', peer: '192.0.2.1', headers: { 'x-a': '1', 'x-b': '2' } }), [
    'generic_key=a,a=1',
    'generic_key=b,b=2',
  ]);

  // header_value_match with expect_match false; destination_cluster; the header_match default key.
  const hv = emulationOf({
    routes: [route()],
    rate_limits: [
      {
        actions: [
          { destination_cluster: {} },
          {
            header_value_match: {
              descriptor_value: 'anon',
              expect_match: false,
              headers: [{ name: 'authorization', present_match: true }],
            },
          },
        ],
      },
    ],
  });
  t.same(descriptors(hv, { path: '/', peer: '192.0.2.1' }), [
    'destination_cluster=backend,header_match=anon',
  ]);
  t.equal(hv.call({ path: '/', peer: '192.0.2.1', headers: { authorization: 'x' } }).request, undefined);

  // metadata: dynamic, route entry, default_value.
  const md = emulationOf({
    routes: [
      {
        ...route({
          rate_limits: [
            {
              actions: [
                {
                  metadata: {
                    descriptor_key: 'plan',
                    metadata_key: { key: 'auth', path: [{ key: 'plan' }] },
                    default_value: 'free',
                  },
                },
              ],
            },
            {
              actions: [
                {
                  metadata: {
                    descriptor_key: 'team',
                    source: 'ROUTE_ENTRY',
                    metadata_key: { key: 'owner', path: [{ key: 'team' }] },
                  },
                },
              ],
            },
          ],
        }),
        metadata: { filter_metadata: { owner: { team: 'payments' } } },
      },
    ],
    rate_limits: [{ actions: [{ generic_key: { descriptor_value: 'vh' } }] }],
  });
  t.same(
    descriptors(md, { path: '/', peer: '192.0.2.1' }),
    ['plan=free', 'team=payments'],
    'route limits override the host',
  );
  t.same(descriptors(md, { path: '/', peer: '192.0.2.1', dynamicMetadata: { auth: { plan: 'gold' } } }), [
    'plan=gold',
    'team=payments',
  ]);

  // stage, request_type, a malformed override.
  const st = emulationOf(
    {
      routes: [route()],
      rate_limits: [
        { stage: 1, actions: [{ generic_key: { descriptor_value: 'one' } }] },
        {
          actions: [{ generic_key: { descriptor_value: 'zero' } }],
          limit: { dynamic_metadata: { metadata_key: { key: 'o', path: [{ key: 'l' }] } } },
        },
      ],
    },
    { filter: { stage: 1, request_type: 'internal' } },
  );
  t.equal(st.call({ path: '/', peer: '192.0.2.1' }).request, undefined, 'external request, internal filter');
  const internal = st.call({
    path: '/',
    peer: '192.0.2.1',
    headers: { 'x-envoy-internal': 'true' },
  }).request!;
  t.same(internal.descriptors, [{ entries: [{ key: 'generic_key', value: 'one' }] }], 'only stage 1');
  const ov = emulationOf({
    routes: [route()],
    rate_limits: [
      {
        actions: [{ generic_key: { descriptor_value: 'g' } }],
        limit: { dynamic_metadata: { metadata_key: { key: 'o', path: [{ key: 'l' }] } } },
      },
    ],
  });
  const limitOf = (l: Json) =>
    ov.call({ path: '/', peer: '192.0.2.1', dynamicMetadata: { o: { l } } }).request!.descriptors![0].limit;
  t.same(limitOf({ requests_per_unit: 7, unit: 'DAY' }), { requestsPerUnit: 7, unit: 'DAY' });
  t.equal(
    limitOf({ requests_per_unit: '7', unit: 'DAY' }),
    undefined,
    'a string count is ignored, as Envoy does',
  );
  t.equal(limitOf({ requests_per_unit: 7, unit: 'FORTNIGHT' }), undefined, 'an unknown unit is ignored');

  // remote_address behind one trusted proxy, without use_remote_address: the 2nd from the right.
  const xff = emulationOf(
    { routes: [route()], rate_limits: [{ actions: [{ remote_address: {} }] }] },
    { hcm: { xff_num_trusted_hops: 1 } },
  );
  t.same(
    descriptors(xff, {
      path: '/',
      peer: '10.0.0.1',
      headers: { 'x-forwarded-for': '203.0.113.5, 198.51.100.2, 10.0.0.9' },
    }),
    ['remote_address=198.51.100.2'],
  );
});

/** The Lua filter of envoy.yaml, emulated: x-tenant looked up in the route's tenant_limits metadata. */
function luaTenantMetadata(bootstrap: Json, routeName: string, headers: Record<string, string>): Json {
  const hcm = bootstrap.static_resources.listeners[0].filter_chains[0].filters[0].typed_config;
  const lua = hcm.http_filters.find((f: Json) => f.name === 'envoy.filters.http.lua');
  const code: string = lua.typed_config.default_source_code.inline_string;
  // The emulation below is only right while the script does what it says.
  for (const piece of [
    'headers():get("x-tenant")',
    'metadata():get("tenant_limits")',
    'dynamicMetadata():set("tenant", "limit", limits[tenant])',
  ])
    if (!code.includes(piece)) throw new Error(`the Lua filter no longer has ${piece}; update the emulation`);
  const route = hcm.route_config.virtual_hosts[0].routes.find((r: Json) => r.name === routeName);
  const limits = route.metadata?.filter_metadata?.['envoy.filters.http.lua']?.tenant_limits;
  const tenant = headers['x-tenant'];
  if (tenant === undefined || !limits?.[tenant]) return undefined;
  return { tenant: { limit: limits[tenant] } };
}

t.test('requests through the emulated filter, decided by the real service on examples/config', async (t) => {
  const bootstrap = decodeEnvoyYaml(readFileSync(ENVOY_YAML, 'utf8')).value;
  const em = new RateLimitFilterEmulation(bootstrap, 'ingress');

  const redis = await startRedis({ args: ['--save', '', '--appendonly', 'no'] });
  t.teardown(() => redis.stop());
  const root = makeTempDir('rl-envoy-examples');
  t.teardown(() => removeTempDir(root));
  cpSync(join(REPO_ROOT, 'examples', 'config'), join(root, 'ratelimit', 'config'), { recursive: true });
  const [grpcPort, httpPort, debugPort] = [await freePort(), await freePort(), await freePort()];
  const proc = new ServerProcess('ratelimit', process.execPath, [builtBin('ratelimit')], {
    logPath: join(root, 'ratelimit.log'),
    cwd: REPO_ROOT,
    env: {
      ...process.env,
      BACKEND_TYPE: 'redis',
      REDIS_SOCKET_TYPE: 'tcp',
      REDIS_URL: redis.url,
      RUNTIME_ROOT: root,
      RUNTIME_SUBDIRECTORY: 'ratelimit',
      RUNTIME_WATCH_ROOT: 'false',
      ...quietListenEnv(grpcPort, httpPort, debugPort),
    },
  });
  t.teardown(() => proc.stop());
  await waitForPort(grpcPort, {
    deadlineMs: 120_000,
    what: 'the ratelimit gRPC listener',
    abort: () => proc.exitReason(),
    context: () => proc.logTail(),
  });
  const Ctor = grpc.makeGenericClientConstructor(rateLimitServiceDefinition(), 'RateLimitService');
  const client = new Ctor(`${LOOPBACK}:${grpcPort}`, grpc.credentials.createInsecure());
  t.teardown(() => client.close());

  // The health check the ratelimit cluster of envoy.yaml runs: grpc.health.v1.Health/Check with its
  // service_name must answer SERVING (HealthCheckResponse field 1 = 1).
  const cluster = bootstrap.static_resources.clusters.find((c: Json) => c.name === 'ratelimit');
  const serviceName: string = cluster.health_checks[0].grpc_health_check.service_name;
  const health = await waitUntil(
    () =>
      new Promise<Buffer | undefined>((resolve) =>
        client.makeUnaryRequest(
          '/grpc.health.v1.Health/Check',
          (s: string) => Buffer.concat([Buffer.from([0x0a, Buffer.byteLength(s)]), Buffer.from(s)]),
          (b: Buffer) => b,
          serviceName,
          { deadline: Date.now() + 5000 },
          (err, res) => resolve(err ? undefined : res),
        ),
      ),
    { deadlineMs: 60_000, what: 'the health check to answer' },
  );
  t.same([...health], [0x08, 0x01], `Health/Check("${serviceName}") is SERVING`);

  const send = (req: WireRateLimitRequest) =>
    new Promise<WireRateLimitResponse>((resolve, reject) =>
      (client as any).ShouldRateLimit(
        req,
        { deadline: Date.now() + 10_000 },
        (err: Error | null, res: WireRateLimitResponse) => (err ? reject(err) : resolve(res)),
      ),
    );
  let peerSeq = 0;
  /** A client address no other request used, so the 5-per-minute address limit stays out of the way. */
  const freshPeer = () => {
    peerSeq++;
    return `10.${(peerSeq >> 16) & 255}.${(peerSeq >> 8) & 255}.${peerSeq & 255}`;
  };
  /** One request through the emulated filter: the descriptors, the answer and the client's response. */
  const request = async (req: Omit<EmulatedRequest, 'dynamicMetadata'>) => {
    const call = em.call(req);
    const dynamicMetadata = luaTenantMetadata(bootstrap, call.route!, req.headers ?? {});
    const withMeta = dynamicMetadata ? em.call({ ...req, dynamicMetadata }) : call;
    if (!withMeta.request) throw new Error(`no descriptors for ${JSON.stringify(req)}`);
    const answer = await send(withMeta.request);
    return { sent: withMeta.request, answer, outcome: filterOutcome(em.filter, answer) };
  };
  /**
   * Sends the request until the filter answers 429 (at most `max` times) and returns how many went
   * through first and the 429. A fixed window may turn over during the run, so "through first" is at
   * least the limit and at most twice it.
   */
  const untilLimited = async (max: number, make: () => Omit<EmulatedRequest, 'dynamicMetadata'>) => {
    for (let passed = 0; passed < max; passed++) {
      const r = await request(make());
      if (r.outcome.status === 429) return { passed, limited: r };
      t.equal(r.answer.overallCode, 'OK');
    }
    throw new Error(`no 429 after ${max} requests`);
  };
  const within = (n: number, limit: number) => n >= limit && n <= 2 * limit;

  await t.test('5 per minute per client address, then 429 with the headers', async (t) => {
    const { passed, limited } = await untilLimited(11, () => ({ path: '/', peer: '192.0.2.10' }));
    t.ok(within(passed, 5), `${passed} requests passed first`);
    t.equal(limited.answer.statuses[0].code, 'OVER_LIMIT');
    t.equal(limited.outcome.headers['x-ratelimit-limit'], '5, 5;w=60');
    t.equal(limited.outcome.headers['x-ratelimit-remaining'], '0');
    const reset = Number(limited.outcome.headers['x-ratelimit-reset']);
    t.ok(reset >= 0 && reset <= 60, `reset ${reset} s is within the minute`);
    t.equal(limited.outcome.headers['x-envoy-ratelimited'], 'true');
    // A spoofed x-forwarded-for does not give a fresh counter at the edge.
    const spoofed = await request({
      path: '/',
      peer: '192.0.2.10',
      headers: { 'x-forwarded-for': '198.51.100.1' },
    });
    t.equal(spoofed.outcome.status, 429, 'x-forwarded-for from the client is not trusted');
    const other = await request({ path: '/', peer: '192.0.2.11' });
    t.equal(other.outcome.status, undefined, 'another address is not limited');
    t.equal(other.outcome.headers['x-ratelimit-remaining'], '4', 'and sees its own remaining count');
  });

  await t.test('/api: 10 per second per user; admin unlimited; no x-user, no per-user limit', async (t) => {
    // Eleven at once for one user: at least one 429 unless the second turned over in between; retried
    // with a new user until seen.
    let attempt = 0;
    const seen = await waitUntil(
      async () => {
        const user = `u${attempt++}`;
        const rs = await Promise.all(
          Array.from({ length: 11 }, () =>
            request({ path: '/api/items', peer: freshPeer(), headers: { 'x-user': user } }),
          ),
        );
        const limited = rs.filter((r) => r.outcome.status === 429);
        return limited.length ? { limited, ok: rs.length - limited.length } : undefined;
      },
      { deadlineMs: 60_000, intervalMs: 0, what: 'a 429 within one second' },
    );
    t.equal(seen.ok, 10, '10 of the 11 passed');
    const over = seen.limited[0];
    t.same(over.sent.descriptors![0].entries, [
      { key: 'path', value: '/api' },
      { key: 'user', value: over.sent.descriptors![0].entries![1].value },
    ]);
    t.equal(over.answer.statuses[0].code, 'OVER_LIMIT', 'the per-user descriptor is the one over');
    t.match(over.outcome.headers['x-ratelimit-limit'], /^10, 10;w=1, 5;w=60$/);

    for (let i = 0; i < 15; i++) {
      const r = await request({ path: '/api/items', peer: freshPeer(), headers: { 'x-user': 'admin' } });
      t.equal(r.outcome.status, undefined, `admin request ${i + 1} passes`);
      if (r.outcome.status) break;
    }
    const noUser = await request({ path: '/api/items', peer: freshPeer() });
    t.equal(noUser.sent.descriptors!.length, 1, 'only the address descriptor is sent');
  });

  await t.test('free-* tenants 100 per hour; per-tenant limits from dynamic metadata', async (t) => {
    const free = await untilLimited(201, () => ({
      path: '/',
      peer: freshPeer(),
      headers: { 'x-tenant': 'free-a' },
    }));
    t.ok(within(free.passed, 100), `${free.passed} requests of free-a passed first`);
    t.equal(free.limited.outcome.headers['x-ratelimit-limit'], '100, 5;w=60, 100;w=3600');
    t.equal(free.limited.outcome.headers['x-ratelimit-remaining'], '0');

    // free-partner has 1000 per hour in the route metadata: past the free tier's 100.
    for (let i = 0; i < 110; i++) {
      const r = await request({ path: '/', peer: freshPeer(), headers: { 'x-tenant': 'free-partner' } });
      if (i === 0) {
        t.same(r.sent.descriptors![1].limit, { requestsPerUnit: 1000, unit: 'HOUR' }, 'the override is sent');
        // the address descriptor (4 of 5 left) has fewer remaining than the tenant's (999 of 1000)
        t.equal(r.outcome.headers['x-ratelimit-limit'], '5, 5;w=60, 1000;w=3600');
      }
      if (r.outcome.status) {
        t.fail(`free-partner limited at request ${i + 1}`);
        break;
      }
    }
    t.pass('free-partner: 110 requests passed');

    const acme = await untilLimited(41, () => ({
      path: '/',
      peer: freshPeer(),
      headers: { 'x-tenant': 'acme' },
    }));
    t.ok(within(acme.passed, 20), `${acme.passed} requests of acme passed first`);
    t.equal(acme.limited.outcome.headers['x-ratelimit-limit'], '20, 5;w=60, 20;w=60');

    const other = await request({ path: '/', peer: freshPeer(), headers: { 'x-tenant': 'globex' } });
    t.equal(other.sent.descriptors![1].limit, undefined, 'no metadata for globex: no override');
    t.equal(
      other.answer.statuses[1].currentLimit ?? undefined,
      undefined,
      'and no configured rule matches it',
    );
  });

  await t.test('banned clients always 429; canary clients counted, never limited', async (t) => {
    const banned = await request({ path: '/', peer: freshPeer(), headers: { 'user-agent': 'BadBot/2.1' } });
    t.equal(banned.outcome.status, 429, 'the first request of a banned client');
    t.equal(banned.answer.statuses[1].code, 'OVER_LIMIT');
    t.equal(banned.outcome.headers['x-ratelimit-remaining'], '0');
    for (let i = 0; i < 5; i++) {
      const r = await request({ path: '/', peer: freshPeer(), headers: { 'x-canary': '1' } });
      t.equal(r.outcome.status, undefined, `canary request ${i + 1} passes (shadow mode)`);
    }
  });

  await t.test('a filter domain the service does not know: every request passes', async (t) => {
    const req = em.call({ path: '/', peer: freshPeer(), headers: { 'user-agent': 'BadBot' } }).request!;
    const answer = await send({ ...req, domain: 'not-configured' });
    t.equal(answer.overallCode, 'OK', 'even the banned client');
  });
});
