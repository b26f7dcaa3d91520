// The fast YAML door reads ordinary files to the same document as the full path (the `yaml` package),
// and leaves everything else (errors, aliases, tags, floats, bounds) to it.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { cfg10kYaml } from '../../../harness/fixtures.js';
import { FULL_PATH, readYamlFast } from './fast.js';
import { parseYamlSourceFully } from './read.js';
import { DEFAULT_YAML_LIMITS } from './limits.js';

/** The full path's answer: the document, or the error's message. */
function full(yaml: string): { doc: unknown } | { error: string } {
  try {
    return { doc: parseYamlSourceFully({ name: 'f.yaml', yaml }) };
  } catch (err) {
    return { error: (err as Error).message };
  }
}

/** Asserts the fast door agrees with the full path; returns whether it took the file. */
function agrees(t: Test, yaml: string, what: string): boolean {
  const fast = readYamlFast(yaml, DEFAULT_YAML_LIMITS);
  const slow = full(yaml);
  if (fast === FULL_PATH) return false;
  t.ok('doc' in slow, `${what}: the full path accepts what the fast door read`);
  if ('doc' in slow) t.same(fast, slow.doc, `${what}: same document`);
  return true;
}

// Scalars whose type depends on YAML 1.1 / yaml.v2 rules, in string fields, number fields and metadata.
const SCALAR_CASES = [
  'hello',
  '"010"',
  '010',
  '0x10',
  '0b11',
  '1_000',
  '1:30',
  'yes',
  'no',
  'on',
  'Off',
  'y',
  'True',
  'FALSE',
  'true',
  '~',
  'null',
  '',
  "'quoted'",
  '-5',
  '+5',
  '123456789012345678901',
  'e1',
  '1e3',
  '1.5',
  '.inf',
  '.nan',
  '2001-12-14',
  'foo*',
  '10.0.0.*',
  '/r1',
  '<<',
  '|\n      block text\n',
  '>\n      folded\n      text\n',
];

t.test('scalars are typed as the full path types them, or left to it', (t) => {
  let taken = 0;
  for (const s of SCALAR_CASES) {
    const docs = [
      `domain: d\ndescriptors:\n  - key: k\n    value: ${s}\n`,
      `domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: second, requests_per_unit: ${s.startsWith('|') || s.startsWith('>') ? '5' : s} }\n`,
      `domain: d\ndescriptors:\n  - key: k\n    metadata:\n      m: ${s}\n      list: [${s.startsWith('|') || s.startsWith('>') ? 'x' : s}]\n`,
      `domain: d\ndescriptors:\n  - key: k\n    shadow_mode: ${s}\n`,
      `${s.startsWith('|') || s.startsWith('>') ? 'x' : s}: key\ndomain: d\n`,
      `domain: d\ndescriptors:\n  - key: k\n    metadata:\n      ${s.startsWith('|') || s.startsWith('>') ? 'x' : s}: 1\n      n: { ${s.startsWith('|') || s.startsWith('>') ? 'x' : s}: 2 }\n`,
    ];
    for (const y of docs) if (agrees(t, y, JSON.stringify(y))) taken++;
  }
  t.ok(taken > 60, `the fast door read most of them (${taken})`);
  t.end();
});

t.test('the examples and the 10k-descriptor benchmark file read the same on both paths', (t) => {
  const dirs = ['examples/config', 'examples/invalid', 'examples/invalid/operator'];
  for (const dir of dirs) {
    for (const f of readdirSync(dir).filter((n) => n.endsWith('.yaml'))) {
      agrees(t, readFileSync(join(dir, f), 'utf8'), `${dir}/${f}`);
    }
  }
  t.ok(agrees(t, cfg10kYaml(3), 'cfg10k'), 'the benchmark file takes the fast door');
  t.end();
});

t.test('a key in metadata is its text on both paths, at every depth', (t) => {
  const cases: [string, unknown][] = [
    ['y: 1\n      n: { on: 2, 010: 3, "off": 4, ~: 5 }', { y: 1, n: { on: 2, '010': 3, off: 4, '~': 5 } }],
    ['010: 1\n      n: { 0x1f: 2, 12: 3 }', { '010': 1, n: { '0x1f': 2, '12': 3 } }],
  ];
  for (const [md, want] of cases) {
    const y = `domain: d\ndescriptors:\n  - key: k\n    metadata:\n      ${md}\n`;
    const slow = full(y) as { doc: { descriptors: { metadata: unknown }[] } };
    t.same(slow.doc.descriptors[0]!.metadata, want, `full path: ${md}`);
    agrees(t, y, md);
  }
  t.end();
});

t.test('errors, aliases, tags, merges and near-limit files are left to the full path', (t) => {
  const left = [
    'domain: d\ndescriptors: [\n', // syntax error
    'domain: d\ndomain: e\n', // duplicate key
    'x: &a { k: v }\ny: *a\ndomain: d\n', // alias
    'domain: !!str 5\n', // tag
    'base: &b { key: k }\ndomain: d\ndescriptors:\n  - <<: *b\n', // merge
    'domain: d\n---\ndomain: e\n', // two documents
    '? [a]\n: b\ndomain: d\n', // collection key
    'domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: second, requests_per_unit: 1.5 }\n', // float
  ];
  for (const y of left) t.equal(readYamlFast(y, DEFAULT_YAML_LIMITS), FULL_PATH, JSON.stringify(y));
  const tight = { ...DEFAULT_YAML_LIMITS, maxDepth: 3, maxNodes: 5, maxScalarLength: 4 };
  t.equal(readYamlFast('a: [[[[1]]]]\n', tight), FULL_PATH, 'depth');
  t.equal(readYamlFast('a: [1, 2, 3, 4, 5]\n', tight), FULL_PATH, 'nodes');
  t.equal(readYamlFast('a: abcdef\n', tight), FULL_PATH, 'scalar length');
  t.end();
});
