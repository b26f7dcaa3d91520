// Prometheus output: the statsd_exporter-style mapping on its own, then a scrape of /metrics from
// the running service after known traffic, with the built-in mapping and with PROMETHEUS_MAPPER_YAML.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { descriptor, startTestApp, roomInWindow } from '../../test-support.js';
import { DEFAULT_MAPPING_YAML } from './default-mapping.js';
import { escapeMetricName, MappingError, MetricMapper } from './mapper.js';

// Counting tests must not straddle a minute boundary (see roomInWindow).
t.beforeEach(() => roomInWindow());

t.test('default mapping: names and labels of the reference', async (t) => {
  const m = new MetricMapper(DEFAULT_MAPPING_YAML);
  const rl = 'ratelimit.service.rate_limit';
  t.same(m.map(`${rl}.d.k_v.total_hits`, 'counter'), {
    name: 'ratelimit_service_rate_limit_total_hits',
    labels: { domain: 'd', key1: 'k_v' },
    mapping: m.mappings[2],
    drop: false,
  });
  t.match(m.map(`${rl}.d.a_1.b_2.over_limit`, 'counter'), {
    name: 'ratelimit_service_rate_limit_over_limit',
    labels: { domain: 'd', key1: 'a_1', key2: 'b_2' },
  });
  t.match(m.map(`${rl}.d.a.b.c.near_limit`, 'counter'), {
    name: 'ratelimit_service_rate_limit_near_limit',
    labels: { domain: 'd', key1: 'a', key2: 'b' },
  });
  for (const stat of ['within_limit', 'shadow_mode'])
    t.equal(m.map(`${rl}.d.k.${stat}`, 'counter').name, `ratelimit_service_rate_limit_${stat}`);
  t.match(m.map('ratelimit.service.call.should_rate_limit.redis_error', 'counter'), {
    name: 'ratelimit_service_should_rate_limit_error',
    labels: { err_type: 'redis_error' },
  });
  t.match(m.map('ratelimit_server.ShouldRateLimit.total_requests', 'counter'), {
    name: 'ratelimit_service_total_requests',
    labels: { grpc_method: 'ShouldRateLimit' },
  });
  const rt = m.map('ratelimit_server.ShouldRateLimit.response_time', 'observer');
  t.equal(rt.name, 'ratelimit_service_response_time_seconds');
  t.equal(rt.mapping?.timerType, 'histogram');
  t.equal(
    m.map('ratelimit.service.config_load_success', 'counter').name,
    'ratelimit_service_config_load_success',
  );
  t.equal(
    m.map('ratelimit.service.config_load_error', 'counter').name,
    'ratelimit_service_config_load_error',
  );
  // Not mapped: escaped names without labels, as statsd_exporter does.
  t.same(m.map('ratelimit.service.global_shadow_mode', 'counter'), {
    name: 'ratelimit_service_global_shadow_mode',
    labels: {},
    drop: false,
  });
  t.equal(
    m.map(`${rl}.d.a.b.over_limit_with_local_cache`, 'counter').name,
    'ratelimit_service_rate_limit_d_a_b_over_limit_with_local_cache',
    'the anchored regex does not count it as over_limit',
  );
  t.equal(escapeMetricName('9a-b.c'), '_9a_b_c');
});

t.test('mapping file: globs before regexes, match_metric_type, drop, named groups, errors', async (t) => {
  const m = new MetricMapper(`
defaults: { timer_type: histogram, buckets: [1, 2] }
mappings:
  - match: 'xx\\.(?P<what>\\w+)'
    match_type: regex
    name: "regex_\${what}"
  - match: "xx.*"
    name: "glob_$1"
    labels: { kind: "$1" }
  - match: "yy.*"
    match_metric_type: observer
    name: "timer_only"
  - match: "zz.*"
    action: drop
`);
  t.match(
    m.map('xx.ab', 'counter'),
    { name: 'glob_ab', labels: { kind: 'ab' } },
    'a glob wins over an earlier regex',
  );
  t.match(m.map('xx.ab.cd', 'counter'), { name: 'regex_ab' }, 'regexes are not anchored');
  t.equal(m.map('yy.tt', 'counter').name, 'yy_tt', 'wrong metric type: not this rule');
  t.match(m.map('yy.tt', 'observer'), {
    name: 'timer_only',
    mapping: { timerType: 'histogram', buckets: [1, 2] },
  });
  t.equal(m.map('zz.qq', 'counter').drop, true);
  t.throws(
    () => new MetricMapper('mappings: [{ match: "a.b" }]'),
    /invalid match|metric name/,
    'one-letter parts',
  );
  t.throws(() => new MetricMapper('mappings: [{ match: "aa.bb" }]'), MappingError, 'no name');
  t.throws(() => new MetricMapper('mappings: [{ match: "aa..bb", name: nn }]'), /invalid match/);
  t.throws(
    () => new MetricMapper('mappings: [{ match: "aa.bb", name: "nn", labels: { "1x": v } }]'),
    /label/,
  );
});

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

function parseExposition(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const p of (m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[p[1]] = p[2];
    out.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return out;
}

function value(samples: Sample[], name: string, labels: Record<string, string> = {}): number | undefined {
  const want = Object.entries(labels);
  return samples.find(
    (s) =>
      s.name === name &&
      Object.keys(s.labels).length === want.length &&
      want.every(([k, v]) => s.labels[k] === v),
  )?.value;
}

const CONFIG = `
domain: d
descriptors:
  - key: k
    rate_limit: { unit: minute, requests_per_unit: 2 }
  - key: a
    descriptors:
      - key: b
        rate_limit: { unit: minute, requests_per_unit: 10 }
  - key: s
    shadow_mode: true
    rate_limit: { unit: minute, requests_per_unit: 0 }
`;

t.test('a scrape of /metrics after known traffic: names, labels, values, types', async (t) => {
  const svc = await startTestApp({
    files: { 'd.yaml': CONFIG },
    env: { USE_PROMETHEUS: 'true', PROMETHEUS_ADDR: '127.0.0.1:0', PROMETHEUS_PATH: '/metrics' },
  });
  t.teardown(() => svc.close());
  for (let i = 0; i < 3; i++) await svc.call({ domain: 'd', descriptors: [descriptor(['k', 'x'])] });
  await svc.call({ domain: 'd', descriptors: [descriptor(['a', '1'], ['b', '2'])] });
  await svc.call({ domain: 'd', descriptors: [descriptor(['s', 'q'])] });
  await svc.call({ domain: '', descriptors: [descriptor(['k', 'x'])] }).catch(() => undefined);

  const port = svc.app.statsPipeline.prometheus!.port;
  const res = await fetch(`http://127.0.0.1:${port}/metrics`);
  t.equal(res.status, 200);
  t.match(res.headers.get('content-type'), /text\/plain/);
  const text = await res.text();
  const s = parseExposition(text);
  const d = { domain: 'd', key1: 'k' };
  t.equal(value(s, 'ratelimit_service_rate_limit_total_hits', d), 3);
  t.equal(value(s, 'ratelimit_service_rate_limit_within_limit', d), 2);
  t.equal(value(s, 'ratelimit_service_rate_limit_over_limit', d), 1);
  t.equal(value(s, 'ratelimit_service_rate_limit_near_limit', d), 1);
  t.equal(value(s, 'ratelimit_service_rate_limit_total_hits', { domain: 'd', key1: 'a', key2: 'b' }), 1);
  t.equal(value(s, 'ratelimit_service_rate_limit_shadow_mode', { domain: 'd', key1: 's' }), 1);
  t.match(text, /# TYPE ratelimit_service_rate_limit_total_hits counter/);
  // Every HELP line says what the metric is: the default mapping's rules each carry a description.
  const helps = text.split('\n').filter((l) => l.startsWith('# HELP ratelimit_'));
  t.ok(helps.length >= 9, `${helps.length} ratelimit_ HELP lines`);
  t.same(
    text.split('\n').filter((l) => l.startsWith('# HELP') && /autogenerated/i.test(l)),
    [],
    'no HELP text says autogenerated',
  );
  t.match(text, /# HELP ratelimit_service_rate_limit_over_limit Hits over a rule limit .*by domain/);
  t.match(text, /# HELP ratelimit_service_response_time_seconds Time to answer a gRPC rate limit call/);
  t.equal(value(s, 'ratelimit_service_should_rate_limit_error', { err_type: 'service_error' }), 1);
  t.equal(value(s, 'ratelimit_service_total_requests', { grpc_method: 'ShouldRateLimit' }), 6);
  t.equal(value(s, 'ratelimit_service_config_load_success'), 1);
  t.match(text, /# TYPE ratelimit_service_response_time_seconds histogram/);
  t.equal(value(s, 'ratelimit_service_response_time_seconds_count', { grpc_method: 'ShouldRateLimit' }), 6);
  t.equal(
    value(s, 'ratelimit_service_response_time_seconds_bucket', {
      grpc_method: 'ShouldRateLimit',
      le: '+Inf',
    }),
    6,
  );
  t.ok(
    value(s, 'ratelimit_service_response_time_seconds_sum', { grpc_method: 'ShouldRateLimit' })! < 6,
    'seconds',
  );
  t.ok(
    s.some((x) => x.name === 'process_cpu_user_seconds_total'),
    'process metrics too',
  );
  t.equal((await fetch(`http://127.0.0.1:${port}/other`)).status, 404);

  // Counters keep growing across scrapes.
  await svc.call({ domain: 'd', descriptors: [descriptor(['k', 'x'])] });
  const again = parseExposition(await (await fetch(`http://127.0.0.1:${port}/metrics`)).text());
  t.equal(value(again, 'ratelimit_service_rate_limit_total_hits', d), 4);
});

t.test('PROMETHEUS_MAPPER_YAML replaces the mapping; EXTRA_TAGS become labels', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'rl-prom-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'mapper.yaml');
  writeFileSync(
    file,
    `mappings:
  - match: "ratelimit.service.rate_limit.*.*.total_hits"
    name: "rl_hits"
    labels: { domain: "$1", descriptor: "$2" }
  - match: "ratelimit.service.rate_limit.*.*.*"
    action: drop
`,
  );
  const svc = await startTestApp({
    files: { 'd.yaml': CONFIG },
    env: {
      USE_PROMETHEUS: 'true',
      PROMETHEUS_ADDR: '127.0.0.1:0',
      PROMETHEUS_PATH: '/prom',
      PROMETHEUS_MAPPER_YAML: file,
      EXTRA_TAGS: 'zone:eu',
    },
  });
  t.teardown(() => svc.close());
  await svc.call({ domain: 'd', descriptors: [descriptor(['k', 'x'])] });
  const port = svc.app.statsPipeline.prometheus!.port;
  const s = parseExposition(await (await fetch(`http://127.0.0.1:${port}/prom`)).text());
  t.equal(value(s, 'rl_hits', { zone: 'eu', domain: 'd', descriptor: 'k' }), 1);
  t.notOk(
    s.some((x) => x.name.startsWith('ratelimit_service_rate_limit')),
    'dropped by the file',
  );
  t.equal(
    value(s, 'ratelimit_server_ShouldRateLimit_total_requests', { zone: 'eu' }),
    1,
    'unmapped: escaped',
  );
});

t.test('a sampled timer keeps the exact _count in the histogram', async (t) => {
  const { PrometheusSink } = await import('./prometheus-sink.js');
  const sink = new PrometheusSink({ addr: '127.0.0.1:0', path: '/metrics', defaultMetrics: false });
  sink.flushTimer('ratelimit_server.ShouldRateLimit.response_time', { samples: [1, 2, 3], count: 10 });
  const s = parseExposition(await sink.registry.metrics());
  const l = { grpc_method: 'ShouldRateLimit' };
  t.equal(value(s, 'ratelimit_service_response_time_seconds_count', l), 10);
  const sum = value(s, 'ratelimit_service_response_time_seconds_sum', l)!;
  t.ok(Math.abs(sum - 0.019) < 1e-12, '4x1 ms + 3x2 ms + 3x3 ms');
  t.equal(value(s, 'ratelimit_service_response_time_seconds_bucket', { ...l, le: '0.005' }), 10);
  t.equal(value(s, 'ratelimit_service_response_time_seconds_bucket', { ...l, le: '+Inf' }), 10);
  await sink.close();
});

t.test('PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS keeps the response time in milliseconds', async (t) => {
  const { PrometheusSink } = await import('./prometheus-sink.js');
  const l = { grpc_method: 'ShouldRateLimit' };
  const sumOf = async (opts: { responseTimeAsMilliseconds?: boolean; mappingYaml?: string }) => {
    const sink = new PrometheusSink({
      addr: '127.0.0.1:0',
      path: '/metrics',
      defaultMetrics: false,
      ...opts,
    });
    sink.flushTimer('ratelimit_server.ShouldRateLimit.response_time', { samples: [2, 3], count: 2 });
    const s = parseExposition(await sink.registry.metrics());
    await sink.close();
    return value(s, 'ratelimit_service_response_time_seconds_sum', l);
  };
  t.equal(await sumOf({ responseTimeAsMilliseconds: true }), 5, 'milliseconds, under the same name');
  t.equal(await sumOf({ responseTimeAsMilliseconds: false }), 0.005, 'seconds by default');
  const { DEFAULT_MAPPING_YAML } = await import('./default-mapping.js');
  t.equal(
    await sumOf({ responseTimeAsMilliseconds: true, mappingYaml: DEFAULT_MAPPING_YAML }),
    0.005,
    'a mapping of your own is not changed',
  );
});
