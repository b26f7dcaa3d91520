// The new algorithms through the whole service (real gRPC, memory backend): response headers with the
// algorithm's remaining and reset, shadow mode, quota mode, hits_addend, statistics; and a backend
// that cannot count them exactly (memcache) refusing the configuration at load.
import t from 'tap';
import { loadConfig } from './config/index.js';
import { RateLimitApp } from './app.js';
import { createLogger } from '../common/index.js';
import { loadSettings } from './settings/index.js';
import { descriptor, startTestApp } from './test-support.js';

const CONFIG = `
domain: d
descriptors:
  - key: tb
    rate_limit: { unit: hour, requests_per_unit: 10, algorithm: token_bucket, burst: 3 }
  - key: sw
    shadow_mode: true
    rate_limit: { unit: hour, requests_per_unit: 1, algorithm: sliding_window }
  - key: q1
    quota_mode: true
    rate_limit: { unit: hour, requests_per_unit: 1, algorithm: sliding_window }
  - key: q2
    quota_mode: true
    rate_limits:
      - { unit: hour, requests_per_unit: 5, algorithm: token_bucket }
      - { unit: day, requests_per_unit: 5 }
`;

const header = (res: { responseHeadersToAdd?: { key: string; value: string }[] }, name: string) =>
  Number(res.responseHeadersToAdd?.find((h) => h.key === name)?.value);

t.test(
  'token bucket: remaining counts down from burst, reset is the time until the bucket is full',
  async (t) => {
    const s = await startTestApp({
      files: { 'c.yaml': CONFIG },
      env: { LIMIT_RESPONSE_HEADERS_ENABLED: 'true' },
    });
    t.teardown(() => s.close());
    const call = (hitsAddend?: number) =>
      s.call({ domain: 'd', descriptors: [descriptor(['tb', 'a'])], ...(hitsAddend ? { hitsAddend } : {}) });
    for (const [i, remaining] of [2, 1, 0].entries()) {
      const r = await call();
      t.equal(r.overallCode, 'OK');
      t.equal(r.statuses[0]!.limitRemaining ?? 0, remaining);
      t.equal(header(r, 'RateLimit-Remaining'), remaining, 'the header shows the same remaining');
      t.equal(header(r, 'RateLimit-Limit'), 10);
      // T = 360 s per hit; a little real time passes between calls.
      const reset = header(r, 'RateLimit-Reset');
      t.ok(reset <= 360 * (i + 1) && reset > 360 * (i + 1) - 30, `reset ${reset} s ~ ${360 * (i + 1)} s`);
    }
    const over = await call();
    t.equal(over.overallCode, 'OVER_LIMIT');
    t.equal(over.statuses[0]!.limitRemaining ?? 0, 0);
    t.equal(header(over, 'RateLimit-Remaining'), 0);

    const big = await s.call({ domain: 'd', descriptors: [descriptor(['tb', 'b'])], hitsAddend: 3 });
    t.equal(big.statuses[0]!.limitRemaining ?? 0, 0, 'hits_addend 3 takes the whole burst');
    const more = await s.call({ domain: 'd', descriptors: [descriptor(['tb', 'b'])] });
    t.equal(more.overallCode, 'OVER_LIMIT');
    const tooBig = await s.call({ domain: 'd', descriptors: [descriptor(['tb', 'c'])], hitsAddend: 4 });
    t.equal(tooBig.overallCode, 'OVER_LIMIT', 'more hits than the burst never fit');

    const rs = s.app.stats.ruleStats('d.tb');
    t.equal(rs.totalHits.value, 3 + 1 + 3 + 1 + 4);
    t.equal(rs.withinLimit.value, 3 + 3);
    t.equal(rs.overLimit.value, 1 + 1 + 4, 'a rejected hit is over_limit as a whole');
    t.ok(rs.nearLimit.value >= 2, `near_limit counted (${rs.nearLimit.value})`);
  },
);

t.test('shadow mode and quota mode work as for fixed windows', async (t) => {
  const s = await startTestApp({ files: { 'c.yaml': CONFIG } });
  t.teardown(() => s.close());
  t.equal((await s.call({ domain: 'd', descriptors: [descriptor(['sw', 'x'])] })).overallCode, 'OK');
  const shadowed = await s.call({ domain: 'd', descriptors: [descriptor(['sw', 'x'])] });
  t.equal(shadowed.overallCode, 'OK', 'over limit, answered OK in shadow mode');
  t.equal(shadowed.statuses[0]!.code, 'OK');
  t.equal(s.app.stats.ruleStats('d.sw').shadowMode.value, 1);
  t.equal(s.app.stats.ruleStats('d.sw').overLimit.value, 1);

  const both = () => s.call({ domain: 'd', descriptors: [descriptor(['q1', 'u']), descriptor(['q2', 'u'])] });
  t.equal((await both()).overallCode, 'OK');
  const one = await both();
  t.equal(one.statuses[0]!.code, 'OVER_LIMIT', 'q1 exhausted');
  t.equal(one.overallCode, 'OK', 'quota mode: not all quotas exhausted');
  for (let i = 0; i < 3; i++) await both();
  const all = await both();
  t.equal(all.statuses[1]!.code, 'OVER_LIMIT', 'q2 (several limits) exhausted too');
  t.equal(all.overallCode, 'OVER_LIMIT', 'every quota exhausted');
});

t.test(
  'memcache refuses a configuration it cannot count exactly; the last good one keeps serving',
  async (t) => {
    const settings = loadSettings({
      BACKEND_TYPE: 'memcache',
      MEMCACHE_HOST_PORT: '127.0.0.1:1',
      USE_STATSD: 'false',
      LOG_LEVEL: 'fatal',
    });
    const app = new RateLimitApp({ settings, logger: createLogger({ level: 'fatal', format: 'text' }) });
    t.teardown(() => app.store.close());
    const fixed = loadConfig([
      { name: 'f', yaml: 'domain: f\ndescriptors:\n  - key: k\n    rate_limit: {unit: second}\n' },
    ]);
    app.setConfig(fixed);
    t.throws(() => app.setConfig(loadConfig([{ name: 'c.yaml', yaml: CONFIG }])), {
      name: 'ConfigError',
      field: 'rate_limits',
      message: /BACKEND_TYPE=memcache cannot count rate_limits, sliding_window, token_bucket exactly/,
    });
    app.applyConfig({ config: loadConfig([{ name: 'c.yaml', yaml: CONFIG }]), sources: ['c.yaml'] });
    t.equal(app.stats.service.configLoadError.value, 1, 'counted as a config load error');
    t.same(app.service.getConfig()?.domains, ['f'], 'the last good configuration keeps serving');
  },
);
