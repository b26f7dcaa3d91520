import t from 'tap';
import { checkDocument, compileConfig, ConfigError, loadConfig } from './index.js';

const validateDocument = (name: string, doc: unknown) => checkDocument(name, doc).errors;

/** Loads one YAML document and returns the ConfigError it throws. */
function loadError(yaml: string, name = 'config/a.yaml'): ConfigError {
  try {
    loadConfig([{ name, yaml }]);
  } catch (e) {
    if (e instanceof ConfigError) return e;
    throw e;
  }
  throw new Error('expected a ConfigError');
}

interface Asserts {
  equal: (...args: any[]) => boolean;
}

function expectError(t: Asserts, yaml: string, field: string, detail: string): void {
  const e = loadError(yaml);
  t.equal(e.source, 'config/a.yaml');
  t.equal(e.field, field);
  t.equal(e.detail, detail);
  t.equal(e.message, field === '' ? `config/a.yaml: ${detail}` : `config/a.yaml: ${field}: ${detail}`);
}

t.test('ConfigError names source and field in its message', async (t) => {
  const e = new ConfigError(
    'config/a.yaml',
    'descriptors[0].rate_limit.unit',
    "invalid rate limit unit 'fortnight' (one of: second, minute, hour, day, week, month, year)",
  );
  t.equal(
    e.message,
    "config/a.yaml: descriptors[0].rate_limit.unit: invalid rate limit unit 'fortnight' (one of: second, minute, hour, day, week, month, year)",
  );
  t.ok(e instanceof Error);
  t.equal(e.name, 'ConfigError');
});

t.test('invalid unit', async (t) => {
  expectError(
    t,
    'domain: d\ndescriptors:\n  - key: k\n    descriptors:\n      - key: k2\n      - key: k3\n        rate_limit: { unit: fortnight, requests_per_unit: 1 }\n',
    'descriptors[0].descriptors[1].rate_limit.unit',
    "invalid rate limit unit 'fortnight' (one of: second, minute, hour, day, week, month, year)",
  );
  expectError(
    t,
    'domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: unknown }\n',
    'descriptors[0].rate_limit.unit',
    "invalid rate limit unit 'unknown' (one of: second, minute, hour, day, week, month, year)",
  );
});

t.test('rate_limit without unit (requests_per_unit needs a unit)', async (t) => {
  expectError(
    t,
    'domain: d\ndescriptors:\n  - key: k\n    rate_limit: { requests_per_unit: 5 }\n',
    'descriptors[0].rate_limit.unit',
    "invalid rate limit unit ''",
  );
  expectError(
    t,
    'domain: d\ndescriptors:\n  - key: k\n    rate_limit: {}\n',
    'descriptors[0].rate_limit.unit',
    "invalid rate limit unit ''",
  );
});

t.test('unlimited excludes a unit; requests_per_unit alone is tolerated as in the reference', async (t) => {
  expectError(
    t,
    'domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unlimited: true, unit: second, requests_per_unit: 5 }\n',
    'descriptors[0].rate_limit.unit',
    'should not specify rate limit unit when unlimited',
  );
  const c = loadConfig([
    {
      name: 'x',
      yaml: 'domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unlimited: true, requests_per_unit: 5 }\n',
    },
  ]);
  t.equal(c.getLimit('d', { entries: [{ key: 'k', value: 'v' }] })?.rule.unlimited, true);
  // unlimited: false needs a unit like any rule
  expectError(
    t,
    'domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unlimited: false }\n',
    'descriptors[0].rate_limit.unit',
    "invalid rate limit unit ''",
  );
});

t.test('empty or missing domain', async (t) => {
  expectError(t, 'domain: ""\ndescriptors: []\n', 'domain', 'config file cannot have empty domain');
  expectError(t, 'descriptors: []\n', 'domain', 'config file cannot have empty domain');
  expectError(t, '', 'domain', 'config file cannot have empty domain');
  expectError(t, 'domain:\n', 'domain', 'config file cannot have empty domain');
});

t.test('missing or empty key', async (t) => {
  expectError(t, 'domain: d\ndescriptors:\n  - value: v\n', 'descriptors[0].key', 'descriptor has empty key');
  expectError(
    t,
    'domain: d\ndescriptors:\n  - key: a\n    descriptors:\n      - key: ""\n',
    'descriptors[0].descriptors[0].key',
    'descriptor has empty key',
  );
});

t.test('duplicate descriptor at one level', async (t) => {
  expectError(
    t,
    'domain: d\ndescriptors:\n  - { key: k, value: v }\n  - { key: k, value: v, rate_limit: { unit: second, requests_per_unit: 1 } }\n',
    'descriptors[1]',
    "duplicate descriptor composite key 'd.k_v'",
  );
  expectError(
    t,
    'domain: d\ndescriptors:\n  - key: p\n    value: q\n    descriptors:\n      - { key: k }\n      - { key: k }\n',
    'descriptors[0].descriptors[1]',
    "duplicate descriptor composite key 'd.p_q.k'",
  );
  // same key with and without value is fine, as are equal entries at different levels
  t.doesNotThrow(() =>
    loadConfig([
      {
        name: 'x',
        yaml: 'domain: d\ndescriptors:\n  - { key: k }\n  - { key: k, value: v, descriptors: [{ key: k }] }\n',
      },
    ]),
  );
  // the reference compares composite keys: key a_b equals key a with value b
  expectError(
    t,
    'domain: d\ndescriptors:\n  - { key: a_b }\n  - { key: a, value: b }\n',
    'descriptors[1]',
    "duplicate descriptor composite key 'd.a_b'",
  );
});

t.test('replaces: empty name and own name', async (t) => {
  expectError(
    t,
    'domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: second, requests_per_unit: 1, name: a, replaces: [{ name: "" }] }\n',
    'descriptors[0].rate_limit.replaces[0].name',
    'should not have an empty replaces entry',
  );
  expectError(
    t,
    'domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: second, requests_per_unit: 1, replaces: [{}] }\n',
    'descriptors[0].rate_limit.replaces[0].name',
    'should not have an empty replaces entry',
  );
  expectError(
    t,
    'domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: second, requests_per_unit: 1, name: a, replaces: [{ name: b }, { name: a }] }\n',
    'descriptors[0].rate_limit.replaces[1].name',
    'replaces should not contain name of same descriptor',
  );
});

t.test('share_threshold needs a wildcard value', async (t) => {
  expectError(
    t,
    'domain: d\ndescriptors:\n  - key: k\n    value: v\n    share_threshold: true\n    rate_limit: { unit: second, requests_per_unit: 1 }\n',
    'descriptors[0].share_threshold',
    "share_threshold can only be used with wildcard values (containing '*'), but found key 'k_v'",
  );
  expectError(
    t,
    'domain: d\ndescriptors:\n  - key: k\n    share_threshold: true\n',
    'descriptors[0].share_threshold',
    "share_threshold can only be used with wildcard values (containing '*'), but found key 'k'",
  );
  t.doesNotThrow(() =>
    loadConfig([
      {
        name: 'x',
        yaml: 'domain: d\ndescriptors:\n  - { key: k, value: "v*", share_threshold: false }\n  - { key: j, value: v, share_threshold: false }\n',
      },
    ]),
  );
  // Any '*' will do, as upstream accepts: inside the value, or several.
  t.doesNotThrow(() =>
    loadConfig([
      {
        name: 'x',
        yaml: 'domain: d\ndescriptors:\n  - { key: k, value: "eu-*-free", share_threshold: true }\n  - { key: j, value: "a*b*c", share_threshold: true }\n',
      },
    ]),
  );
});

t.test('unknown keys anywhere', async (t) => {
  expectError(t, 'domain: d\nratelimit: {}\n', 'ratelimit', "config error, unknown key 'ratelimit'");
  expectError(
    t,
    'domain: d\ndescriptors:\n  - key: k\n    ratelimit: { unit: second }\n',
    'descriptors[0].ratelimit',
    "config error, unknown key 'ratelimit'; did you mean rate_limit?",
  );
  expectError(
    t,
    'domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: second, requestsperunit: 5 }\n',
    'descriptors[0].rate_limit.requestsperunit',
    "config error, unknown key 'requestsperunit'; did you mean requests_per_unit?",
  );
  expectError(
    t,
    'domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: second, replaces: [{ name: a, extra: 1 }] }\n',
    'descriptors[0].rate_limit.replaces[0].extra',
    "config error, unknown key 'extra'",
  );
  // metadata is free-form
  t.doesNotThrow(() =>
    loadConfig([
      {
        name: 'x',
        yaml: 'domain: d\ndescriptors:\n  - key: k\n    metadata: { anything: { goes: [1, 2.5] } }\n',
      },
    ]),
  );
});

t.test('lists must hold maps', async (t) => {
  expectError(
    t,
    'domain: d\ndescriptors:\n  - a\n',
    'descriptors[0]',
    'config error, yaml file contains list of type other than map: a',
  );
  expectError(
    t,
    'domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: second, replaces: [x] }\n',
    'descriptors[0].rate_limit.replaces[0]',
    'config error, yaml file contains list of type other than map: x',
  );
});

t.test('type errors name the field', async (t) => {
  expectError(
    t,
    'domain: d\ndescriptors:\n  - key: k\n    shadow_mode: "true"\n',
    'descriptors[0].shadow_mode',
    "config error, 'shadow_mode' must be a boolean",
  );
  expectError(t, 'domain: d\ndescriptors: {}\n', 'descriptors', "config error, 'descriptors' must be a list");
  expectError(
    t,
    'domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: second, requests_per_unit: -1 }\n',
    'descriptors[0].rate_limit.requests_per_unit',
    "config error, 'requests_per_unit' must be an unsigned 32-bit integer",
  );
  expectError(
    t,
    'domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: second, requests_per_unit: 4294967296 }\n',
    'descriptors[0].rate_limit.requests_per_unit',
    "config error, 'requests_per_unit' must be an unsigned 32-bit integer",
  );
  expectError(t, '- a\n- b\n', '', 'config error, document must be a map');
});

t.test('validateDocument returns every error of a document', async (t) => {
  const errors = validateDocument('cr/default/web', {
    domain: '',
    descriptors: [
      { key: 'a', rate_limit: { unit: 'fortnight' } },
      { key: 'a' },
      { key: 'b', rate_limit: { unlimited: true, unit: 'second' }, colour: 'red' },
      { key: 'c', value: 'x', share_threshold: true },
    ],
  });
  t.same(
    errors.map((e) => [e.field, e.detail]).sort(),
    [
      ['descriptors[1]', "duplicate descriptor composite key '.a'"],
      ['descriptors[2].colour', "config error, unknown key 'colour'"],
      ['descriptors[2].rate_limit.unit', 'should not specify rate limit unit when unlimited'],
      [
        'descriptors[0].rate_limit.unit',
        "invalid rate limit unit 'fortnight' (one of: second, minute, hour, day, week, month, year)",
      ],
      [
        'descriptors[3].share_threshold',
        "share_threshold can only be used with wildcard values (containing '*'), but found key 'c_x'",
      ],
      ['domain', 'config file cannot have empty domain'],
    ].sort(),
  );
  for (const e of errors) {
    t.equal(e.source, 'cr/default/web');
    t.ok(e.message.startsWith(`cr/default/web: ${e.field}: `));
  }
  t.same(
    validateDocument('ok', {
      domain: 'd',
      descriptors: [{ key: 'k', rate_limit: { unit: 'second', requests_per_unit: 1 } }],
    }),
    [],
  );
  t.same(validateDocument('ok', { domain: 'd' }), [], 'descriptors may be absent');
});

t.test('null fields count as absent (as Go and the API server treat them)', async (t) => {
  t.same(
    validateDocument('n', {
      domain: 'd',
      descriptors: [{ key: 'k', value: null, rate_limit: null, descriptors: null }],
    }),
    [],
  );
  const c = compileConfig([
    { name: 'n', document: { domain: 'd', descriptors: [{ key: 'k', rate_limit: null }] } },
  ]);
  t.equal(c.getLimit('d', { entries: [{ key: 'k', value: 'v' }] }), undefined);
});

t.test('compileConfig throws the first error and builds nothing partial', async (t) => {
  const good = { name: 'good', document: { domain: 'g', descriptors: [] } };
  const bad = { name: 'bad', document: { domain: 'b', descriptors: [{ key: '' }] } };
  t.throws(() => compileConfig([good, bad]), {
    message: 'bad: descriptors[0].key: descriptor has empty key',
  });
  t.throws(() => compileConfig([good, good]), {
    message: "good: domain: duplicate domain 'g' in config file",
  });
  t.same(compileConfig([good]).domains, ['g']);
});

t.test('the input document is not modified', async (t) => {
  const doc = {
    domain: 'd',
    descriptors: [{ key: 'k', value: null, rate_limit: { unit: 'second', requests_per_unit: 1 } }],
  };
  const copy = JSON.parse(JSON.stringify(doc));
  compileConfig([{ name: 'x', document: doc }]);
  t.same(doc, copy);
});

t.test('quota_unit: the registered units and tokens; anything else is refused with the list', async (t) => {
  expectError(
    t,
    'domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: second, quota_unit: bytes }\n',
    'descriptors[0].rate_limit.quota_unit',
    "invalid quota_unit 'bytes' (one of: requests, content-bytes, concurrent-requests, tokens)",
  );
  expectError(
    t,
    'domain: d\ndescriptors:\n  - key: k\n    rate_limits:\n      - { unit: day, quota_unit: Tokens }\n',
    'descriptors[0].rate_limits[0].quota_unit',
    "invalid quota_unit 'Tokens' (one of: requests, content-bytes, concurrent-requests, tokens)",
  );
  const c = loadConfig([
    {
      name: 'a.yaml',
      yaml: [
        'domain: d',
        'descriptors:',
        '  - key: bytes',
        '    rate_limit: { unit: second, requests_per_unit: 1000, quota_unit: content-bytes }',
        '  - key: plain',
        '    rate_limit: { unit: second, requests_per_unit: 1, quota_unit: requests }',
        '  - key: user',
        '    rate_limits:',
        '      - { unit: day, requests_per_unit: 100000, quota_unit: tokens }',
        '      - { unit: month, requests_per_unit: 9 }',
      ].join('\n'),
    },
  ]);
  const limits = (k: string) => c.getLimit('d', { entries: [{ key: k, value: 'v' }] })!.rule.limits;
  t.equal(limits('bytes')[0]!.quotaUnit, 'content-bytes');
  t.notOk('quotaUnit' in limits('plain')[0]!, 'requests, the default, is not kept');
  t.same(
    limits('user').map((l) => l.quotaUnit),
    ['tokens', undefined],
    'per item of rate_limits',
  );
});
