// ratelimit-config envoy: the printed rate_limits are decoded strictly with Envoy's own protos, run
// through the emulation of Envoy's descriptor actions for sample requests, and the descriptors that
// produces are matched by the service's compiled config: each request reaches the rule it should.
// The same actions as the hand-written examples/envoy/envoy.yaml come out for examples/config.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { parse } from 'yaml';
import {
  BOOTSTRAP,
  EnvoyProtos,
  HCM,
  RATELIMIT_FILTER,
  ROUTER_FILTER,
  RateLimitFilterEmulation,
  type EmulatedRequest,
  type Json,
} from '../../harness/envoy-actions.js';
import { compileSet, buildConfigSet } from '../../control-plane/config-set/index.js';
import { readSources } from '../../control-plane/config-set/index.js';
import { REPO_ROOT, runBin, runInProcess } from './testing.js';

const protos = new EnvoyProtos();
const CONFIG = join(REPO_ROOT, 'examples/config');
const MAPPING = [
  '--generic-key',
  'path',
  '--header',
  'user=x-user',
  '--header',
  'tenant=x-tenant',
  '--match',
  'client=banned:user-agent~BadBot',
  '--match',
  'client=canary:x-canary',
];

/** The printed rate_limits, each decoded strictly as envoy.config.route.v3.RateLimit, and the problems. */
function decodeEntries(stdout: string): { values: Json[]; errors: string[] } {
  const list = (parse(stdout) as { rate_limits: unknown[] }).rate_limits;
  const errors: string[] = [];
  const values = list.map((entry, i) => {
    const r = protos.decode('envoy.config.route.v3.RateLimit', entry, { path: `rate_limits[${i}]` });
    errors.push(...r.errors);
    return r.value;
  });
  return { values, errors };
}

/** A bootstrap whose one virtual host carries the rate_limits, decoded strictly, as Envoy would run it. */
function emulation(rateLimits: Json[]): RateLimitFilterEmulation {
  const bootstrap = {
    static_resources: {
      listeners: [
        {
          name: 'l',
          address: { socket_address: { address: '127.0.0.1', port_value: 10000 } },
          filter_chains: [
            {
              filters: [
                {
                  name: 'envoy.filters.network.http_connection_manager',
                  typed_config: {
                    '@type': `type.googleapis.com/${HCM}`,
                    stat_prefix: 'ingress',
                    use_remote_address: true,
                    http_filters: [
                      {
                        name: 'envoy.filters.http.ratelimit',
                        typed_config: {
                          '@type': `type.googleapis.com/${RATELIMIT_FILTER}`,
                          domain: 'example',
                          rate_limit_service: { grpc_service: { envoy_grpc: { cluster_name: 'rl' } } },
                        },
                      },
                      {
                        name: 'envoy.filters.http.router',
                        typed_config: { '@type': `type.googleapis.com/${ROUTER_FILTER}` },
                      },
                    ],
                    route_config: {
                      virtual_hosts: [
                        {
                          name: 'vh',
                          domains: ['*'],
                          rate_limits: rateLimits,
                          routes: [{ match: { prefix: '/' }, route: { cluster: 'backend' } }],
                        },
                      ],
                    },
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

t.test('envoy: the actions send descriptors the config rules match, request by request', async (t) => {
  const r = await runBin(['envoy', '--config', 'examples/config', ...MAPPING]);
  t.equal(r.code, 0, r.stderr);
  const decoded = decodeEntries(r.stdout);
  t.same(decoded.errors, [], 'every entry is a valid Envoy RateLimit');
  t.equal(decoded.values.length, 5);
  const em = emulation(decoded.values);
  const config = compileSet(buildConfigSet(readSources([CONFIG])));
  /** For each descriptor Envoy would send: its entries and the rule the service matches (or none). */
  const decide = (req: EmulatedRequest) =>
    (em.call(req).request?.descriptors ?? []).map((d) => {
      const entries = d.entries!.map((e) => ({ key: e.key!, value: e.value! }));
      const m = config.getLimit('example', { entries });
      return {
        sent: entries.map((e) => `${e.key}=${e.value}`).join(','),
        rule: m
          ? `${m.rule.unlimited ? 'unlimited' : `${m.rule.requestsPerUnit}/${m.rule.unit.toLowerCase()}`}${m.rule.shadowMode ? ' shadow' : ''}`
          : 'none',
      };
    });
  const peer = '192.0.2.10';
  t.same(decide({ path: '/', peer }), [{ sent: `remote_address=${peer}`, rule: '5/minute' }]);
  t.same(decide({ path: '/api/x', peer, headers: { 'x-user': 'alice' } }), [
    { sent: `remote_address=${peer}`, rule: '5/minute' },
    { sent: 'path=/api,user=alice', rule: '10/second' },
  ]);
  t.same(
    decide({ path: '/api/x', peer, headers: { 'x-user': 'admin' } })[1],
    { sent: 'path=/api,user=admin', rule: 'unlimited' },
    'the same entry serves user=admin: the service picks the exact value',
  );
  t.same(decide({ path: '/', peer, headers: { 'x-tenant': 'free-a' } })[1], {
    sent: 'tenant=free-a',
    rule: '100/hour',
  });
  t.same(
    decide({ path: '/', peer, headers: { 'x-tenant': 'acme' } })[1],
    { sent: 'tenant=acme', rule: 'none' },
    'a tenant outside the wildcard: sent, matches nothing',
  );
  t.same(decide({ path: '/', peer, headers: { 'user-agent': 'BadBot/2', 'x-canary': '1' } }).slice(1), [
    { sent: 'client=banned', rule: '0/second' },
    { sent: 'client=canary', rule: '2/minute shadow' },
  ]);
  t.same(
    decide({ path: '/', peer, headers: { 'user-agent': 'curl/8' } }).length,
    1,
    'no BadBot, no x-canary: only the address descriptor',
  );
});

t.test('envoy: for examples/config, the actions of examples/envoy/envoy.yaml', async (t) => {
  const r = await runInProcess(['envoy', '--config', CONFIG, '--domain', 'example', ...MAPPING]);
  t.equal(r.code, 0, r.stderr);
  const decoded = decodeEntries(r.stdout);
  t.same(decoded.errors, []);
  const generated = decoded.values.map((e) => JSON.stringify(e.actions));
  const boot = protos.decode(
    BOOTSTRAP,
    parse(readFileSync(join(REPO_ROOT, 'examples/envoy/envoy.yaml'), 'utf8')),
  );
  t.same(boot.errors, []);
  const vh = new RateLimitFilterEmulation(boot.value, 'ingress').hcm.route_config.virtual_hosts[0];
  const handWritten = [
    ...vh.rate_limits,
    ...vh.routes.flatMap((route: Json) => route.route?.rate_limits ?? []),
  ].map((e: Json) => JSON.stringify(e.actions));
  t.same(
    new Set(generated),
    new Set(handWritten),
    'the same action lists (the per-tenant limit override aside)',
  );
});

t.test('envoy: the config as positional paths, as its usage shows, prints what --config does', async (t) => {
  const positional = await runInProcess(['envoy', CONFIG, '--domain', 'example', ...MAPPING]);
  t.equal(positional.code, 0, positional.stderr);
  const flag = await runInProcess(['envoy', '--config', CONFIG, '--domain', 'example', ...MAPPING]);
  t.equal(positional.stdout, flag.stdout);
});

t.test('envoy: keys without a source are listed, exit 1, nothing printed', async (t) => {
  const r = await runInProcess(['envoy', '--config', CONFIG, '--header', 'user=x-user']);
  t.equal(r.code, 1);
  t.equal(r.stdout, '');
  t.match(r.stderr, /no action for the key\(s\) path, tenant, client:/);
  t.match(r.stderr, /client=banned: no source given/);
  t.notMatch(r.stderr, /key\(s\)[^\n]*user/, 'user is mapped');
  // a constant needs a fixed value
  const wild = await runInProcess(['envoy', '--config', CONFIG, ...MAPPING, '--generic-key', 'tenant']);
  t.equal(wild.code, 0, 'a --header mapping wins over --generic-key');
  const noHeader = MAPPING.filter((a) => a !== 'tenant=x-tenant');
  noHeader.splice(noHeader.indexOf('--header', 3), 1);
  const constTenant = await runInProcess([
    'envoy',
    '--config',
    CONFIG,
    ...noHeader,
    '--generic-key',
    'tenant',
  ]);
  t.equal(constTenant.code, 1);
  t.match(
    constTenant.stderr,
    /tenant=free-\*: a constant \(generic_key\) cannot stand for the wildcard free-\*/,
  );
  // one header for both client values: one entry, Envoy sends the header's value
  const oneHeader = await runInProcess([
    'envoy',
    '--config',
    CONFIG,
    '--generic-key',
    'path',
    '--header',
    'user=x-user',
    '--header',
    'tenant=x-tenant',
    '--header',
    'client=x-client',
  ]);
  t.equal(oneHeader.code, 0, oneHeader.stderr);
  t.match(oneHeader.stdout, /# client=banned, client=canary\n\s+- actions:\n\s+- request_headers:/);
  const bad = await runInProcess(['envoy', '--config', CONFIG, '--match', 'client=banned']);
  t.equal(bad.code, 2);
  t.match(bad.stderr, /--match client=banned: expected KEY=VALUE:HEADER/);
});
