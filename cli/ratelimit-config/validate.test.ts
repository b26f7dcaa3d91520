import { readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import t from 'tap';
import { expandPaths } from '../../control-plane/config-set/index.js';
import { REPO_ROOT, runBin, runInProcess, tempFiles } from './testing.js';

const ex = (p: string) => join(REPO_ROOT, 'examples', p);

// Every file of examples/invalid: the field, the service validator's message, the line of the field.
const INVALID: Record<string, { field: string; message: string; line: number }> = {
  'bad-unit.yaml': {
    field: 'spec.descriptors[0].rate_limit.unit',
    message: "invalid rate limit unit 'fortnight' (one of: second, minute, hour, day, week, month, year)",
    line: 12,
  },
  'burst-without-token-bucket.yaml': {
    field: 'spec.descriptors[0].rate_limit.burst',
    message: 'burst is only valid with algorithm token_bucket',
    line: 15,
  },
  'duplicate-descriptor.yaml': {
    field: 'spec.descriptors[1]',
    message: "duplicate descriptor composite key 'invalid.user_a'",
    line: 15,
  },
  'empty-domain.yaml': { field: 'spec.domain', message: 'config file cannot have empty domain', line: 8 },
  'missing-domain.yaml': { field: 'spec.domain', message: 'config file cannot have empty domain', line: 8 },
  'missing-key.yaml': { field: 'spec.descriptors[0].key', message: 'descriptor has empty key', line: 10 },
  'negative-requests.yaml': {
    field: 'spec.descriptors[0].rate_limit.requests_per_unit',
    message: "config error, 'requests_per_unit' must be an unsigned 32-bit integer",
    line: 13,
  },
  'operator/nested-unlimited-with-unit.yaml': {
    field: 'spec.descriptors[0].descriptors[0].descriptors[0].rate_limit.unit',
    message: 'should not specify rate limit unit when unlimited',
    line: 16,
  },
  'rate-limit-and-rate-limits.yaml': {
    field: 'spec.descriptors[0].rate_limits',
    message: 'rate_limit and rate_limits are exclusive',
    line: 14,
  },
  'replaces-itself.yaml': {
    field: 'spec.descriptors[0].rate_limit.replaces[0].name',
    message: 'replaces should not contain name of same descriptor',
    line: 16,
  },
  'requests-not-a-number.yaml': {
    field: 'spec.descriptors[0].rate_limit.requests_per_unit',
    message: "config error, 'requests_per_unit' must be an integer",
    line: 13,
  },
  'requests-without-unit.yaml': {
    field: 'spec.descriptors[0].rate_limit.unit',
    message: "invalid rate limit unit ''",
    line: 12,
  },
  'share-threshold-without-wildcard.yaml': {
    field: 'spec.descriptors[0].share_threshold',
    message:
      "share_threshold can only be used with wildcard values (containing '*'), but found key 'tenant_free'",
    line: 12,
  },
  'unknown-field.yaml': {
    field: 'spec.descriptors[0].ratelimit',
    message: "config error, unknown key 'ratelimit'; did you mean rate_limit?",
    line: 11,
  },
  'unlimited-with-unit.yaml': {
    field: 'spec.descriptors[0].rate_limit.unit',
    message: 'should not specify rate limit unit when unlimited',
    line: 13,
  },
  'too-deep.yaml': {
    field: `spec.${'descriptors[0].'.repeat(8)}descriptors`,
    message: 'descriptor tree is deeper than 8 levels (the limit)',
    line: 25,
  },
};

interface JsonProblem {
  severity: string;
  file: string;
  document: number;
  field: string;
  message: string;
  line: number;
  col: number;
}

t.test('every file in examples/invalid fails with its field, message and line, exit 1', async (t) => {
  const files = expandPaths([ex('invalid')]).map((f) => relative(ex('invalid'), f));
  t.same(files.sort(), Object.keys(INVALID).sort(), 'the table covers every file of examples/invalid');
  for (const name of files) {
    const want = INVALID[name]!;
    const r = await runInProcess(['validate', '--format', 'json', ex(`invalid/${name}`)]);
    t.equal(r.code, 1, `${name}: exit 1`);
    const out = JSON.parse(r.stdout) as { valid: boolean; errors: number; problems: JsonProblem[] };
    t.equal(out.valid, false, name);
    const errors = out.problems.filter((p) => p.severity === 'error');
    t.equal(errors.length, 1, `${name}: one error`);
    t.match(errors[0], { field: want.field, message: want.message, line: want.line, document: 1 }, name);
  }
});

t.test('every valid example (examples/config, examples/crds) passes, alone and together', async (t) => {
  const files = [...expandPaths([ex('config')]), ...expandPaths([ex('crds')])];
  t.ok(files.length >= 10);
  for (const f of files) {
    const r = await runInProcess(['validate', f]);
    t.equal(r.code, 0, `${relative(REPO_ROOT, f)}: ${r.stdout}${r.stderr}`);
  }
  const all = await runInProcess(['validate', '--format', 'json', ex('config'), ex('crds')]);
  t.equal(all.code, 0, all.stdout);
  const out = JSON.parse(all.stdout) as { domains: string[]; warnings: number; problems: JsonProblem[] };
  t.same(out.domains.sort(), [
    'algorithms',
    'basic',
    'blocked',
    'example',
    'metrics',
    'nested',
    'quota',
    'replaces',
    'shadow',
    'shared',
    'wildcard',
  ]);
  // Every field of the examples travels over xDS (metadata, share_threshold, value_to_metric included).
  t.same(out.problems, []);
});

t.test(
  'a field the xDS message cannot carry (failure_mode) is a warning, as the operator says',
  async (t) => {
    const tmp = tempFiles({
      'fm.yaml': rlc(
        'fm',
        `  domain: fm
  descriptors:
    - key: user
      failure_mode: allow
      rate_limit: { unit: minute, requests_per_unit: 3 }
`,
      ),
    });
    t.teardown(() => tmp.remove());
    const r = await runInProcess(['validate', '--format', 'json', tmp.path('fm.yaml')]);
    t.equal(r.code, 0, r.stdout + r.stderr);
    const out = JSON.parse(r.stdout) as { problems: JsonProblem[] };
    t.same(
      out.problems.map((p) => `${p.severity} ${p.field}`),
      ['warning spec.descriptors[0].failure_mode'],
    );
  },
);

t.test('the executable: annotations for CI (file:line:col: message) and exit codes', async (t) => {
  const bad = await runBin(['validate', '--format', 'annotations', 'examples/invalid']);
  t.equal(bad.code, 1, bad.stderr);
  const lines = bad.stdout.trim().split('\n');
  t.equal(lines.length, Object.keys(INVALID).length);
  t.ok(
    lines.includes(
      "examples/invalid/bad-unit.yaml:12:9: spec.descriptors[0].rate_limit.unit: invalid rate limit unit 'fortnight' (one of: second, minute, hour, day, week, month, year)",
    ),
    lines.join('\n'),
  );
  for (const l of lines) t.match(l, /^examples\/invalid\/[\w/-]+\.yaml:\d+:\d+: spec\.\S+: .+$/);

  const good = await runBin(['validate', 'examples/config', 'examples/crds']);
  t.equal(good.code, 0, good.stdout + good.stderr);
  t.match(good.stdout, /^valid: 0 error\(s\), 0 warning\(s\)/m);

  const gh = await runBin(['validate', '--format', 'github', 'examples/invalid/bad-unit.yaml']);
  t.equal(gh.code, 1);
  t.match(
    gh.stdout,
    /^::error file=examples\/invalid\/bad-unit\.yaml,line=12,col=9,title=.*::spec\.descriptors\[0\]/,
  );

  const usage = await runBin(['validate']);
  t.equal(usage.code, 2);
  t.match(usage.stderr, /no files or folders given/);
  const missing = await runBin(['validate', 'no/such/file.yaml']);
  t.equal(missing.code, 2);
  t.match(missing.stderr, /no such file/);
});

const rlc = (name: string, spec: string, extra = '') => `apiVersion: ratelimit.envoyproxy.io/v1alpha1
kind: RateLimitConfig
metadata:
  name: ${name}${extra}
spec:
${spec}`;

t.test(
  'manifests across files: the operator domain rule (DomainConflict, DescriptorConflict, merge)',
  async (t) => {
    const tmp = tempFiles({
      'a/checkout.yaml': rlc(
        'checkout',
        `  domain: checkout
  descriptors:
    - key: user
      rate_limit: { unit: minute, requests_per_unit: 3 }
`,
      ),
      'b/checkout-copy.yaml': rlc(
        'checkout-copy',
        `  domain: checkout
  descriptors:
    - key: path
      rate_limit: { unit: minute, requests_per_unit: 3 }
`,
      ),
      'c/shared.yaml': `${rlc(
        'shared-a',
        `  domain: shared
  mergeDomain: true
  descriptors:
    - key: path
      value: /a
      rate_limit: { unit: second, requests_per_unit: 1 }
`,
      )}---
# a Deployment in the same stream is not ours: skipped
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
---
${rlc(
  'shared-b',
  `  domain: shared
  mergeDomain: true
  descriptors:
    - key: path
      value: /b
      rate_limit: { unit: second, requests_per_unit: 1 }
    - key: path
      value: /a
      rate_limit: { unit: second, requests_per_unit: 2 }
`,
)}---
${rlc(
  'shared-c',
  `  domain: shared
  mergeDomain: true
  descriptors:
    - key: path
      value: /c
      rate_limit: { unit: second, requests_per_unit: 1 }
`,
)}`,
    });
    t.teardown(tmp.remove);
    const r = await runInProcess(['validate', '--format', 'json', tmp.dir]);
    t.equal(r.code, 1);
    const out = JSON.parse(r.stdout) as { problems: JsonProblem[]; skipped: number; domains: string[] };
    t.equal(out.skipped, 1, 'the Deployment is skipped');
    const byFile = (f: string) => out.problems.filter((p) => p.file === tmp.path(f));
    t.same(byFile('a/checkout.yaml'), [], 'default/checkout sorts first: it owns the domain');
    t.match(byFile('b/checkout-copy.yaml'), [
      {
        field: 'spec.domain',
        line: 6,
        message:
          'DomainConflict: domain "checkout" belongs to default/checkout (the oldest resource claiming it); to share a domain both must set spec.mergeDomain: true',
      },
    ]);
    t.match(byFile('c/shared.yaml'), [
      {
        document: 3,
        field: 'spec.descriptors[1]',
        line: 30,
        message: `DescriptorConflict: descriptor 'path_/a' of shared domain "shared" is already defined by default/shared-a`,
      },
    ]);
    t.same(out.domains.sort(), ['checkout', 'shared']);

    // What is served for the shared domain: shared-a and shared-c merged, shared-b left out whole.
    const ok = await runInProcess([
      'explain',
      '--config',
      tmp.path('c/shared.yaml'),
      '--domain',
      'shared',
      '--descriptor',
      'path=/c',
      '--descriptor',
      'path=/b',
    ]);
    t.equal(ok.code, 2, 'explain refuses a config set with errors');
    t.match(ok.stderr, /DescriptorConflict/);
  },
);

t.test(
  'plain files across a folder: duplicate domain unless MERGE_DOMAIN_CONFIG, duplicate keys when merged',
  async (t) => {
    const tmp = tempFiles({
      'one.yaml':
        'domain: d\ndescriptors:\n  - key: a\n    rate_limit: { unit: second, requests_per_unit: 1 }\n',
      'two.yaml':
        'domain: d\ndescriptors:\n  - key: b\n    rate_limit: { unit: second, requests_per_unit: 1 }\n',
      'three.yaml':
        'domain: d\ndescriptors:\n  - key: c\n    rate_limit: { unit: second, requests_per_unit: 1 }\n  - key: a\n    rate_limit: { unit: minute, requests_per_unit: 1 }\n',
    });
    t.teardown(tmp.remove);
    const strict = await runInProcess(['validate', '--format', 'annotations', tmp.dir]);
    t.equal(strict.code, 1);
    t.equal(
      strict.stdout,
      `${tmp.path('three.yaml')}:1:1: domain: duplicate domain 'd' in config file; first defined in ${tmp.path('one.yaml')}\n` +
        `${tmp.path('two.yaml')}:1:1: domain: duplicate domain 'd' in config file; first defined in ${tmp.path('one.yaml')}\n`,
    );
    const merged = await runInProcess([
      'validate',
      '--format',
      'annotations',
      '--merge-domain-config',
      tmp.dir,
    ]);
    t.equal(merged.code, 1);
    t.equal(
      merged.stdout,
      `${tmp.path('three.yaml')}:5:5: descriptors[1]: duplicate descriptor composite key 'd.a'\n`,
    );
    // The environment variable the service reads says the same.
    const byEnv = await runInProcess(['validate', tmp.path('one.yaml'), tmp.path('two.yaml')], {
      MERGE_DOMAIN_CONFIG: 'true',
    });
    t.equal(byEnv.code, 0, byEnv.stdout);
  },
);

t.test(
  'YAML errors, later documents of a plain file and empty files are reported with their positions',
  async (t) => {
    const tmp = tempFiles({
      'syntax.yaml': 'domain: d\ndescriptors:\n  - key: a\n    rate_limit: [1, 2\n',
      'two-docs.yaml': 'domain: d1\n---\ndomain: d2\n',
      'empty.yaml': '# nothing\n',
      'float.yaml':
        'domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      requests_per_unit: 1.5\n',
    });
    t.teardown(tmp.remove);
    const r = await runInProcess(['validate', '--format', 'json', tmp.dir]);
    t.equal(r.code, 1);
    const out = JSON.parse(r.stdout) as { problems: JsonProblem[] };
    const of = (f: string) => out.problems.filter((p) => p.file === tmp.path(f));
    t.match(of('syntax.yaml'), [
      { document: 1, line: 5, message: /^error loading config file: yaml: line 5: / },
    ]);
    t.match(of('two-docs.yaml'), [
      { document: 2, line: 3, message: /reads only the first YAML document of a file/ },
    ]);
    t.match(of('empty.yaml'), [
      { document: 1, field: 'domain', message: 'config file cannot have empty domain' },
    ]);
    t.match(of('float.yaml'), [
      { field: 'descriptors[0].rate_limit.requests_per_unit', line: 6, message: 'error checking config' },
    ]);
  },
);

t.test(
  'examples/invalid holds only YAML files the table names (new files must be added above)',
  async (t) => {
    const top = readdirSync(ex('invalid')).filter((f) => f.endsWith('.yaml'));
    for (const f of top) t.ok(INVALID[f], f);
  },
);

t.test(
  'a domain ambiguous for rate limit quota buckets: a warning naming both paths, an error with --rlqs',
  async (t) => {
    const tmp = tempFiles({
      'amb.yaml': `domain: amb
descriptors:
  - key: a
    descriptors:
      - key: b
        rate_limit: { unit: minute, requests_per_unit: 3 }
  - key: b
    descriptors:
      - key: a
        rate_limit: { unit: minute, requests_per_unit: 5 }
`,
      'fine.yaml': `domain: fine
descriptors:
  - key: a
    descriptors:
      - key: b
        rate_limit: { unit: minute, requests_per_unit: 3 }
`,
    });
    t.teardown(() => tmp.remove());
    const plain = await runInProcess(['validate', '--format', 'json', tmp.dir]);
    t.equal(plain.code, 0, 'valid for the service without RLQS');
    const out = JSON.parse(plain.stdout) as { problems: JsonProblem[] };
    t.same(
      out.problems.map((p) => `${p.severity} ${p.file.endsWith('amb.yaml')} ${p.field} ${p.line}`),
      ['warning true descriptors[0] 3'],
    );
    t.match(
      out.problems[0]!.message,
      /domain amb: ambiguous for rate limit quota buckets: the paths a -> b and b -> a/,
    );
    t.match(out.problems[0]!.message, /RLQS_ENABLED=true refuses/);
    const strict = await runInProcess(['validate', '--rlqs', tmp.dir]);
    t.equal(strict.code, 1, 'an error with --rlqs');
    t.match(strict.stdout, /invalid: 1 error\(s\)/);
    const fine = await runInProcess(['validate', '--rlqs', tmp.path('fine.yaml')]);
    t.equal(fine.code, 0, fine.stdout);
    t.match(fine.stdout, /valid: 0 error\(s\), 0 warning\(s\)/);
  },
);
