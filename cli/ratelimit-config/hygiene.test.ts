// The command lines behave like a well-made CLI: per-command --help with examples, --version, "did you
// mean" for typos, validate failing closed on no input and reading `kind: List`, one-line errors with no
// library internals, a Redis that cannot be reached ending the command within --timeout, and
// `ratelimit --help` answering without starting the service. The built executables (bin/*.js) are run.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import t from 'tap';
import { ensureBuilt } from '../../harness/dist.js';
import { freePort, LOOPBACK } from '../../harness/net.js';
import { COMMANDS } from './help.js';
import { REPO_ROOT, tempFiles, type RunResult } from './testing.js';

const VERSION = (JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string })
  .version;

/** A built bin as a subprocess, with its wall time. */
function runBuilt(
  bin: 'ratelimit-config' | 'ratelimit',
  args: string[],
  env: Record<string, string> = {},
): Promise<RunResult & { ms: number }> {
  ensureBuilt();
  const started = Date.now();
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [join(REPO_ROOT, 'bin', `${bin}.js`), ...args],
      {
        cwd: REPO_ROOT,
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
        timeout: 60_000,
        killSignal: 'SIGKILL',
      },
      (err, stdout, stderr) => {
        const code = err === null ? 0 : typeof err.code === 'number' ? err.code : -1;
        resolve({ code, stdout, stderr, ms: Date.now() - started });
      },
    );
  });
}

t.test('every command has --help with examples (exit 0), and --version', async (t) => {
  for (const command of COMMANDS) {
    for (const flag of ['--help', '-h']) {
      const r = await runBuilt('ratelimit-config', [command, flag]);
      t.equal(r.code, 0, `${command} ${flag}: ${r.stderr}`);
      t.match(r.stdout, new RegExp(`^usage: ratelimit-config ${command}`), `${command} ${flag}`);
      t.match(r.stdout, /\nexamples:\n {2}(\S.*\n)+/, `${command} ${flag} has examples`);
    }
  }
  const help = await runBuilt('ratelimit-config', ['help', 'convert']);
  t.equal(help.code, 0);
  t.match(help.stdout, /^usage: ratelimit-config convert/);
  const top = await runBuilt('ratelimit-config', ['--help']);
  t.equal(top.code, 0);
  for (const command of COMMANDS)
    t.match(top.stdout, new RegExp(`\\n {2}${command} `), `--help lists ${command}`);
  const v = await runBuilt('ratelimit-config', ['--version']);
  t.equal(v.code, 0);
  t.equal(v.stdout, `ratelimit-config ${VERSION}\n`);
});

t.test('typos get a suggestion (edit distance at most 2), in one message', async (t) => {
  const cmd = await runBuilt('ratelimit-config', ['valdiate', 'examples/config']);
  t.equal(cmd.code, 2);
  t.equal(
    cmd.stderr,
    "ratelimit-config: unknown command 'valdiate'; did you mean validate?\nSee 'ratelimit-config --help' for usage and examples.\n",
  );
  const far = await runBuilt('ratelimit-config', ['frobnicate']);
  t.equal(far.code, 2);
  t.notMatch(far.stderr, /did you mean/, 'nothing close: no suggestion');
  const opt = await runBuilt('ratelimit-config', ['validate', '--namspace', 'x', 'examples/config']);
  t.equal(opt.code, 2);
  t.match(opt.stderr, /^ratelimit-config validate: unknown option --namspace; did you mean --namespace\?\n/);
  t.notMatch(opt.stderr, /To specify a positional argument/, "no parser's internal advice");
  const missing = await runBuilt('ratelimit-config', ['validate', 'no/such/dir']);
  t.equal(missing.code, 2);
  t.equal(missing.stderr, 'ratelimit-config validate: no/such/dir: no such file or directory\n');
});

t.test('validate fails closed when there is nothing to check', async (t) => {
  const tmp = tempFiles({
    'empty/.keep': '',
    'notes/readme.txt': 'no yaml here',
    'other/deploy.yaml': 'apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\n',
  });
  t.teardown(() => tmp.remove());
  const empty = await runBuilt('ratelimit-config', ['validate', tmp.path('empty')]);
  t.equal(empty.code, 1);
  t.match(empty.stderr, /no YAML file \(\*\.yaml, \*\.yml\) in .*empty/);
  const notes = await runBuilt('ratelimit-config', ['validate', tmp.path('notes')]);
  t.equal(notes.code, 1);
  t.match(notes.stderr, /no YAML file/);
  const other = await runBuilt('ratelimit-config', ['validate', tmp.path('other')]);
  t.equal(other.code, 1);
  t.match(
    other.stderr,
    /no ratelimit config or RateLimitConfig in .*other \(1 document\(s\), all empty or of other kinds\)/,
  );
  const good = await runBuilt('ratelimit-config', ['validate', tmp.path('other'), 'examples/config']);
  t.equal(good.code, 0, 'a config next to other kinds is fine');
});

const item = (
  name: string,
  created: string,
  domain: string,
  unit = 'second',
) => `  - apiVersion: ratelimit.envoyproxy.io/v1alpha1
    kind: RateLimitConfig
    metadata:
      name: ${name}
      namespace: team-a
      creationTimestamp: "${created}"
      resourceVersion: "1"
    spec:
      domain: ${domain}
      descriptors:
        - key: user
          rate_limit:
            unit: ${unit}
            requests_per_unit: 10
    status:
      conditions: []
`;

t.test('validate reads kind: List (kubectl get rlc -A -o yaml), each item checked', async (t) => {
  const list = (items: string) =>
    `apiVersion: v1\nkind: List\nmetadata:\n  resourceVersion: ""\nitems:\n${items}`;
  const tmp = tempFiles({
    'good.yaml': list(
      item('a', '2024-01-01T00:00:00Z', 'one') +
        item('b', '2024-01-02T00:00:00Z', 'two') +
        '  - apiVersion: v1\n    kind: ConfigMap\n    metadata:\n      name: c\n',
    ),
    'bad.yaml': list(
      item('a', '2024-01-01T00:00:00Z', 'one') + item('b', '2024-01-02T00:00:00Z', 'two', 'fortnight'),
    ),
    'conflict.yaml': list(
      item('new', '2024-02-01T00:00:00Z', 'one') + item('old', '2024-01-01T00:00:00Z', 'one'),
    ),
  });
  t.teardown(() => tmp.remove());
  const good = await runBuilt('ratelimit-config', ['validate', tmp.path('good.yaml')]);
  t.equal(good.code, 0, good.stdout);
  t.match(
    good.stdout,
    /valid: 0 error\(s\), 0 warning\(s\) in 3 document\(s\) \(1 skipped: other kinds or empty\); domains: one, two/,
  );
  const bad = await runBuilt('ratelimit-config', [
    'validate',
    '--format',
    'annotations',
    tmp.path('bad.yaml'),
  ]);
  t.equal(bad.code, 1);
  // line 34: the second item's `unit:` (5 lines of header, 16 per item, the 13th)
  t.equal(
    bad.stdout,
    `${tmp.path('bad.yaml')}:34:13: items[1].spec.descriptors[0].rate_limit.unit: invalid rate limit unit 'fortnight' (one of: second, minute, hour, day, week, month, year)\n`,
  );
  const conflict = await runBuilt('ratelimit-config', [
    'validate',
    '--format',
    'annotations',
    tmp.path('conflict.yaml'),
  ]);
  t.equal(conflict.code, 1);
  t.match(
    conflict.stdout,
    /items\[0\]\.spec\.domain: DomainConflict: .*team-a\/old/,
    'the newer item loses, naming the owner',
  );
});

t.test('counters: an unreachable Redis is one line, within --timeout', async (t) => {
  const base = ['counters', 'get', '--config', 'examples/config', '--domain', 'example'];
  const args = [...base, '--descriptor', 'remote_address=10.1.2.3', '--timeout', '2'];
  // a black hole: accepts the connection, never answers
  const held: Socket[] = [];
  const hole = createServer((s) => held.push(s));
  await new Promise<void>((r) => hole.listen(0, LOOPBACK, r));
  t.teardown(() => {
    for (const s of held) s.destroy();
    hole.close();
  });
  const holePort = (hole.address() as { port: number }).port;
  const closedPort = await freePort();
  // What starting the command costs on this machine right now (`explain` loads the same modules and
  // config and needs no Redis), so the bound below is on the wait itself, whatever the machine's load.
  const start = await runBuilt('ratelimit-config', [
    'explain',
    '--config',
    'examples/config',
    '--domain',
    'example',
    '--descriptor',
    'remote_address=10.1.2.3',
  ]);
  const slack = 2 * start.ms + 1500;
  for (const [what, port] of [
    ['a closed port', closedPort],
    ['a listener that never answers', holePort],
  ] as const) {
    const r = await runBuilt('ratelimit-config', args, {
      REDIS_SOCKET_TYPE: 'tcp',
      REDIS_URL: `${LOOPBACK}:${port}`,
    });
    t.equal(r.code, 2, what);
    t.match(
      r.stderr,
      new RegExp(
        `^ratelimit-config counters: cannot reach Redis at 127\\.0\\.0\\.1:${port} within 2 s( \\([a-z ]+\\))?\\n$`,
      ),
      `${what}: one line`,
    );
    t.notMatch(r.stderr, /maxRetriesPerRequest|ioredis|\n\s+at /, `${what}: no library internals`);
    t.equal(r.stdout, '');
    t.ok(r.ms < 2000 + slack, `${what}: ended after ${r.ms} ms (--timeout 2; starting takes ${start.ms} ms)`);
  }
  // REDIS_TIMEOUT longer than --timeout does not stretch it
  const long = await runBuilt('ratelimit-config', args, {
    REDIS_SOCKET_TYPE: 'tcp',
    REDIS_URL: `${LOOPBACK}:${holePort}`,
    REDIS_TIMEOUT: '30s',
  });
  t.equal(long.code, 2);
  t.ok(long.ms < 2000 + slack, `REDIS_TIMEOUT=30s: ended after ${long.ms} ms`);
});

t.test('ratelimit --help and --version answer without starting the service', async (t) => {
  const help = await runBuilt('ratelimit', ['--help'], { PORT: '1', GRPC_PORT: '1', DEBUG_PORT: '1' });
  t.equal(help.code, 0, help.stderr);
  t.match(help.stdout, /^usage: ratelimit \[--help \| --version\]/);
  t.match(help.stdout, /docs\/settings\.md/);
  for (const [name, def] of [
    ['GRPC_PORT', '8081'],
    ['PORT', '8080'],
    ['REDIS_URL', '/var/run/nutcracker/ratelimit.sock'],
    ['REDIS_TIMEOUT', '10s'],
    ['LOG_LEVEL', 'WARN'],
  ]) {
    t.match(help.stdout, new RegExp(`\\n {2}${name} +${def.replace(/[/.]/g, '\\$&')}\\n`), `${name} ${def}`);
  }
  t.equal(help.stderr, '', 'nothing logged: the service did not start');
  const names = [...help.stdout.matchAll(/^ {2}([A-Za-z][A-Za-z0-9_]*) /gm)].map((m) => m[1]!);
  t.ok(names.length > 50, `${names.length} settings listed`);
  const h = await runBuilt('ratelimit', ['-h']);
  t.equal(h.stdout, help.stdout);
  const v = await runBuilt('ratelimit', ['--version']);
  t.equal(v.code, 0);
  t.equal(v.stdout, `ratelimit ${VERSION}\n`);
});
