// Hostile YAML is refused before it expands: each bound (file size, scalar length, nesting depth,
// aliases, nodes after alias expansion) fails with the file and the setting named, and raising the
// setting admits the same text.
import t from 'tap';
import { ConfigError } from '../errors.js';
import { parseYamlSource } from './read.js';
import { DEFAULT_YAML_LIMITS, type YamlLimits } from './limits.js';

/** The issue's "billion laughs": 9 levels, each listing the previous one ten times (10^9 nodes). */
function billionLaughs(): string {
  let y = 'a0: &a0 ["lol"]\n';
  for (let i = 1; i <= 9; i++)
    y += `a${i}: &a${i} [${Array(10)
      .fill(`*a${i - 1}`)
      .join(', ')}]\n`;
  return `${y}domain: bomb\ndescriptors:\n  - key: k\n`;
}

const parse = (yaml: string, limits: Partial<YamlLimits> = {}) =>
  parseYamlSource({ name: 'hostile.yaml', yaml }, { ...DEFAULT_YAML_LIMITS, ...limits });

t.test('a billion-laughs file is refused without being expanded, naming the file and the limit', (t) => {
  const started = performance.now();
  t.throws(() => parse(billionLaughs()), ConfigError);
  t.throws(() => parse(billionLaughs()), {
    message:
      /^hostile\.yaml: .*nodes after alias expansion exceeds the limit of 2000000 \(CONFIG_YAML_MAX_NODES\)/,
  });
  // No timing assertion on speed; the bound is that it returns at all (expansion is 10^9 nodes).
  t.ok(performance.now() - started < 60_000, 'returned');
  t.end();
});

t.test('anchors and aliases within the limits still work (an anchor is checked once)', (t) => {
  const yaml =
    'limit: &l { unit: minute, requests_per_unit: 5 }\ndomain: d\ndescriptors:\n  - key: a\n    rate_limit: *l\n  - key: b\n    rate_limit: *l\n';
  const doc = parse(yaml) as { descriptors: { rate_limit: unknown }[] };
  t.same(doc.descriptors[1]!.rate_limit, { unit: 'minute', requests_per_unit: 5 });
  t.throws(() => parse(yaml, { maxAliases: 1 }), {
    message: /^hostile\.yaml: .*number of aliases exceeds the limit of 1 \(CONFIG_YAML_MAX_ALIASES\)/,
  });
  t.throws(() => parse(yaml, { maxNodes: 10 }), { message: /CONFIG_YAML_MAX_NODES/ });
  t.end();
});

t.test('file size: over CONFIG_YAML_MAX_BYTES is refused before parsing', (t) => {
  const yaml = `domain: d\n# ${'x'.repeat(2000)}\n`;
  t.throws(() => parse(yaml, { maxBytes: 1000 }), {
    message: /^hostile\.yaml: .*size \(2013 bytes\) exceeds the limit of 1000 \(CONFIG_YAML_MAX_BYTES\)/,
  });
  t.same(parse(yaml, { maxBytes: 4000 }), { domain: 'd' });
  t.end();
});

t.test('scalar length: plain, quoted and block scalars over CONFIG_YAML_MAX_SCALAR_BYTES', (t) => {
  const long = 'v'.repeat(70 * 1024);
  for (const yaml of [
    `domain: ${long}\n`,
    `domain: "${long}"\n`,
    `domain: '${long}'\n`,
    `domain: |\n  ${long}\n`,
  ]) {
    t.throws(() => parse(yaml), {
      message:
        /^hostile\.yaml: .*scalar at line [12] exceeds the limit of 65536 \(CONFIG_YAML_MAX_SCALAR_BYTES\)/,
    });
    t.equal((parse(yaml, { maxScalarLength: 80 * 1024 }) as { domain: string }).domain.trim(), long);
  }
  t.end();
});

t.test('nesting depth: flow and block nesting over CONFIG_YAML_MAX_DEPTH', (t) => {
  const flow = `domain: d\nx: ${'['.repeat(100)}${']'.repeat(100)}\n`;
  t.throws(() => parse(flow), {
    message: /nesting at line 2 exceeds the limit of 64 \(CONFIG_YAML_MAX_DEPTH\)/,
  });
  t.doesNotThrow(() => parse(flow, { maxDepth: 200 }));
  let block = 'domain: d\n';
  for (let i = 0; i < 100; i++) block += `${' '.repeat(i)}k:\n`;
  t.throws(() => parse(block), { message: /nesting exceeds the limit of 64 \(CONFIG_YAML_MAX_DEPTH\)/ });
  t.doesNotThrow(() => parse(block, { maxDepth: 200 }));
  // Deeper than the composer's stack: still the depth error, not a crash.
  const deep = `${'- '.repeat(20_000)}1\n`;
  t.throws(() => parse(deep, { maxDepth: 1000 }), { message: /CONFIG_YAML_MAX_DEPTH/ });
  // An alias that nests its anchor deeper counts at its expanded depth.
  let chained = 'a0: &a0 [[[[[[[[[[1]]]]]]]]]]\n';
  for (let i = 1; i < 8; i++) chained += `a${i}: &a${i} [[[[[[[[[[*a${i - 1}]]]]]]]]]]\n`;
  t.throws(() => parse(chained), { message: /nesting exceeds the limit of 64/ });
  t.end();
});
