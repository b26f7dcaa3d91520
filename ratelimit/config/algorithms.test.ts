// The algorithm fields of the config model: rate_limit.algorithm / burst and the rate_limits list.
import t from 'tap';
import { checkDocument, ConfigError, loadConfig } from './index.js';

const validateDocument = (name: string, doc: unknown) => checkDocument(name, doc).errors;

function loadError(yaml: string): ConfigError {
  try {
    loadConfig([{ name: 'a.yaml', yaml }]);
  } catch (e) {
    if (e instanceof ConfigError) return e;
    throw e;
  }
  throw new Error('expected a ConfigError');
}

const get = (yaml: string, entries: [string, string][]) =>
  loadConfig([{ name: 'a.yaml', yaml }]).getLimit('d', {
    entries: entries.map(([key, value]) => ({ key, value })),
  });

t.test('the single form without algorithm is a fixed window counted the reference way', async (t) => {
  const m = get(
    'domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 5}\n',
    [['k', 'v']],
  );
  t.same(m?.rule.limits, [
    { algorithm: 'fixed_window', requestsPerUnit: 5, unit: 'MINUTE', unitSeconds: 60, burst: 0, name: 'd.k' },
  ]);
  t.equal(m?.rule.scripted, false);
  const c = loadConfig([
    { name: 'a', yaml: 'domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second}\n' },
  ]);
  t.equal(c.features.size, 0, 'no feature beyond the reference');
});

t.test('sliding_window and token_bucket (burst defaults to requests_per_unit)', async (t) => {
  const yaml = `domain: d
descriptors:
  - key: s
    rate_limit: {unit: minute, requests_per_unit: 60, algorithm: sliding_window}
  - key: b
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: token_bucket}
  - key: c
    rate_limit: {unit: Hour, requests_per_unit: 100, algorithm: token_bucket, burst: 7}
`;
  const s = get(yaml, [['s', 'x']])!.rule;
  t.same(s.limits[0], {
    algorithm: 'sliding_window',
    requestsPerUnit: 60,
    unit: 'MINUTE',
    unitSeconds: 60,
    burst: 0,
    name: 'd.s',
  });
  t.equal(s.scripted, true);
  t.equal(get(yaml, [['b', 'x']])!.rule.limits[0]!.burst, 10);
  t.same(get(yaml, [['c', 'x']])!.rule.limits[0], {
    algorithm: 'token_bucket',
    requestsPerUnit: 100,
    unit: 'HOUR',
    unitSeconds: 3600,
    burst: 7,
    name: 'd.c',
  });
  const config = loadConfig([{ name: 'a', yaml }]);
  t.same([...config.features].sort(), ['sliding_window', 'token_bucket']);
  t.match(
    config.dump(),
    /d\.s: unit=MINUTE requests_per_unit=60, shadow_mode: false, quota_mode: false, algorithm: sliding_window\n/,
  );
  t.match(
    config.dump(),
    /d\.c: unit=HOUR requests_per_unit=100, shadow_mode: false, quota_mode: false, algorithm: token_bucket, burst: 7\n/,
  );
});

t.test('rate_limits: several limits on one entry, each with its unit and algorithm', async (t) => {
  const yaml = `domain: d
descriptors:
  - key: k
    shadow_mode: true
    rate_limits:
      - {unit: second, requests_per_unit: 5, algorithm: token_bucket, burst: 10}
      - {unit: day, requests_per_unit: 1000}
`;
  const rule = get(yaml, [['k', 'v']])!.rule;
  t.equal(rule.limits.length, 2);
  t.same(
    rule.limits.map((l) => [l.algorithm, l.unit, l.requestsPerUnit, l.burst]),
    [
      ['token_bucket', 'SECOND', 5, 10],
      ['fixed_window', 'DAY', 1000, 0],
    ],
  );
  t.equal(rule.scripted, true, 'several limits are decided together by the script');
  t.equal(rule.shadowMode, true);
  t.equal(rule.requestsPerUnit, 5, 'the rule mirrors its first limit');
  t.same([...loadConfig([{ name: 'a', yaml }]).features].sort(), ['rate_limits', 'token_bucket']);
  t.equal(
    loadConfig([{ name: 'a', yaml }])
      .dump()
      .split('\n')
      .filter(Boolean).length,
    2,
    'one dump line per limit',
  );
});

t.test('errors name the field', async (t) => {
  const cases: [string, string, string][] = [
    [
      '    rate_limit: {unit: second, algorithm: leaky}',
      'descriptors[0].rate_limit.algorithm',
      "invalid rate limit algorithm 'leaky', must be one of: fixed_window, sliding_window, token_bucket",
    ],
    [
      '    rate_limit: {unit: second, algorithm: sliding_window, burst: 3}',
      'descriptors[0].rate_limit.burst',
      'burst is only valid with algorithm token_bucket',
    ],
    [
      '    rate_limit: {unit: second, burst: 3}',
      'descriptors[0].rate_limit.burst',
      'burst is only valid with algorithm token_bucket',
    ],
    [
      '    rate_limit: {unit: second, algorithm: token_bucket, burst: 0}',
      'descriptors[0].rate_limit.burst',
      "config error, 'burst' must be at least 1",
    ],
    // 634 × a year / 2 is within 10^10 s; 635 is not.
    [
      '    rate_limit: {unit: year, requests_per_unit: 2, algorithm: token_bucket, burst: 635}',
      'descriptors[0].rate_limit.burst',
      'token bucket refills too slowly: burst × unit / requests_per_unit must be at most 10000000000 seconds (about 317 years); lower burst or raise requests_per_unit',
    ],
    [
      '    rate_limits: [{unit: minute}, {unit: day, requests_per_unit: 1, algorithm: token_bucket, burst: 115741}]',
      'descriptors[0].rate_limits[1].burst',
      'token bucket refills too slowly: burst × unit / requests_per_unit must be at most 10000000000 seconds (about 317 years); lower burst or raise requests_per_unit',
    ],
    [
      '    rate_limit: {unlimited: true, algorithm: token_bucket}',
      'descriptors[0].rate_limit.algorithm',
      'should not specify algorithm when unlimited',
    ],
    [
      '    rate_limit: {unit: second}\n    rate_limits: [{unit: day}]',
      'descriptors[0].rate_limits',
      'rate_limit and rate_limits are exclusive',
    ],
    [
      '    rate_limits: []',
      'descriptors[0].rate_limits',
      "config error, 'rate_limits' must hold 1 to 8 limits",
    ],
    [
      `    rate_limits: [${Array.from({ length: 9 }, () => '{unit: day}').join(', ')}]`,
      'descriptors[0].rate_limits',
      "config error, 'rate_limits' must hold 1 to 8 limits",
    ],
    [
      '    rate_limits: [{requests_per_unit: 3}]',
      'descriptors[0].rate_limits[0].unit',
      "config error, 'unit' must not be empty",
    ],
    [
      '    rate_limits: [{unit: day, name: x}]',
      'descriptors[0].rate_limits[0].name',
      "config error, unknown key 'name'",
    ],
    [
      '    rate_limits: [{unit: day}, {unit: minute, algorithm: sliding_window}, {unit: DAY, algorithm: fixed_window}]',
      'descriptors[0].rate_limits[2]',
      'duplicate limit: two rate_limits with the same algorithm and unit (fixed_window day)',
    ],
    [
      '    rate_limits: [{unit: day, algorithm: fixed_window, burst: 2}]',
      'descriptors[0].rate_limits[0].burst',
      'burst is only valid with algorithm token_bucket',
    ],
  ];
  for (const [body, field, detail] of cases) {
    const e = loadError(`domain: d\ndescriptors:\n  - key: k\n${body}\n`);
    t.equal(e.field, field, body);
    t.equal(e.detail, detail, body);
  }
});

t.test('validateDocument reports every algorithm error of a document', async (t) => {
  const errors = validateDocument('r', {
    domain: 'd',
    descriptors: [
      { key: 'a', rate_limit: { unit: 'second', burst: 2 } },
      { key: 'b', rate_limits: [{ unit: 'day' }, { unit: 'day' }] },
    ],
  });
  t.same(
    errors.map((e) => e.field),
    ['descriptors[0].rate_limit.burst', 'descriptors[1].rate_limits[1]'],
  );
});

t.test('every rule and limit has a name: rate_limit.name, else its path in the config', async (t) => {
  const yaml = `domain: d
descriptors:
  - key: tenant
    value: acme
    rate_limit: {name: acme-tenant, unit: minute, requests_per_unit: 1}
  - key: path
    value: /api
    descriptors:
      - key: user
        rate_limits:
          - {unit: second, requests_per_unit: 10}
          - {unit: hour, requests_per_unit: 100, algorithm: sliding_window}
  - key: ip
    rate_limit: {unit: second, requests_per_unit: 3}
`;
  const acme = get(yaml, [['tenant', 'acme']])!.rule;
  t.equal(acme.ruleName, 'acme-tenant');
  t.same(
    acme.limits.map((l) => l.name),
    ['acme-tenant'],
  );
  const user = get(yaml, [
    ['path', '/api'],
    ['user', 'bob'],
  ])!.rule;
  t.equal(user.ruleName, 'd.path=/api.user');
  t.same(
    user.limits.map((l) => l.name),
    ['d.path=/api.user[0]', 'd.path=/api.user[1]'],
  );
  t.equal(get(yaml, [['ip', '10.0.0.1']])!.rule.ruleName, 'd.ip', 'a key-only entry names no value');
  const override = loadConfig([{ name: 'a', yaml }]).getLimit('d', {
    entries: [{ key: 'ip', value: '1.2.3.4' }],
    limit: { requestsPerUnit: 5, unit: 'SECOND' },
  })!;
  t.equal(override.rule.limits[0]!.name, 'd.ip=1.2.3.4', 'a request-supplied limit is named by its entries');
  const config = loadConfig([{ name: 'a', yaml }]);
  t.notMatch(config.dump(), 'name:', "the reference's /rlconfig lines by default");
  t.match(
    config.dump(true),
    'd.tenant_acme: unit=MINUTE requests_per_unit=1, shadow_mode: false, quota_mode: false, name: acme-tenant\n',
  );
  t.match(
    config.dump(true),
    'd.path_/api.user: unit=HOUR requests_per_unit=100, shadow_mode: false, quota_mode: false, algorithm: sliding_window, name: d.path=/api.user[1]\n',
  );
});
