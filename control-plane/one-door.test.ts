// The standalone control plane accepts exactly what `ratelimit-config validate` accepts: every example
// (valid and invalid, plain files and RateLimitConfig resources, the domain rule across resources), and
// it says `ready` only once its folder's config has loaded.
import t from 'tap';
import { spawn } from 'node:child_process';
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync as readFile,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { runInProcess, REPO_ROOT } from '../cli/ratelimit-config/testing.js';
import { InMemorySnapshotCache } from './cache.js';
import { DirectoryConfigSource } from './file-source.js';

const EX = join(REPO_ROOT, 'examples');
const readFileSync = (p: string) => readFile(p, 'utf8');
const yamlIn = (d: string) =>
  readdirSync(d)
    .filter((f) => f.endsWith('.yaml'))
    .map((f) => join(d, f));

/** The control plane's verdict on a folder holding exactly these files (as --check reads it). */
async function controlPlaneAccepts(files: Record<string, string>): Promise<{ ok: boolean; error?: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'rl-one-door-'));
  try {
    for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
    const source = new DirectoryConfigSource({ dir, cache: new InMemorySnapshotCache(), rereadAttempts: 0 });
    let error: string | undefined;
    source.on('rejected', (e) => (error = e.error));
    return { ok: (await source.rescan()).length === 0, error };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function validateAccepts(files: Record<string, string>): Promise<{ ok: boolean; out: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'rl-one-door-v-'));
  try {
    for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
    const r = await runInProcess(['validate', dir]);
    return { ok: r.code === 0, out: r.stdout + r.stderr };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const manifest = (name: string, created: string, domain: string, merge: boolean, key: string) =>
  `apiVersion: ratelimit.envoyproxy.io/v1alpha1
kind: RateLimitConfig
metadata: { name: ${name}, namespace: default, creationTimestamp: "${created}" }
spec:
  domain: ${domain}
${merge ? '  mergeDomain: true\n' : ''}  descriptors:
    - key: ${key}
      rate_limit: { unit: second, requests_per_unit: 1 }
`;

t.test('every example: the control plane and validate give the same verdict', async (t) => {
  const cases: [string, Record<string, string>][] = [];
  for (const f of [
    ...yamlIn(join(EX, 'crds')),
    ...yamlIn(join(EX, 'config')),
    ...yamlIn(join(EX, 'invalid')),
    ...yamlIn(join(EX, 'invalid', 'operator')),
  ]) {
    cases.push([f.slice(EX.length + 1), { [basename(f)]: readFileSync(f) }]);
  }
  cases.push([
    'examples/crds as one folder',
    Object.fromEntries(yamlIn(join(EX, 'crds')).map((f) => [basename(f), readFileSync(f)])),
  ]);
  cases.push([
    'two resources claim one domain without mergeDomain',
    {
      'a.yaml': manifest('a', '2024-01-01T00:00:00Z', 'shop', false, 'x'),
      'b.yaml': manifest('b', '2024-01-02T00:00:00Z', 'shop', false, 'y'),
    },
  ]);
  cases.push([
    'two resources merge one domain',
    {
      'a.yaml': manifest('a', '2024-01-01T00:00:00Z', 'shop', true, 'x'),
      'b.yaml': manifest('b', '2024-01-02T00:00:00Z', 'shop', true, 'y'),
    },
  ]);
  cases.push([
    'merged resources repeat a top-level key',
    {
      'a.yaml': manifest('a', '2024-01-01T00:00:00Z', 'shop', true, 'x'),
      'b.yaml': manifest('b', '2024-01-02T00:00:00Z', 'shop', true, 'x'),
    },
  ]);
  let accepted = 0;
  for (const [name, files] of cases) {
    const v = await validateAccepts(files);
    const cp = await controlPlaneAccepts(files);
    t.equal(cp.ok, v.ok, `${name}: validate ${v.ok ? 'accepts' : 'refuses'}`, {
      validate: v.out,
      cp: cp.error,
    });
    if (v.ok) accepted++;
  }
  t.ok(accepted >= 12, `both accept the valid examples (${accepted} of ${cases.length} cases)`);
  t.ok(cases.length - accepted >= 15, 'both refuse the invalid ones');
});

t.test('ratelimit-control-plane says ready only once its folder has loaded', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'rl-one-door-ready-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  mkdirSync(join(dir, 'cfg'));
  // The merge example alone: refused before the control plane read resources as validate does.
  writeFileSync(join(dir, 'cfg', 'bad.yaml'), 'domain: ""\n');
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      'control-plane/main.ts',
      '--dir',
      join(dir, 'cfg'),
      '--listen',
      '127.0.0.1:0',
      '--rescan-interval',
      '200',
    ],
    { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  t.teardown(() => child.kill('SIGTERM'));
  let logs = '';
  child.stdout.on('data', (d) => (logs += d));
  child.stderr.on('data', (d) => (logs += d));
  const waitFor = async (re: RegExp, what: string) => {
    const deadline = Date.now() + 60_000;
    while (!re.test(logs)) {
      if (Date.now() > deadline || child.exitCode !== null) throw new Error(`no ${what}: ${logs}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  await waitFor(/serving nothing until/, 'waiting line');
  t.notMatch(logs, /ratelimit-control-plane ready/, 'not ready with an invalid folder');
  rmSync(join(dir, 'cfg', 'bad.yaml'));
  writeFileSync(join(dir, 'cfg', 'merge-domain.yaml'), readFileSync(join(EX, 'crds', 'merge-domain.yaml')));
  await waitFor(/ratelimit-control-plane ready/, 'ready line');
  t.match(logs, /config loaded/, 'ready follows the first good load');
  t.ok(logs.indexOf('config loaded') < logs.indexOf('ratelimit-control-plane ready'), 'loaded, then ready');
});

t.test(
  'one error format: validate, diff and --check print the same line for the same bad file',
  async (t) => {
    const run = (args: string[]) =>
      new Promise<{ code: number | null; stderr: string }>((resolve) => {
        const child = spawn(process.execPath, ['--import', 'tsx', 'control-plane/main.ts', ...args], {
          cwd: REPO_ROOT,
          stdio: ['ignore', 'ignore', 'pipe'],
        });
        let stderr = '';
        child.stderr.on('data', (d) => (stderr += d));
        child.on('exit', (code) => resolve({ code, stderr }));
      });
    for (const [name, expected] of [
      // A RateLimitConfig resource and a plain config file: the path in the document as the file has it.
      [
        'bad-unit.yaml',
        /^bad-unit\.yaml:12:9: spec\.descriptors\[0\]\.rate_limit\.unit: invalid rate limit unit 'fortnight' \(one of: second, minute, hour, day, week, month, year\)$/,
      ],
      ['operator/nested-unlimited-with-unit.yaml', /^nested-unlimited-with-unit\.yaml:\d+:\d+: \S+: .+$/],
    ] as const) {
      const dir = mkdtempSync(join(tmpdir(), 'rl-one-format-'));
      t.teardown(() => rmSync(dir, { recursive: true, force: true }));
      const file = join(dir, basename(name));
      writeFileSync(file, readFileSync(join(EX, 'invalid', name)));
      const errorLines = (text: string) =>
        text
          .split('\n')
          .filter((l) => l.startsWith(`${file}:`))
          .map((l) => l.slice(dir.length + 1));
      const validate = await runInProcess(['validate', dir]);
      t.equal(validate.code, 1, `${name}: validate refuses it`);
      const lines = errorLines(validate.stdout);
      t.equal(lines.length, 1, `${name}: one problem`);
      t.match(lines[0], expected, `${name}: file:line:col: path: message`);
      const diff = await runInProcess(['diff', join(EX, 'crds'), dir]);
      t.equal(diff.code, 2, `${name}: diff refuses it`);
      t.same(errorLines(diff.stderr), lines, `${name}: diff prints the same line`);
      const check = await run(['--check', '--dir', dir]);
      t.equal(check.code, 1, `${name}: --check refuses it`);
      t.same(errorLines(check.stderr), lines, `${name}: --check prints the same line`);
    }
  },
);
