// The bounds of the named-limit outputs, on a fake clock: the over-limit log's lines per second,
// sampling, redaction and value cut; the per-name statistic's series bound; header name quoting.
import t from 'tap';
import type { LimitSpec } from '../config/index.js';
import { StatsStore } from '../stats/index.js';
import { DEFAULT_MAPPING_YAML } from '../stats/prometheus/default-mapping.js';
import { MetricMapper } from '../stats/prometheus/mapper.js';
import { ietfHeaders, OverLimitLog, REDACTED, sfString, type NamedDecision } from './named-limits.js';

const spec = (name: string): LimitSpec => ({
  algorithm: 'fixed_window',
  requestsPerUnit: 5,
  unit: 'MINUTE',
  unitSeconds: 60,
  burst: 0,
  name,
});
const status = { code: 'OVER_LIMIT' as const, limitRemaining: 0, durationUntilReset: { seconds: 7 } };
const desc = {
  entries: [
    { key: 'user', value: 'alice' },
    { key: 'path', value: 'x'.repeat(300) },
  ],
};

t.test('the over-limit log writes at most maxPerSecond lines a second', async (t) => {
  let now = 1_000_000;
  const lines: string[] = [];
  const log = new OverLimitLog({
    sampleRate: 1,
    maxPerSecond: 3,
    redactKeys: ['user'],
    maxValueBytes: 16,
    info: (m) => lines.push(m),
    now: () => now,
  });
  for (let i = 0; i < 100; i++) log.record('d', desc, spec('d.user'), status);
  t.equal(lines.length, 3, 'a burst of 100 decisions gives maxPerSecond lines');
  t.equal(log.dropped, 97);
  now += 1000;
  for (let i = 0; i < 100; i++) log.record('d', desc, spec('d.user'), status);
  t.equal(lines.length, 6, 'a second later, maxPerSecond more');
  t.match(lines[5], 'lines_dropped=97');
  t.equal(log.dropped, 194);
  t.match(lines[0], `descriptor="user=${REDACTED},path=${'x'.repeat(16)}..."`);
  t.notMatch(lines[0], 'alice');
  t.match(lines[0], 'limit="d.user" domain="d"');
});

t.test('the over-limit log samples before it spends a line', async (t) => {
  const lines: string[] = [];
  let r = 0;
  const log = new OverLimitLog({
    sampleRate: 0.25,
    maxPerSecond: 1000,
    redactKeys: [],
    maxValueBytes: 1000,
    info: (m) => lines.push(m),
    now: () => 0,
    random: () => (r++ % 4) / 4,
  });
  for (let i = 0; i < 40; i++) log.record('d', desc, spec('n'), status);
  t.equal(lines.length, 10, 'one in four decisions is logged');
});

t.test('the per-name over_limit statistic is bounded in series', async (t) => {
  const stats = new StatsStore({ maxNamedLimits: 2 });
  stats.namedLimitOverLimit('a')!.inc();
  stats.namedLimitOverLimit('b')!.inc(2);
  stats.namedLimitOverLimit('c')!.inc(3);
  stats.namedLimitOverLimit('d')!.inc(4);
  stats.namedLimitOverLimit('a')!.inc();
  const snap = stats.snapshot();
  t.equal(snap['ratelimit.service.named_limit.a.over_limit'], 2);
  t.equal(snap['ratelimit.service.named_limit.b.over_limit'], 2);
  t.equal(
    snap['ratelimit.service.named_limit_unlisted.over_limit'],
    7,
    'names past the bound share one series',
  );
  t.equal(Object.keys(snap).filter((k) => k.includes('named_limit')).length, 3);
  t.equal(new StatsStore({ maxNamedLimits: 0 }).namedLimitOverLimit('a'), undefined, '0 turns it off');
  t.equal(
    new StatsStore().namedLimitOverLimit('d.k=a\nb:c|d')!.name,
    'ratelimit.service.named_limit.d.k=a_b_c_d.over_limit',
    'no line break or StatsD separator reaches the name',
  );
});

t.test('a limit name is written as a structured-field string', async (t) => {
  t.equal(sfString(spec('d.k=v.x')), '"d.k=v.x"');
  t.equal(sfString(spec('a"b\\c')), '"a\\"b\\\\c"');
  t.equal(sfString(spec('café 100%')), '"caf%C3%A9 100%25"');
  t.equal(sfString(spec('line\nbreak')), '"line%0Abreak"');
});

t.test('the per-name statistic maps to one Prometheus counter labelled by the name', async (t) => {
  const m = new MetricMapper(DEFAULT_MAPPING_YAML);
  t.match(m.map('ratelimit.service.named_limit.shop.path=/api.user[1].over_limit', 'counter'), {
    name: 'ratelimit_service_named_limit_over_limit',
    labels: { name: 'shop.path=/api.user[1]' },
  });
  t.match(m.map('ratelimit.service.named_limit.acme-tenant.over_limit', 'counter'), {
    name: 'ratelimit_service_named_limit_over_limit',
    labels: { name: 'acme-tenant' },
  });
});

t.test('the IETF headers list the rejecting limit first, the others in request order', async (t) => {
  const d = (i: number, name: string, r: number): NamedDecision => ({
    index: i,
    spec: spec(name),
    status: { code: r === 0 ? 'OVER_LIMIT' : 'OK', limitRemaining: r, durationUntilReset: { seconds: 9 } },
  });
  const list = [d(0, 'a', 3), d(1, 'b', 0), d(2, 'c', 1)];
  t.same(ietfHeaders(list, 1), [
    { key: 'RateLimit-Policy', value: '"b";q=5;w=60, "a";q=5;w=60, "c";q=5;w=60' },
    { key: 'RateLimit', value: '"b";r=0;t=9, "a";r=3;t=9, "c";r=1;t=9' },
  ]);
  t.same(ietfHeaders(list, -1)[1], { key: 'RateLimit', value: '"a";r=3;t=9, "b";r=0;t=9, "c";r=1;t=9' });
});

t.test('RateLimit-Policy says qu for a limit whose quota_unit is not requests', async (t) => {
  const d = (name: string, quotaUnit?: LimitSpec['quotaUnit']): NamedDecision => ({
    index: 0,
    spec: { ...spec(name), ...(quotaUnit === undefined ? {} : { quotaUnit }) },
    status: { code: 'OK', limitRemaining: 2, durationUntilReset: { seconds: 9 } },
  });
  t.same(ietfHeaders([d('llm.user[0]', 'tokens'), d('up', 'content-bytes'), d('plain')], -1), [
    {
      key: 'RateLimit-Policy',
      value: '"llm.user[0]";q=5;qu="tokens";w=60, "up";q=5;qu="content-bytes";w=60, "plain";q=5;w=60',
    },
    { key: 'RateLimit', value: '"llm.user[0]";r=2;t=9, "up";r=2;t=9, "plain";r=2;t=9' },
  ]);
});

t.test(
  'RateLimit t: the verdict’s ms until more, rounded up; none when waiting brings nothing',
  async (t) => {
    const d = (algorithm: LimitSpec['algorithm'], r: number, moreMs?: number): NamedDecision => ({
      index: 0,
      spec: { ...spec('n'), algorithm },
      status: { code: 'OK', limitRemaining: r, durationUntilReset: { seconds: 40 } },
      ...(moreMs === undefined ? {} : { moreMs }),
    });
    const state = (x: NamedDecision) => ietfHeaders([x], -1)[1]!.value;
    t.equal(state(d('token_bucket', 2, 12_001)), '"n";r=2;t=13', 'a bucket: its next hit');
    t.equal(state(d('sliding_window', 2, 999)), '"n";r=2;t=1');
    t.equal(state(d('sliding_window', 5, 0)), '"n";r=5', 'nothing charged: no t');
    t.equal(state(d('fixed_window', 3)), '"n";r=3;t=40', 'a reference fixed window with hits: its end');
    t.equal(state(d('fixed_window', 5)), '"n";r=5', 'a reference fixed window with none: no t');
    t.equal(state(d('token_bucket', 1)), '"n";r=1;t=40', 'no verdict (a failure mode): the reset');
  },
);
