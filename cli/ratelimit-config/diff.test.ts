import t from 'tap';
import type { Change } from './diff.js';
import { runBin, runInProcess, tempFiles } from './testing.js';

const BASE = `domain: d
descriptors:
  - key: a
    rate_limit: { unit: minute, requests_per_unit: 10 }
  - key: b
    value: x
    rate_limit: { unit: second, requests_per_unit: 5 }
  - key: c
    shadow_mode: true
    rate_limit: { unit: hour, requests_per_unit: 100 }
  - key: path
    value: /api
    descriptors:
      - key: user
        rate_limit: { unit: second, requests_per_unit: 1 }
  - key: free
    rate_limit: { unlimited: true }
`;

async function diff(before: string, after: string): Promise<{ code: number; changes: Change[] }> {
  const tmp = tempFiles({ 'old/c.yaml': before, 'new/c.yaml': after });
  try {
    const r = await runInProcess(['diff', '--format', 'json', tmp.path('old'), tmp.path('new')]);
    const changes = r.code === 2 ? [] : (JSON.parse(r.stdout) as { changes: Change[] }).changes;
    return { code: r.code, changes };
  } finally {
    tmp.remove();
  }
}

const edit = (from: string, to: string) => BASE.replace(from, to);

t.test('no semantic change: reordering and comments are not changes (exit 0)', async (t) => {
  const reordered = `# a comment
domain: d
descriptors:
  - key: free
    rate_limit: { unlimited: true }
  - key: path
    value: /api
    descriptors:
      - key: user
        rate_limit: { requests_per_unit: 1, unit: SECOND }
  - key: c
    rate_limit: { unit: hour, requests_per_unit: 100 }
    shadow_mode: true
  - key: b
    value: x
    rate_limit: { unit: second, requests_per_unit: 5 }
  - key: a
    rate_limit: { unit: minute, requests_per_unit: 10 }
`;
  t.same(await diff(BASE, reordered), { code: 0, changes: [] });
});

const CASES: { name: string; after: string; want: Partial<Change>[] }[] = [
  {
    name: 'raised',
    after: edit('requests_per_unit: 10 }', 'requests_per_unit: 20 }'),
    want: [{ kind: 'raised', descriptor: 'a', before: '10 per minute', after: '20 per minute' }],
  },
  {
    name: 'lowered by a longer window at the same count',
    after: edit('{ unit: minute, requests_per_unit: 10 }', '{ unit: hour, requests_per_unit: 10 }'),
    want: [{ kind: 'lowered', descriptor: 'a', before: '10 per minute', after: '10 per hour' }],
  },
  {
    name: 'window changed at the same rate',
    after: edit('{ unit: minute, requests_per_unit: 10 }', '{ unit: hour, requests_per_unit: 600 }'),
    want: [{ kind: 'window changed', descriptor: 'a' }],
  },
  {
    name: 'made shadow',
    after: edit('  - key: a\n', '  - key: a\n    shadow_mode: true\n'),
    want: [{ kind: 'made shadow', descriptor: 'a', after: '10 per minute (shadow)' }],
  },
  {
    name: 'unshadowed',
    after: edit('    shadow_mode: true\n', ''),
    want: [{ kind: 'unshadowed', descriptor: 'c', before: '100 per hour (shadow)', after: '100 per hour' }],
  },
  {
    name: 'made unlimited',
    after: edit('{ unit: second, requests_per_unit: 5 }', '{ unlimited: true }'),
    want: [{ kind: 'made unlimited', descriptor: 'b=x', before: '5 per second', after: 'unlimited' }],
  },
  {
    name: 'no longer unlimited',
    after: edit('{ unlimited: true }', '{ unit: day, requests_per_unit: 1 }'),
    want: [{ kind: 'no longer unlimited', descriptor: 'free', after: '1 per day' }],
  },
  {
    name: 'nested limit removed, entry kept without rate_limit (exempted)',
    after: edit(
      '      - key: user\n        rate_limit: { unit: second, requests_per_unit: 1 }\n',
      '      - key: user\n',
    ),
    want: [{ kind: 'exempted', descriptor: 'path=/api > user', before: '1 per second', after: 'no limit' }],
  },
  {
    name: 'added and removed',
    after: edit('  - key: b\n    value: x\n', '  - key: b\n    value: y\n'),
    want: [
      { kind: 'removed', descriptor: 'b=x', before: '5 per second', after: '—' },
      { kind: 'added', descriptor: 'b=y', before: '—', after: '5 per second' },
    ],
  },
  {
    name: 'other rate_limit fields (name, replaces) are changes',
    after: edit(
      '{ unit: minute, requests_per_unit: 10 }',
      '{ unit: minute, requests_per_unit: 10, name: std }',
    ),
    want: [{ kind: 'changed', descriptor: 'a', before: '—', after: 'name="std"' }],
  },
];

for (const c of CASES) {
  t.test(`${c.name} (exit 1)`, async (t) => {
    const r = await diff(BASE, c.after);
    t.equal(r.code, 1);
    t.match(r.changes, c.want);
    t.equal(r.changes.length, c.want.length, JSON.stringify(r.changes));
  });
}

t.test('a whole domain added or removed', async (t) => {
  const other =
    'domain: e\ndescriptors:\n  - key: k\n    rate_limit: { unit: second, requests_per_unit: 1 }\n';
  const tmp = tempFiles({ 'old/c.yaml': BASE, 'new/c.yaml': BASE, 'new/e.yaml': other });
  t.teardown(tmp.remove);
  const r = await runInProcess(['diff', '--format', 'json', tmp.path('old'), tmp.path('new')]);
  t.equal(r.code, 1);
  t.match(JSON.parse(r.stdout), {
    changes: [{ kind: 'added', domain: 'e', descriptor: 'k', after: '1 per second' }],
  });
  const back = await runInProcess(['diff', '--format', 'json', tmp.path('new'), tmp.path('old')]);
  t.match(JSON.parse(back.stdout), { changes: [{ kind: 'removed', domain: 'e', descriptor: 'k' }] });
});

t.test(
  'the executable: markdown for a pull request, exit 1 on change, 0 on none, 2 on an invalid side',
  async (t) => {
    const tmp = tempFiles({
      'old.yaml': BASE,
      'new.yaml': edit('requests_per_unit: 10 }', 'requests_per_unit: 5 }'),
      'bad.yaml':
        'domain: d\ndescriptors:\n  - key: a\n    rate_limit: { unit: fortnight, requests_per_unit: 1 }\n',
    });
    t.teardown(tmp.remove);
    const changed = await runBin(['diff', tmp.path('old.yaml'), tmp.path('new.yaml')]);
    t.equal(changed.code, 1, changed.stderr);
    t.equal(
      changed.stdout,
      '**Rate limits:** 1 change (1 lowered).\n\n' +
        '| change | domain | descriptor | before | after | where |\n' +
        '|---|---|---|---|---|---|\n' +
        `| lowered | d | \`a\` | 10 per minute | 5 per minute | ${tmp.path('new.yaml')}:3 |\n`,
    );
    const same = await runBin(['diff', tmp.path('old.yaml'), tmp.path('old.yaml')]);
    t.equal(same.code, 0);
    t.equal(same.stdout, '**Rate limits:** no changes.\n');
    const bad = await runBin(['diff', tmp.path('old.yaml'), tmp.path('bad.yaml')]);
    t.equal(bad.code, 2);
    t.match(
      bad.stderr,
      /bad\.yaml:4:\d+: descriptors\[0\]\.rate_limit\.unit: invalid rate limit unit 'fortnight'/,
    );
  },
);
