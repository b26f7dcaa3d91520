import t from 'tap';
import { loadConfig, type RateLimitConfig, type RequestDescriptor } from './index.js';

function load(yaml: string, name = 'test.yaml'): RateLimitConfig {
  return loadConfig([{ name, yaml }]);
}

function req(...pairs: [string, string][]): RequestDescriptor {
  return { entries: pairs.map(([key, value]) => ({ key, value })) };
}

// Shaped like the reference's basic test configuration (own values).
const BASIC = `
domain: shop
descriptors:
  - key: tenant
    value: acme
    descriptors:
      - key: user
        rate_limit: { unit: second, requests_per_unit: 5 }
      - key: user
        value: vip
        rate_limit: { unit: second, requests_per_unit: 10 }
  - key: path
    rate_limit: { unit: minute, requests_per_unit: 20 }
  - key: path
    value: /login
    rate_limit: { unit: minute, requests_per_unit: 30 }
  - key: path
    value: /health
  - key: ip
    rate_limit: { unit: hour, requests_per_unit: 1 }
  - key: region
    value: eu
    rate_limit: { unit: day, requests_per_unit: 15 }
    descriptors:
      - key: zone
        value: a
        rate_limit: { unit: day, requests_per_unit: 25 }
`;

t.test('unknown domain gives undefined, also with an override', async (t) => {
  const c = load(BASIC);
  t.equal(c.getLimit('other', req(['path', '/x'])), undefined);
  t.equal(
    c.getLimit('other', {
      entries: [{ key: 'path', value: '/x' }],
      limit: { requestsPerUnit: 1, unit: 'DAY' },
    }),
    undefined,
  );
  t.equal(c.hasDomain('shop'), true);
  t.equal(c.hasDomain('other'), false);
  t.same(c.domains, ['shop']);
});

t.test('empty request descriptor matches nothing', async (t) => {
  t.equal(load(BASIC).getLimit('shop', { entries: [] }), undefined);
});

t.test('rule 1/2: depth must equal the number of entries', async (t) => {
  const c = load(BASIC);
  // one level rule, two-entry request: no match
  t.equal(c.getLimit('shop', req(['path', '/a'], ['x', 'y'])), undefined);
  // placeholder level 1, two entries reach the level 2 rule
  t.equal(c.getLimit('shop', req(['tenant', 'acme'], ['user', 'bob']))?.rule.requestsPerUnit, 5);
  // a level with both a rule and children: one entry uses the level 1 rule, two the nested one
  t.equal(c.getLimit('shop', req(['region', 'eu']))?.rule.requestsPerUnit, 15);
  t.equal(c.getLimit('shop', req(['region', 'eu'], ['zone', 'a']))?.rule.requestsPerUnit, 25);
  // nested level exists but the second entry does not match it
  t.equal(c.getLimit('shop', req(['region', 'eu'], ['zone', 'b'])), undefined);
  // three entries never match a two-level config
  t.equal(c.getLimit('shop', req(['region', 'eu'], ['zone', 'a'], ['z', 'z'])), undefined);
});

t.test('rule 3: key_value is tried before key only', async (t) => {
  const c = load(BASIC);
  const specific = c.getLimit('shop', req(['path', '/login']))!;
  t.equal(specific.rule.requestsPerUnit, 30);
  t.equal(specific.statKey, 'shop.path_/login');
  const generic = c.getLimit('shop', req(['path', '/other']))!;
  t.equal(generic.rule.requestsPerUnit, 20);
  t.equal(generic.rule.unit, 'MINUTE');
  t.equal(generic.statKey, 'shop.path');
  const nested = c.getLimit('shop', req(['tenant', 'acme'], ['user', 'vip']))!;
  t.equal(nested.rule.requestsPerUnit, 10);
  t.equal(nested.statKey, 'shop.tenant_acme.user_vip');
});

t.test('rule 4: key-only entry matches any value; the cache key keeps the request value', async (t) => {
  const c = load(BASIC);
  const a = c.getLimit('shop', req(['ip', '1.2.3.4']))!;
  const b = c.getLimit('shop', req(['ip', '5.6.7.8']))!;
  t.equal(a.rule, b.rule);
  t.equal(a.statKey, 'shop.ip');
  t.same(a.keyEntries, [{ key: 'ip', value: '1.2.3.4' }]);
  t.same(b.keyEntries, [{ key: 'ip', value: '5.6.7.8' }]);
  t.equal(a.rule.unitSeconds, 3600);
});

t.test('rule 5: entry without rate_limit and without children is whitelisted', async (t) => {
  // /health is listed without a limit: it must not fall back to the key-only `path` rule.
  t.equal(load(BASIC).getLimit('shop', req(['path', '/health'])), undefined);
});

t.test('rule 6: entry without rate_limit but with children is only a placeholder', async (t) => {
  const c = load(BASIC);
  t.equal(c.getLimit('shop', req(['tenant', 'acme'])), undefined);
  t.equal(c.getLimit('shop', req(['tenant', 'other'], ['user', 'bob'])), undefined);
});

t.test(
  'rule 8/9/11 flags: unlimited, shadow_mode, name/replaces, quota_mode, metadata propagate',
  async (t) => {
    const c = load(`
domain: d
descriptors:
  - key: free
    rate_limit: { unlimited: true }
  - key: shadow
    shadow_mode: true
    rate_limit: { unit: second, requests_per_unit: 0 }
  - key: named
    rate_limit: { unit: hour, requests_per_unit: 3, name: base }
  - key: better
    quota_mode: true
    metadata: { owner: { team: web }, tier: 2 }
    rate_limit:
      unit: hour
      requests_per_unit: 9
      name: better
      replaces: [{ name: base }, { name: other }]
`);
    const free = c.getLimit('d', req(['free', 'x']))!.rule;
    t.equal(free.unlimited, true);
    t.equal(free.requestsPerUnit, 0);
    t.equal(free.statKey, 'd.free');
    const shadow = c.getLimit('d', req(['shadow', 'x']))!.rule;
    t.equal(shadow.shadowMode, true);
    t.equal(shadow.requestsPerUnit, 0);
    t.equal(shadow.unlimited, false);
    const named = c.getLimit('d', req(['named', 'x']))!.rule;
    t.equal(named.name, 'base');
    t.same(named.replaces, []);
    t.equal(named.shadowMode, false);
    t.equal(named.quotaMode, false);
    t.equal(named.metadata, undefined);
    const better = c.getLimit('d', req(['better', 'x']))!.rule;
    t.equal(better.name, 'better');
    t.same(better.replaces, ['base', 'other']);
    t.equal(better.quotaMode, true);
    t.same(better.metadata, { owner: { team: 'web' }, tier: 2 });
    t.ok(Object.isFrozen(better));
  },
);

t.test('every unit, case-insensitive, with the reference window lengths', async (t) => {
  const units: [string, string, number][] = [
    ['second', 'SECOND', 1],
    ['Minute', 'MINUTE', 60],
    ['HOUR', 'HOUR', 3600],
    ['day', 'DAY', 86400],
    ['week', 'WEEK', 604800],
    ['month', 'MONTH', 2592000],
    ['yEaR', 'YEAR', 31536000],
  ];
  const c = load(
    `domain: u\ndescriptors:\n${units.map(([u], i) => `  - key: k${i}\n    rate_limit: { unit: ${u}, requests_per_unit: ${i + 1} }\n`).join('')}`,
  );
  units.forEach(([, unit, seconds], i) => {
    const r = c.getLimit('u', req([`k${i}`, 'v']))!.rule;
    t.equal(r.unit, unit);
    t.equal(r.unitSeconds, seconds);
    t.equal(r.requestsPerUnit, i + 1);
  });
});

const WILD = `
domain: w
descriptors:
  - key: wild
    value: foo*
    rate_limit: { unit: minute, requests_per_unit: 1 }
  - key: wild
    value: fo*
    rate_limit: { unit: minute, requests_per_unit: 2 }
  - key: wild
    value: foobar
    rate_limit: { unit: minute, requests_per_unit: 3 }
  - key: wild
    rate_limit: { unit: minute, requests_per_unit: 4 }
  - key: mid
    value: bar*b
    rate_limit: { unit: minute, requests_per_unit: 5 }
  - key: exact
    value: foo
    rate_limit: { unit: minute, requests_per_unit: 6 }
  - key: nest
    value: n*
    descriptors:
      - key: inner
        value: i*
        rate_limit: { unit: second, requests_per_unit: 7 }
`;

t.test('wildcards: exact first, then wildcards in config order, then key only', async (t) => {
  const c = load(WILD);
  const rpu = (v: string) => c.getLimit('w', req(['wild', v]))?.rule.requestsPerUnit;
  t.equal(rpu('foobar'), 3, 'exact beats wildcards');
  t.equal(rpu('foo1'), 1, 'first listed wildcard wins although fo* also matches');
  t.equal(rpu('foo'), 1, 'prefix itself matches');
  t.equal(rpu('fox'), 2);
  t.equal(rpu('bar'), 4, 'key only when no wildcard matches');
  t.equal(c.getLimit('w', req(['wild', 'foo1']))!.statKey, 'w.wild_foo*');
  t.equal(
    c.getLimit('w', req(['mid', 'barab']))?.rule.requestsPerUnit,
    5,
    'a * inside a value is a wildcard',
  );
  t.equal(c.getLimit('w', req(['mid', 'bar*b']))?.rule.requestsPerUnit, 5);
  t.equal(
    c.getLimit('w', req(['mid', 'barabc'])),
    undefined,
    'the part after an inner * is anchored at the end',
  );
  t.equal(c.getLimit('w', req(['exact', 'foo1'])), undefined, 'no eager matching of plain values');
  t.equal(
    c.getLimit('w', req(['nest', 'n1'], ['inner', 'i2']))?.rule.requestsPerUnit,
    7,
    'nested wildcard levels',
  );
  t.equal(c.getLimit('w', req(['nest', 'n1'], ['inner', 'x'])), undefined);
});

t.test('inner wildcards: a * anywhere matches any run, also an empty one', async (t) => {
  const c = load(`
domain: w
descriptors:
  - { key: k, value: "foo*bar", rate_limit: { unit: second, requests_per_unit: 1 } }
  - { key: k, value: "foo9bar", rate_limit: { unit: second, requests_per_unit: 2 } }
  - { key: k, value: "*.example.com", rate_limit: { unit: second, requests_per_unit: 3 } }
  - { key: k, value: "a*b*c", rate_limit: { unit: second, requests_per_unit: 4 } }
  - { key: k, value: "x**y", rate_limit: { unit: second, requests_per_unit: 5 } }
  - { key: k, value: "ab*ba", rate_limit: { unit: second, requests_per_unit: 6 } }
  - { key: k, value: "foo*", rate_limit: { unit: second, requests_per_unit: 7 } }
  - { key: k, rate_limit: { unit: second, requests_per_unit: 8 } }
`);
  const rpu = (v: string) => c.getLimit('w', req(['k', v]))?.rule.requestsPerUnit;
  t.equal(rpu('foo123bar'), 1);
  t.equal(rpu('foobar'), 1, 'the * matches an empty run');
  t.equal(rpu('foo9bar'), 2, 'an exact value beats a wildcard that also matches');
  t.equal(rpu('foo123bar1'), 7, 'foo*bar must end in bar; the later trailing wildcard matches');
  t.equal(rpu('api.example.com'), 3, 'a leading *');
  t.equal(rpu('example.com'), 8, 'the literal after a leading * keeps its dot');
  t.equal(rpu('a1b2c'), 4, 'several stars, parts in order');
  t.equal(rpu('abc'), 4);
  t.equal(rpu('acb'), 8, 'parts out of order do not match');
  t.equal(rpu('xy'), 5, 'consecutive stars act as one');
  t.equal(rpu('aba'), 8, 'prefix and suffix may not overlap');
  t.equal(rpu('abba'), 6);
  t.equal(c.getLimit('w', req(['k', 'foo1bar']))!.statKey, 'w.k_foo*bar', 'stats keyed by the pattern');

  const keys = load(`
domain: w
descriptors:
  - { key: "k*y", value: v, rate_limit: { unit: second, requests_per_unit: 1 } }
  - { key: "pre*", rate_limit: { unit: second, requests_per_unit: 2 } }
`);
  t.equal(keys.getLimit('w', req(['kXy', 'v'])), undefined, 'a * in a key is literal');
  t.equal(keys.getLimit('w', req(['k*y', 'v']))?.rule.requestsPerUnit, 1);
  t.equal(
    keys.getLimit('w', req(['prefix', '1']))?.rule.requestsPerUnit,
    2,
    'reference quirk kept: a key-only entry ending in * is a prefix match on key_value',
  );

  const order = load(`
domain: w
descriptors:
  - { key: k, value: "foo*", rate_limit: { unit: second, requests_per_unit: 1 } }
  - { key: k, value: "foo*bar", rate_limit: { unit: second, requests_per_unit: 2 } }
`);
  t.equal(
    order.getLimit('w', req(['k', 'foo1bar']))?.rule.requestsPerUnit,
    1,
    'trailing and inner wildcards share one config order: the first listed match wins',
  );
  const nested = load(`
domain: w
descriptors:
  - key: host
    value: "*.internal"
    descriptors:
      - { key: path, value: "/v*/users", rate_limit: { unit: second, requests_per_unit: 9 } }
`);
  t.equal(
    nested.getLimit('w', req(['host', 'db.internal'], ['path', '/v2/users']))?.rule.requestsPerUnit,
    9,
    'inner wildcards at nested levels',
  );
  t.equal(nested.getLimit('w', req(['host', 'db.internal'], ['path', '/v2/users/1'])), undefined);
});

t.test('wildcard order follows the config, not length', async (t) => {
  const c = load(`
domain: w
descriptors:
  - { key: k, value: "a*", rate_limit: { unit: second, requests_per_unit: 1 } }
  - { key: k, value: "abc*", rate_limit: { unit: second, requests_per_unit: 2 } }
`);
  t.equal(c.getLimit('w', req(['k', 'abcd']))?.rule.requestsPerUnit, 1);
  const c2 = load(`
domain: w
descriptors:
  - { key: k, value: "abc*", rate_limit: { unit: second, requests_per_unit: 2 } }
  - { key: k, value: "a*", rate_limit: { unit: second, requests_per_unit: 1 } }
`);
  t.equal(c2.getLimit('w', req(['k', 'abcd']))?.rule.requestsPerUnit, 2);
  t.equal(c2.getLimit('w', req(['k', 'axx']))?.rule.requestsPerUnit, 1);
});

t.test('reference quirk kept: composite keys compare as strings', async (t) => {
  // The reference keys its maps by key + "_" + value, so {a_b, c} and {a, b_c} meet.
  const c = load(`
domain: q
descriptors:
  - { key: a_b, value: c, rate_limit: { unit: second, requests_per_unit: 1 } }
  - { key: x, value: "y*", rate_limit: { unit: second, requests_per_unit: 2 } }
`);
  t.equal(c.getLimit('q', req(['a', 'b_c']))?.rule.requestsPerUnit, 1);
  // wildcard prefix "x_y" also catches key "x_y"
  const m = c.getLimit('q', req(['x_y', 'z']))!;
  t.equal(m.rule.requestsPerUnit, 2);
  t.equal(m.statKey, 'q.x_y_x_y*', 'segment is key + "_" + wildcard when the key does not prefix it');
});

t.test('override: ad-hoc rule from the request, stats key from the request entries', async (t) => {
  const c = load(BASIC);
  const m = c.getLimit('shop', {
    entries: [
      { key: 'tenant', value: 'acme' },
      { key: 'user', value: 'bob' },
      { key: 'flag', value: '' },
    ],
    limit: { requestsPerUnit: 42, unit: 'HOUR' },
  })!;
  t.equal(m.statKey, 'shop.tenant_acme.user_bob.flag');
  t.equal(m.rule.statKey, m.statKey);
  t.equal(m.rule.requestsPerUnit, 42);
  t.equal(m.rule.unit, 'HOUR');
  t.equal(m.rule.unitSeconds, 3600);
  t.equal(m.rule.shadowMode, false);
  t.equal(m.rule.unlimited, false);
  t.equal(m.rule.name, '');
  t.same(m.rule.replaces, []);
  t.same(m.keyEntries, [
    { key: 'tenant', value: 'acme' },
    { key: 'user', value: 'bob' },
    { key: 'flag', value: '' },
  ]);
  // an override applies even where the config has no rule (and even in shadow mode configs)
  const x = c.getLimit('shop', {
    entries: [{ key: 'nothing', value: 'here' }],
    limit: { requestsPerUnit: 1, unit: 'SECOND' },
  })!;
  t.equal(x.statKey, 'shop.nothing_here');
  // null limit is no override
  t.equal(
    c.getLimit('shop', { entries: [{ key: 'path', value: '/login' }], limit: null })?.rule.requestsPerUnit,
    30,
  );
});

t.test('detailed_metric: stats key holds the request values of every level', async (t) => {
  const c = load(`
domain: dm
descriptors:
  - key: user
    detailed_metric: true
    rate_limit: { unit: minute, requests_per_unit: 70 }
  - key: org
    value: o1
    descriptors:
      - key: user
        detailed_metric: true
        rate_limit: { unit: minute, requests_per_unit: 7 }
  - key: plain
    rate_limit: { unit: minute, requests_per_unit: 1 }
`);
  const a = c.getLimit('dm', req(['user', 'alice']))!;
  t.equal(a.rule.statKey, 'dm.user');
  t.equal(a.statKey, 'dm.user_alice');
  t.equal(c.getLimit('dm', req(['user', 'bob']))!.statKey, 'dm.user_bob');
  t.equal(c.getLimit('dm', req(['org', 'o1'], ['user', 'u']))!.statKey, 'dm.org_o1.user_u');
  t.equal(
    c.getLimit('dm', req(['user', '']))!.statKey,
    'dm.user_',
    'reference writes "_" even for an empty value',
  );
  t.equal(c.getLimit('dm', req(['plain', 'zzz']))!.statKey, 'dm.plain');
});

t.test(
  'value_to_metric: value enters the stats key where the entry matched by key or wildcard',
  async (t) => {
    const c = load(`
domain: vm
descriptors:
  - key: route
    value_to_metric: true
    descriptors:
      - key: method
        rate_limit: { unit: minute, requests_per_unit: 60 }
  - key: svc
    value: "api*"
    value_to_metric: true
    rate_limit: { unit: minute, requests_per_unit: 10 }
  - key: svc2
    value: "api*"
    rate_limit: { unit: minute, requests_per_unit: 10 }
  - key: exact
    value: e1
    value_to_metric: true
    rate_limit: { unit: minute, requests_per_unit: 10 }
  - key: leaf
    value_to_metric: true
    rate_limit: { unit: minute, requests_per_unit: 10 }
`);
    const m = c.getLimit('vm', req(['route', '/a'], ['method', 'GET']))!;
    t.equal(m.rule.statKey, 'vm.route.method');
    t.equal(m.statKey, 'vm.route_/a.method');
    t.equal(c.getLimit('vm', req(['svc', 'api-users']))!.statKey, 'vm.svc_api-users');
    t.equal(
      c.getLimit('vm', req(['svc2', 'api-users']))!.statKey,
      'vm.svc2_api*',
      'without value_to_metric the pattern stays',
    );
    t.equal(c.getLimit('vm', req(['exact', 'e1']))!.statKey, 'vm.exact_e1');
    t.equal(c.getLimit('vm', req(['leaf', 'v']))!.statKey, 'vm.leaf_v');
    t.equal(c.getLimit('vm', req(['leaf', '']))!.statKey, 'vm.leaf', 'empty value adds nothing');
    t.same(m.keyEntries, [
      { key: 'route', value: '/a' },
      { key: 'method', value: 'GET' },
    ]);
  },
);

t.test('share_threshold: one counter per wildcard pattern, stats keyed by the pattern', async (t) => {
  const c = load(`
domain: st
descriptors:
  - key: files
    value: "files/*"
    share_threshold: true
    rate_limit: { unit: minute, requests_per_unit: 100 }
  - key: files_no_share
    value: "f/*"
    rate_limit: { unit: minute, requests_per_unit: 100 }
  - key: parent
    value: p
    descriptors:
      - key: files
        value: "nested/*"
        share_threshold: true
        rate_limit: { unit: minute, requests_per_unit: 200 }
  - key: route
    value: "api/*"
    share_threshold: true
    value_to_metric: true
    descriptors:
      - key: method
        rate_limit: { unit: minute, requests_per_unit: 60 }
  - key: service
    value: "svc/*"
    share_threshold: true
    descriptors:
      - key: endpoint
        detailed_metric: true
        rate_limit: { unit: minute, requests_per_unit: 80 }
  - key: file
    value: test1
    rate_limit: { unit: minute, requests_per_unit: 50 }
  - key: file
    value: "test*"
    share_threshold: true
    rate_limit: { unit: minute, requests_per_unit: 100 }
`);
  const a = c.getLimit('st', req(['files', 'files/a.pdf']))!;
  const b = c.getLimit('st', req(['files', 'files/b.csv']))!;
  t.same(a.keyEntries, [{ key: 'files', value: 'files/*' }]);
  t.same(b.keyEntries, a.keyEntries);
  t.equal(a.statKey, 'st.files_files/*');

  const ns = c.getLimit('st', req(['files_no_share', 'f/1']))!;
  t.same(
    ns.keyEntries,
    [{ key: 'files_no_share', value: 'f/1' }],
    'without share_threshold values stay apart',
  );

  const n = c.getLimit('st', req(['parent', 'p'], ['files', 'nested/x']))!;
  t.same(n.keyEntries, [
    { key: 'parent', value: 'p' },
    { key: 'files', value: 'nested/*' },
  ]);
  t.equal(n.statKey, 'st.parent_p.files_nested/*');

  const r = c.getLimit('st', req(['route', 'api/users'], ['method', 'GET']))!;
  t.equal(r.statKey, 'st.route_api/*.method', 'share_threshold wins over value_to_metric');
  t.same(r.keyEntries, [
    { key: 'route', value: 'api/*' },
    { key: 'method', value: 'GET' },
  ]);

  const s = c.getLimit('st', req(['service', 'svc/a'], ['endpoint', 'e1']))!;
  t.equal(s.statKey, 'st.service_svc/*.endpoint_e1', 'detailed_metric keeps the pattern for shared levels');

  const exact = c.getLimit('st', req(['file', 'test1']))!;
  t.equal(exact.rule.requestsPerUnit, 50);
  t.same(exact.keyEntries, [{ key: 'file', value: 'test1' }], 'an exact match does not share');
  const shared = c.getLimit('st', req(['file', 'test2']))!;
  t.equal(shared.rule.requestsPerUnit, 100);
  t.same(shared.keyEntries, [{ key: 'file', value: 'test*' }]);
});

t.test('share_threshold on a wildcard inside the value: one counter for every match', async (t) => {
  const c = load(`
domain: st
descriptors:
  - key: tenant
    value: "eu-*-free"
    share_threshold: true
    rate_limit: { unit: minute, requests_per_unit: 10 }
  - key: plan
    value: "a*b*c"
    share_threshold: true
    rate_limit: { unit: minute, requests_per_unit: 20 }
`);
  const a = c.getLimit('st', req(['tenant', 'eu-west-free']))!;
  const b = c.getLimit('st', req(['tenant', 'eu-north-free']))!;
  t.same(a.keyEntries, [{ key: 'tenant', value: 'eu-*-free' }]);
  t.same(b.keyEntries, a.keyEntries);
  t.equal(a.statKey, 'st.tenant_eu-*-free');
  t.same(c.getLimit('st', req(['plan', 'a1b2c']))!.keyEntries, [{ key: 'plan', value: 'a*b*c' }]);
  t.equal(c.getLimit('st', req(['tenant', 'eu-west-paid'])), undefined, 'a value the pattern misses');
});

t.test('keyEntries is the request array itself when nothing is shared (no copy)', async (t) => {
  const c = load(BASIC);
  const d = req(['path', '/login']);
  t.equal(c.getLimit('shop', d)!.keyEntries, d.entries);
});

t.test('merge: same domain across documents joins top-level entries', async (t) => {
  const a = {
    name: 'a.yaml',
    yaml: 'domain: m\ndescriptors:\n  - { key: k1, value: v1, rate_limit: { unit: second, requests_per_unit: 10 } }\n',
  };
  const b = {
    name: 'b.yaml',
    yaml: 'domain: m\ndescriptors:\n  - { key: k2, value: v2, rate_limit: { unit: second, requests_per_unit: 20 } }\n',
  };
  const c = loadConfig([a, b], { mergeDomainConfig: true });
  t.equal(c.getLimit('m', req(['k1', 'v1']))?.rule.requestsPerUnit, 10);
  t.equal(c.getLimit('m', req(['k2', 'v2']))?.rule.requestsPerUnit, 20);
  t.same(c.domains, ['m']);
  t.throws(() => loadConfig([a, b]), { message: "b.yaml: domain: duplicate domain 'm' in config file" });
  t.throws(() => loadConfig([a, a], { mergeDomainConfig: true }), {
    message: "a.yaml: descriptors[0]: duplicate descriptor composite key 'm.k1_v1'",
  });
});

t.test('merge keeps wildcard order across documents', async (t) => {
  const a = {
    name: 'a.yaml',
    yaml: 'domain: m\ndescriptors:\n  - { key: k, value: "a*", rate_limit: { unit: second, requests_per_unit: 1 } }\n',
  };
  const b = {
    name: 'b.yaml',
    yaml: 'domain: m\ndescriptors:\n  - { key: k, value: "ab*", rate_limit: { unit: second, requests_per_unit: 2 } }\n',
  };
  t.equal(
    loadConfig([a, b], { mergeDomainConfig: true }).getLimit('m', req(['k', 'abc']))?.rule.requestsPerUnit,
    1,
  );
  t.equal(
    loadConfig([b, a], { mergeDomainConfig: true }).getLimit('m', req(['k', 'abc']))?.rule.requestsPerUnit,
    2,
  );
});

t.test('no sources: empty config', async (t) => {
  const c = loadConfig([]);
  t.same(c.domains, []);
  t.equal(c.dump(), '');
  t.equal(c.getLimit('x', req(['a', 'b'])), undefined);
});

t.test('dump prints one line per rule like /rlconfig', async (t) => {
  const c = load(`
domain: d
descriptors:
  - key: a
    rate_limit: { unit: minute, requests_per_unit: 5 }
  - key: b
    value: c
    shadow_mode: true
    descriptors:
      - key: e
        rate_limit: { unit: DAY, requests_per_unit: 7 }
  - key: free
    rate_limit: { unlimited: true }
  - key: white
`);
  t.equal(
    c.dump(),
    'd.a: unit=MINUTE requests_per_unit=5, shadow_mode: false, quota_mode: false\n' +
      'd.b_c.e: unit=DAY requests_per_unit=7, shadow_mode: false, quota_mode: false\n' +
      'd.free: unit=UNKNOWN requests_per_unit=0, shadow_mode: false, quota_mode: false\n',
  );
});

t.test('dump prints shadow_mode and quota_mode of each rule, as the reference does', async (t) => {
  const c = load(`
domain: q
descriptors:
  - key: model
    quota_mode: true
    rate_limit: { unit: hour, requests_per_unit: 100 }
  - key: user
    shadow_mode: true
    quota_mode: true
    rate_limit: { unit: minute, requests_per_unit: 3 }
`);
  t.equal(
    c.dump(),
    'q.model: unit=HOUR requests_per_unit=100, shadow_mode: false, quota_mode: true\n' +
      'q.user: unit=MINUTE requests_per_unit=3, shadow_mode: true, quota_mode: true\n',
  );
});
