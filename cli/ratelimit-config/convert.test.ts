// ratelimit-config convert: plain files in, RateLimitConfig manifests out, checked by running the real
// executable and reading its output back with `validate` and the service's validator.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { parseAllDocuments } from 'yaml';
import { checkDocument } from '../../ratelimit/config/index.js';
import { resourceName } from './convert.js';
import { readSources } from '../../control-plane/config-set/index.js';
import { REPO_ROOT, runBin, runInProcess, tempFiles } from './testing.js';

/** domain → { domain, descriptors } as the service's validator reads every document under the paths. */
function parsed(paths: string[]): Map<string, unknown> {
  const out = new Map<string, unknown>();
  for (const src of readSources(paths)) {
    if (src.kind !== 'config' && src.kind !== 'manifest') continue;
    const doc = checkDocument(src.file, src.document).document!;
    out.set(doc.domain, { domain: doc.domain, descriptors: doc.descriptors ?? [] });
  }
  return out;
}

t.test('examples/config converts to manifests that validate and describe the same rules', async (t) => {
  const r = await runBin(['convert', '--namespace', 'rl', 'examples/config']);
  t.equal(r.code, 0, r.stderr);
  const docs = parseAllDocuments(r.stdout).map((d) => d.toJSON());
  t.equal(docs.length, 1, 'one resource per domain');
  t.match(docs[0], {
    apiVersion: 'ratelimit.envoyproxy.io/v1alpha1',
    kind: 'RateLimitConfig',
    metadata: { name: 'example', namespace: 'rl' },
    spec: { domain: 'example' },
  });
  t.match(r.stdout, /# Every client address gets its own counter/, 'comments are kept');
  const tmp = tempFiles({ 'out/example.yaml': r.stdout });
  t.teardown(() => tmp.remove());
  const v = await runBin(['validate', tmp.path('out')]);
  t.equal(v.code, 0, v.stdout);
  t.match(v.stdout, /valid: 0 error\(s\), 0 warning\(s\) in 1 document\(s\); domains: example/);
  t.same(
    parsed([tmp.path('out')]),
    parsed([join(REPO_ROOT, 'examples/config')]),
    'same domains and descriptors',
  );
});

t.test('several files and domains, merged domains, --out and names', async (t) => {
  const tmp = tempFiles({
    'in/a.yaml':
      'domain: My_API.v1\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1}\n',
    'in/b.yaml':
      'domain: My_API.v1\ndescriptors:\n  # the b rule\n  - key: b\n    value: "on"\n    rate_limit: {unit: minute, requests_per_unit: 2}\n',
    'in/c.yml':
      'domain: other\ndescriptors:\n  - key: c\n    rate_limit: {unit: hour, requests_per_unit: 3}\n',
    'in/notes.txt': 'not yaml: skipped in a folder',
  });
  t.teardown(() => tmp.remove());
  const refused = await runBin(['convert', tmp.path('in')]);
  t.equal(
    refused.code,
    1,
    'two files of one domain without --merge-domain-config: refused as validate refuses',
  );
  t.match(refused.stderr, /duplicate domain 'My_API.v1'/);
  t.equal(refused.stdout, '', 'nothing printed');

  const r = await runBin(['convert', '--merge-domain-config', '--out', tmp.path('out'), tmp.path('in')]);
  t.equal(r.code, 0, r.stderr);
  const files = readdirSync(tmp.path('out')).sort();
  t.same(files, [`${resourceName('My_API.v1')}.yaml`, 'other.yaml']);
  const merged = readFileSync(tmp.path(`out/${resourceName('My_API.v1')}.yaml`), 'utf8');
  t.match(
    merged,
    /# the b rule\n\s+- key: b\n\s+value: "on"/,
    'a comment of a merged file is kept, a quoted value stays a string',
  );
  const v = await runBin(['validate', tmp.path('out')]);
  t.equal(v.code, 0, v.stdout);
  const expected = parsed([tmp.path('in/c.yml')]);
  expected.set('My_API.v1', {
    domain: 'My_API.v1',
    descriptors: [
      { key: 'a', rate_limit: { unit: 'second', requests_per_unit: 1 } },
      { key: 'b', value: 'on', rate_limit: { unit: 'minute', requests_per_unit: 2 } },
    ],
  });
  t.same(parsed([tmp.path('out')]), expected, 'the merged domain has the descriptors of both files');
});

t.test('resource names are DNS-1123 labels, distinct for distinct domains', async (t) => {
  const label = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
  t.equal(resourceName('example'), 'example', 'a domain that is already a label is kept');
  t.equal(resourceName('Example'), 'example', 'only the case changed: no hash');
  const odd = ['My_API.v1', 'api_v1', 'api.v1', '__', 'Ünïcode', 'x'.repeat(300), `${'y'.repeat(62)}_z`];
  const names = odd.map(resourceName);
  for (const [i, n] of names.entries()) {
    t.match(n, label, `${odd[i]} → ${n}`);
    t.ok(n.length <= 63, `${n} has at most 63 characters`);
  }
  t.equal(new Set(names).size, names.length, 'no two domains share a name');
});

t.test('input validate refuses is refused with the same message, exit 1', async (t) => {
  // bad-unit.yaml's spec as a plain file
  const tmp = tempFiles({
    'bad.yaml':
      'domain: invalid\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: fortnight\n      requests_per_unit: 10\n',
  });
  t.teardown(() => tmp.remove());
  const v = await runInProcess(['validate', tmp.path('bad.yaml')]);
  const c = await runInProcess(['convert', tmp.path('bad.yaml')]);
  t.equal(v.code, 1);
  t.equal(c.code, 1);
  const line = v.stdout.split('\n')[0]!;
  t.match(line, /descriptors\[0\]\.rate_limit\.unit: invalid rate limit unit 'fortnight'/);
  t.ok(c.stderr.split('\n').includes(line), 'the same line as validate');
  t.equal(c.stdout, '');
  const manifest = await runInProcess(['convert', join(REPO_ROOT, 'examples/crds/basic.yaml')]);
  t.equal(manifest.code, 2);
  t.match(manifest.stderr, /is a RateLimitConfig already; convert reads plain ratelimit config files/);
});
