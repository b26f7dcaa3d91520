import t from 'tap';
import { ConfigError, loadConfig } from '../index.js';

function err(yaml: string): ConfigError {
  try {
    loadConfig([{ name: 'rt/config/x.yaml', yaml }]);
  } catch (e) {
    if (e instanceof ConfigError) return e;
    throw e;
  }
  throw new Error('expected a ConfigError');
}

t.test('a YAML syntax error names the file and the line', async (t) => {
  const e = err('domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: second\n');
  t.equal(e.source, 'rt/config/x.yaml');
  t.equal(e.field, '');
  t.match(e.message, /^rt\/config\/x\.yaml: error loading config file: yaml: line \d+: /);
  t.notMatch(e.message, /\n/, 'one line');
  const e2 = err('domain: d\n  bad: indent\n');
  t.match(e2.message, /^rt\/config\/x\.yaml: error loading config file: yaml: line 1: Nested mappings/);
});

t.test('a key that is not a string', async (t) => {
  const e = err('domain: d\ndescriptors:\n  - key: k\n    0.25: x\n');
  t.equal(e.field, 'descriptors[0]');
  t.equal(e.detail, 'config error, key is not of type string: 0.25');
  t.equal(err('domain: d\n7: x\n').detail, 'config error, key is not of type string: 7');
  // Go reads `e1` as a string, so it is an unknown key rather than a non-string one
  t.equal(err('domain: d\ne1: x\n').detail, "config error, unknown key 'e1'");
});

t.test('floats are rejected as the reference does ("error checking config")', async (t) => {
  const e = err(
    'domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: second, requests_per_unit: 1.5 }\n',
  );
  t.equal(e.field, 'descriptors[0].rate_limit.requests_per_unit');
  t.equal(e.detail, 'error checking config');
  t.equal(err('domain: d\ndescriptors:\n  - key: k\n    value: 2.0\n').detail, 'error checking config');
  t.equal(err('domain: d\ndescriptors:\n  - key: k\n    value: 1e3\n').detail, 'error checking config');
});

t.test('numbers and YAML 1.1 booleans in string fields keep their text', async (t) => {
  const c = loadConfig([
    {
      name: 'x',
      yaml: 'domain: 42\ndescriptors:\n  - key: 10\n    value: 010\n    rate_limit: { unit: minute, requests_per_unit: 3 }\n  - key: flag\n    value: yes\n    rate_limit: { unit: minute, requests_per_unit: 4 }\n  - key: e\n    value: e1\n    rate_limit: { unit: minute, requests_per_unit: 5 }\n',
    },
  ]);
  t.same(c.domains, ['42']);
  t.equal(c.getLimit('42', { entries: [{ key: '10', value: '010' }] })?.rule.requestsPerUnit, 3);
  t.equal(c.getLimit('42', { entries: [{ key: 'flag', value: 'yes' }] })?.rule.requestsPerUnit, 4);
  t.equal(c.getLimit('42', { entries: [{ key: 'e', value: 'e1' }] })?.rule.requestsPerUnit, 5);
});

t.test('YAML 1.1 booleans in boolean fields', async (t) => {
  const c = loadConfig([
    {
      name: 'x',
      yaml: 'domain: d\ndescriptors:\n  - key: k\n    shadow_mode: yes\n    rate_limit: { unit: second, requests_per_unit: 1 }\n',
    },
  ]);
  t.equal(c.getLimit('d', { entries: [{ key: 'k', value: 'v' }] })?.rule.shadowMode, true);
});

t.test('empty file, comments only, and only the first document of a stream', async (t) => {
  t.equal(err('').detail, 'config file cannot have empty domain');
  t.equal(err('# nothing here\n').detail, 'config file cannot have empty domain');
  const c = loadConfig([{ name: 'x', yaml: 'domain: first\n---\ndomain: second\n' }]);
  t.same(c.domains, ['first']);
});

t.test('anchors and merge keys resolve', async (t) => {
  const c = loadConfig([
    {
      name: 'x',
      yaml: 'domain: d\ndescriptors:\n  - key: a\n    rate_limit: &lim { unit: hour, requests_per_unit: 9 }\n  - key: b\n    rate_limit: *lim\n  - key: c\n    rate_limit:\n      <<: *lim\n      requests_per_unit: 2\n',
    },
  ]);
  t.equal(c.getLimit('d', { entries: [{ key: 'b', value: 'x' }] })?.rule.requestsPerUnit, 9);
  t.equal(c.getLimit('d', { entries: [{ key: 'c', value: 'x' }] })?.rule.requestsPerUnit, 2);
  t.equal(c.getLimit('d', { entries: [{ key: 'c', value: 'x' }] })?.rule.unit, 'HOUR');
});

t.test('errors from a later file name that file', async (t) => {
  t.throws(
    () =>
      loadConfig([
        { name: 'a.yaml', yaml: 'domain: a\n' },
        {
          name: 'b.yaml',
          yaml: 'domain: b\ndescriptors:\n  - key: k\n    rate_limit: { unit: fortnight }\n',
        },
      ]),
    {
      message:
        "b.yaml: descriptors[0].rate_limit.unit: invalid rate limit unit 'fortnight' (one of: second, minute, hour, day, week, month, year)",
    },
  );
});
