// explain, checked against a real service process: the service counts in a real Redis, and every
// explanation must agree with the service's decision (limit, unlimited, no rule, replaced, shadow)
// and name the exact key the service incremented.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { parse, stringify } from 'yaml';
import { startRedis } from '../../harness/redis/index.js';
import type { WireDescriptorStatus } from '../../proto/index.js';
import { UNIT_SECONDS, type Unit } from '../../ratelimit/config/index.js';
import { windowStart } from '../../ratelimit/limiter/index.js';
import { startTestApp } from '../../ratelimit/test-support.js';
import type { DescriptorExplanation } from './explain.js';
import { REPO_ROOT, runBin, runInProcess } from './testing.js';

const PREFIX = 'cli_';
const specOf = (manifest: string) =>
  stringify(
    (parse(readFileSync(join(REPO_ROOT, 'examples/crds', manifest), 'utf8')) as { spec: unknown }).spec,
  );

const FILES = {
  'example.yaml': readFileSync(join(REPO_ROOT, 'examples/config/example.yaml'), 'utf8'),
  // The manifests' specs as plain files, read as a pod reads them.
  'replaces.yaml': specOf('replaces.yaml'),
  'wildcard.yaml': specOf('wildcard.yaml'),
};

const MAX_UINT32 = 4294967295;

interface Case {
  name: string;
  domain: string;
  descriptors: string[];
  /** Hits to send (the same request each time). */
  hits?: number;
}

const CASES: Case[] = [
  { name: 'key only (default value)', domain: 'example', descriptors: ['remote_address=10.0.0.1'] },
  { name: 'nested, exact then default', domain: 'example', descriptors: ['path=/api,user=bob'] },
  { name: 'nested, unlimited', domain: 'example', descriptors: ['path=/api,user=admin'] },
  { name: 'wildcard value', domain: 'example', descriptors: ['tenant=free-42'] },
  { name: 'blocked (0 per second)', domain: 'example', descriptors: ['client=banned'] },
  { name: 'shadow mode, over the limit', domain: 'example', descriptors: ['client=canary'], hits: 3 },
  { name: 'placeholder without rate_limit', domain: 'example', descriptors: ['path=/api'] },
  { name: 'no entry at level 1', domain: 'example', descriptors: ['nothing=1'] },
  { name: 'deeper than the config', domain: 'example', descriptors: ['remote_address=1,user=2'] },
  { name: 'unknown domain', domain: 'nope', descriptors: ['remote_address=1'] },
  {
    name: 'replaces across descriptors of one request',
    domain: 'replaces',
    descriptors: ['plan=gold', 'customer=premium'],
  },
  {
    name: 'share_threshold: one counter for the wildcard',
    domain: 'wildcard',
    descriptors: ['tenant=trial-7'],
  },
  { name: 'wildcard without share_threshold', domain: 'wildcard', descriptors: ['tenant=free-9'] },
  {
    name: 'several descriptors at once',
    domain: 'example',
    descriptors: ['tenant=free-1', 'client=canary', 'x=y'],
  },
];

const entriesOf = (d: string) =>
  d.split(',').map((p) => ({ key: p.slice(0, p.indexOf('=')), value: p.slice(p.indexOf('=') + 1) }));

t.test('explain agrees with the decisions of a real service counting in Redis', async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const app = await startTestApp({
    files: FILES,
    env: {
      BACKEND_TYPE: 'redis',
      REDIS_SOCKET_TYPE: 'tcp',
      REDIS_URL: redis.url,
      CACHE_KEY_PREFIX: PREFIX,
    },
  });
  t.teardown(() => app.close());
  const r = redis.client();

  for (const c of CASES) {
    // A decision and an explanation in the same window of every rule involved, so the key is the same.
    let statuses: WireDescriptorStatus[] = [];
    let explained: DescriptorExplanation[] = [];
    for (let attempt = 0; ; attempt++) {
      await r.flushall();
      const now = Math.floor(Date.now() / 1000);
      const args = [
        'explain',
        '--format',
        'json',
        '--config',
        app.configDir,
        '--domain',
        c.domain,
        '--now',
        `${now}`,
      ];
      for (const d of c.descriptors) args.push('--descriptor', d);
      const out = await runInProcess(args, { CACHE_KEY_PREFIX: PREFIX });
      t.equal(out.code, 0, out.stderr);
      explained = (JSON.parse(out.stdout) as { descriptors: DescriptorExplanation[] }).descriptors;
      for (let h = 0; h < (c.hits ?? 1); h++) {
        const res = await app.call({
          domain: c.domain,
          descriptors: c.descriptors.map((d) => ({ entries: entriesOf(d) })),
        });
        statuses = res.statuses;
      }
      const after = Math.floor(Date.now() / 1000);
      const sameWindow = explained.every(
        (x) => !x.counted || x.windowStart === windowStart(after, UNIT_SECONDS[x.rule!.unit as Unit]),
      );
      if (sameWindow) break;
      if (attempt >= 20) throw new Error('could not explain and decide within one window');
    }
    await t.test(c.name, async (t) => {
      t.equal(explained.length, c.descriptors.length);
      for (let i = 0; i < explained.length; i++) {
        const x = explained[i]!;
        const s = statuses[i]!;
        const what = `${c.descriptors[i]}: ${x.reasons.join('; ')}`;
        if (x.counted) {
          t.ok(s.currentLimit, what);
          // proto3 leaves a 0 out of the message.
          t.equal(s.currentLimit?.requestsPerUnit ?? 0, x.rule!.requestsPerUnit, what);
          t.equal(s.currentLimit?.unit, x.rule!.unit, what);
          t.equal(
            await r.get(x.cacheKey!),
            String(c.hits ?? 1),
            `${what}: the service counted under ${x.cacheKey}`,
          );
          t.ok(
            x.cacheKey!.startsWith(PREFIX + c.domain + '_'),
            'CACHE_KEY_PREFIX is read as the service reads it',
          );
          if (x.rule!.shadowMode) t.equal(s.code, 'OK', 'shadow: always OK');
          if (x.rule!.requestsPerUnit < (c.hits ?? 1) && !x.rule!.shadowMode) t.equal(s.code, 'OVER_LIMIT');
        } else if (x.rule?.unlimited) {
          t.equal(s.limitRemaining, MAX_UINT32, `${what}: unlimited`);
          t.notOk(s.currentLimit);
        } else {
          t.notOk(s.currentLimit, `${what}: the service applied no limit`);
          t.equal(s.code, 'OK');
        }
      }
      // Nothing counted that explain did not name.
      const keys = (await r.keys('*')).sort();
      t.same(keys, explained.flatMap((x) => (x.counted ? [x.cacheKey!] : [])).sort(), 'keys in Redis');
    });
  }
});

t.test('explanations say why (depth, exact, wildcard, default) and point at the file and line', async (t) => {
  const ex = join(REPO_ROOT, 'examples/config/example.yaml');
  const run = async (...d: string[]) => {
    const args = [
      'explain',
      '--format',
      'json',
      '--config',
      ex,
      '--domain',
      'example',
      '--now',
      '1700000000',
    ];
    for (const x of d) args.push('--descriptor', x);
    const r = await runInProcess(args);
    t.equal(r.code, 0, r.stderr);
    return (JSON.parse(r.stdout) as { descriptors: DescriptorExplanation[] }).descriptors;
  };
  const [nested] = await run('path=/api,user=bob');
  t.match(nested, {
    matched: true,
    counted: true,
    steps: [
      { depth: 1, how: 'exact', entry: { line: 13, field: 'descriptors[1]' } },
      { depth: 2, how: 'default', entry: { line: 16, field: 'descriptors[1].descriptors[0]' } },
    ],
    rule: {
      file: ex,
      line: 16,
      statKey: 'example.path_/api.user',
      ruleName: 'example.path=/api.user',
      requestsPerUnit: 10,
      unit: 'SECOND',
      algorithm: 'fixed_window',
      limits: [{ name: 'example.path=/api.user' }],
    },
    cacheKey: 'example_path_/api_user_bob_1700000000',
    windowStart: 1700000000,
    resetsInSeconds: 1,
  });
  const [wild] = await run('tenant=free-42');
  t.match(wild, {
    steps: [{ how: 'wildcard', entry: { value: 'free-*', line: 26 } }],
    cacheKey: 'example_tenant_free-42_1699999200',
    resetsInSeconds: 2800,
  });
  const [deep] = await run('remote_address=1,user=2');
  t.match(deep, {
    matched: false,
    reasons: [/request has 2 entries but the config under remote_address .* is only 1 level/],
  });
  const [none] = await run('path=/x');
  t.match(none, {
    matched: false,
    steps: [],
    reasons: [
      /level 1: no entry matches path=\/x; entries at this level: remote_address \(any value\), path=\/api/,
    ],
  });
  const [placeholder] = await run('path=/api');
  t.match(placeholder, { matched: false, reasons: [/has no rate_limit: it only holds nested descriptors/] });
  // The text form names the limit as headers, metadata, logs and statistics do.
  const text = await runInProcess([
    'explain',
    '--config',
    ex,
    '--domain',
    'example',
    '--descriptor',
    'path=/api,user=bob',
  ]);
  t.equal(text.code, 0, text.stderr);
  t.match(text.stdout, /\n {2}named: example\.path=\/api\.user\n/);
});

t.test('a manifest is explained as pods serve it (share_threshold travels over xDS)', async (t) => {
  const manifest = join(REPO_ROOT, 'examples/crds/wildcard.yaml');
  const r = await runBin([
    'explain',
    '--config',
    manifest,
    '--domain',
    'wildcard',
    '--descriptor',
    'tenant=trial-7',
    '--now',
    '1700000000',
  ]);
  t.equal(r.code, 0, r.stderr);
  t.match(
    r.stdout,
    /level 1: tenant=trial-7 matches tenant=trial-\* — wildcard value — .*wildcard\.yaml:15 spec\.descriptors\[1\]/,
  );
  // share_threshold travels over xDS: every trial tenant shares one counter on the pods too.
  t.match(r.stdout, /cache key: wildcard_tenant_trial-\*_1699920000 /, 'one shared counter, as pods count');
  t.match(r.stdout, /share_threshold/);
  const bad = await runBin(['explain', '--config', manifest, '--domain', 'wildcard']);
  t.equal(bad.code, 2);
  t.match(bad.stderr, /at least one --descriptor/);
});
