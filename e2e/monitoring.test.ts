// The shipped dashboard and alerts query metrics that exist: every metric name in the PromQL of
// charts/ratelimit/files/monitoring/ (dashboard panels, its variables, the alert rules) must appear on the
// /metrics of running processes: the built ratelimit service (Prometheus on, counting in a real Redis
// that is then stopped, so errors, the circuit breaker and failure modes show up too), the standalone
// control plane and the operator (against a test API server). A misspelt or renamed metric fails here,
// not silently on a dashboard. Every HELP line says what its metric is.
import t from 'tap';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { builtBin, ensureBuilt, REPO_ROOT } from '../harness/dist.js';
import { startKube } from '../harness/kube.js';
import { startOperatorProcess } from '../harness/operator.js';
import { freePorts, makeTempDir, ServerProcess, waitForPort } from '../harness/net.js';
import { runCommand } from '../harness/proc.js';
import { startRedis } from '../harness/redis/index.js';
import { installCrd, waitFor } from '../operator/testing.js';

const MONITORING = join(REPO_ROOT, 'charts/ratelimit/files/monitoring');

/** Every PromQL expression of the dashboard: panel targets (rows included) and query variables. */
function dashboardExprs(): string[] {
  const dash = JSON.parse(readFileSync(join(MONITORING, 'grafana-dashboard.json'), 'utf8'));
  const out: string[] = [];
  const walk = (panels: any[]) => {
    for (const p of panels ?? []) {
      for (const target of p.targets ?? []) if (target.expr) out.push(target.expr);
      walk(p.panels);
    }
  };
  walk(dash.panels);
  for (const v of dash.templating?.list ?? []) if (v.type === 'query') out.push(v.query?.query ?? v.query);
  return out;
}

/** Every alert expression of the rule files (lists of rule groups). */
function ruleExprs(): string[] {
  const out: string[] = [];
  for (const file of ['rules-ratelimit.yaml', 'rules-xds.yaml']) {
    for (const group of parse(readFileSync(join(MONITORING, file), 'utf8')))
      for (const rule of group.rules) out.push(rule.expr);
  }
  return out;
}

const KEYWORDS = new Set([
  'and',
  'or',
  'unless',
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'bool',
  'offset',
  'inf',
  'nan',
]);

/**
 * Metric names in a PromQL expression: identifiers left once strings, label matchers, ranges, grouping
 * label lists and Grafana variables are taken out, that are not a function call or a keyword.
 */
export function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/label_values\(([^,)]*),[^)]*\)/g, '$1') // Grafana: label_values(metric, label)
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ')
    .replace(/\$\{?\w+\}?/g, ' ');
  const names = new Set<string>();
  for (const m of bare.matchAll(/(?<![\w.])[a-zA-Z_:][a-zA-Z0-9_:]*/g)) {
    const rest = bare.slice(m.index + m[0].length);
    if (/^\s*\(/.test(rest) || KEYWORDS.has(m[0].toLowerCase())) continue;
    names.add(m[0]);
  }
  return [...names];
}

/** Metric names on an exposition page: HELP and TYPE lines (prom-client prints them before any sample) and samples. */
function exposed(text: string): Set<string> {
  const names = new Set<string>();
  for (const line of text.split('\n')) {
    const meta = /^# (?:HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*)/.exec(line);
    if (meta) names.add(meta[1]);
    else if (line && !line.startsWith('#')) names.add(/^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(line)?.[0] ?? '');
  }
  return names;
}

const missingFrom = (names: Iterable<string>, seen: Set<string>) =>
  [...names].filter((n) => !seen.has(n) && !seen.has(n.replace(/_(bucket|sum|count)$/, '')));

t.test('metricNames: what the expressions are parsed into', async (t) => {
  t.same(
    metricNames(
      'histogram_quantile(0.99, sum by (le) (rate(a_seconds_bucket{namespace=~"$namespace"}[$__rate_interval])))',
    ),
    ['a_seconds_bucket'],
  );
  t.same(
    metricNames(
      'x unless on (stream, version_acked) label_replace(x, "version_acked", "$1", "version_sent", "(.*)") or y > 0',
    ),
    ['x', 'y'],
  );
  t.same(metricNames('label_values(m{namespace=~"$namespace"}, domain)'), ['m']);
  t.same(metricNames('absent(ratelimit_operator_leader) and max by (namespace) (z) == 2'), [
    'ratelimit_operator_leader',
    'z',
  ]);
});

t.test('every metric the dashboard and the alerts query is exposed by a running stack', async (t) => {
  ensureBuilt();
  const exprs = [...dashboardExprs(), ...ruleExprs()];
  const wanted = new Set(exprs.flatMap(metricNames));
  t.ok(wanted.size >= 25, `${wanted.size} metric names in ${exprs.length} expressions`);

  const dir = makeTempDir('rl-monitoring');
  const redis = await startRedis();
  t.teardown(() => redis.stop());

  // The ratelimit service: config from files (so a broken file can be written), counters in Redis.
  const configDir = join(dir, 'runtime', 'config');
  mkdirSync(configDir, { recursive: true });
  writeFileSync(
    join(configDir, 'mon.yaml'),
    `domain: mon
descriptors:
  - key: k
    rate_limit: { unit: minute, requests_per_unit: 5 }
  - key: shadow
    shadow_mode: true
    rate_limit: { unit: minute, requests_per_unit: 1 }
  - key: open
    failure_mode: allow
    rate_limit: { unit: minute, requests_per_unit: 1000 }
`,
  );
  const [http, grpc, debug, prom, xds, cpMetrics] = await freePorts(6);
  const rl = new ServerProcess('ratelimit', process.execPath, [builtBin('ratelimit')], {
    logPath: join(dir, 'ratelimit.log'),
    cwd: REPO_ROOT,
    env: {
      ...process.env,
      HOST: '127.0.0.1',
      PORT: String(http),
      GRPC_HOST: '127.0.0.1',
      GRPC_PORT: String(grpc),
      DEBUG_HOST: '127.0.0.1',
      DEBUG_PORT: String(debug),
      USE_STATSD: 'false',
      USE_PROMETHEUS: 'true',
      PROMETHEUS_ADDR: `127.0.0.1:${prom}`,
      LOG_LEVEL: 'warn',
      RUNTIME_ROOT: join(dir, 'runtime'),
      RUNTIME_APPDIRECTORY: 'config',
      RUNTIME_WATCH_ROOT: 'false', // watch the config folder itself
      BACKEND_TYPE: 'redis',
      REDIS_SOCKET_TYPE: 'tcp',
      REDIS_URL: redis.url,
      REDIS_TIMEOUT: '300ms',
      REDIS_CIRCUIT_BREAKER_FAILURES: '2',
      REDIS_CIRCUIT_BREAKER_PROBE_INTERVAL: '200ms',
    },
  });
  t.teardown(() => rl.stop());

  // The standalone control plane on a config folder, with its metrics listener.
  const cpDir = join(dir, 'cp');
  mkdirSync(cpDir);
  writeFileSync(join(cpDir, 'mon.yaml'), readFileSync(join(configDir, 'mon.yaml')));
  const cp = new ServerProcess(
    'control-plane',
    process.execPath,
    [
      builtBin('ratelimit-control-plane'),
      ...['--dir', cpDir, '--listen', `127.0.0.1:${xds}`, '--metrics-listen', `127.0.0.1:${cpMetrics}`],
    ],
    { logPath: join(dir, 'control-plane.log'), cwd: REPO_ROOT, env: process.env },
  );
  t.teardown(() => cp.stop());

  // The operator, against a test API server.
  const kube = await startKube();
  t.teardown(() => kube.stop());
  await installCrd(kube.kubeConfig);
  const op = await startOperatorProcess(kube, 'operator', ['--leader-elect=false']);
  t.teardown(() => op.proc.stop());

  for (const [name, port, proc] of [
    ['ratelimit', http, rl],
    ['control plane', cpMetrics, cp],
  ] as const) {
    await waitForPort(port, {
      deadlineMs: 60_000,
      what: `${name} on ${port}`,
      context: () => proc.logTail(30),
      abort: () => proc.exitReason(),
    });
  }

  const decide = async (key: string, value: string) => {
    try {
      const res = await fetch(`http://127.0.0.1:${http}/json`, {
        method: 'POST',
        body: JSON.stringify({ domain: 'mon', descriptors: [{ entries: [{ key, value }] }] }),
      });
      return res.status;
    } catch {
      return 0;
    }
  };
  // Within, near and over the limit of `k`; over the limit of the shadow-mode rule.
  const codes: number[] = [];
  for (let i = 0; i < 7; i++) codes.push(await decide('k', 'x'));
  for (let i = 0; i < 3; i++) await decide('shadow', 'x');
  t.same(codes, [200, 200, 200, 200, 200, 429, 429], 'OK, then OVER_LIMIT (HTTP 429)');
  // The request count and response time are of gRPC ShouldRateLimit: one call with the shipped client.
  const client = await runCommand(process.execPath, [
    builtBin('ratelimit-client'),
    ...['-dial_string', `127.0.0.1:${grpc}`, '-domain', 'mon', '-descriptors', 'k=z'],
  ]);
  t.equal(client.code, 0, `ratelimit-client: ${client.stdout}${client.stderr}`);

  // A config the service rejects (it keeps the last good one), then Redis goes away.
  writeFileSync(
    join(configDir, 'broken.yaml'),
    'domain: broken\ndescriptors:\n  - key: k\n    rate_limit: { unit: fortnight, requests_per_unit: 1 }\n',
  );
  await redis.stop();

  const targets = {
    ratelimit: `http://127.0.0.1:${prom}/metrics`,
    'control plane': `http://127.0.0.1:${cpMetrics}/metrics`,
    operator: `http://127.0.0.1:${op.metrics}/metrics`,
  };
  const pages: Record<string, string> = {};
  let missing: string[] = [...wanted];
  // Decisions while Redis is down (redis errors, an open circuit, failure modes), scrapes, until every
  // name has appeared or the deadline passes.
  await waitFor(
    'every queried metric on some /metrics',
    async () => {
      await decide('k', 'y');
      await decide('open', 'y');
      const seen = new Set<string>();
      for (const [name, url] of Object.entries(targets)) {
        pages[name] = await (await fetch(url)).text();
        for (const n of exposed(pages[name])) seen.add(n);
      }
      missing = missingFrom(wanted, seen);
      if (missing.length === 0) return true;
      // A misspelt name never appears: wait for the deadline, then report it below.
      return false;
    },
    60_000,
    250,
  ).catch(() => undefined);
  t.same(missing, [], 'every metric name in the dashboard and the alert rules is exposed');

  const seen = new Set(Object.values(pages).flatMap((p) => [...exposed(p)]));
  t.same(
    missingFrom(['ratelimit_service_total_request', 'ratelimit_operator_xds_nack_total'], seen),
    ['ratelimit_service_total_request', 'ratelimit_operator_xds_nack_total'],
    'a misspelt name is reported missing',
  );
  for (const [name, page] of Object.entries(pages)) {
    const helps = page.split('\n').filter((l) => l.startsWith('# HELP '));
    t.ok(helps.length > 0, `${name}: ${helps.length} HELP lines`);
    t.same(
      helps.filter((l) => /autogenerated/i.test(l) || /^# HELP \S+\s*$/.test(l)),
      [],
      `${name}: every HELP line describes its metric`,
    );
  }
});
