// Every program speaks the same way (common/program.ts): --version, "did you mean" for a misspelt option, `<program>: <message>` in one line on stderr, exit 2 for bad usage and 1 for a failure
// at run time, and one clean line for a port already in use (no stray library log line).
import t from 'tap';
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { builtBin, REPO_ROOT } from '../harness/dist.js';
import { LOOPBACK } from '../harness/net.js';

const version = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')).version;

type Program = 'ratelimit' | 'ratelimit-client' | 'ratelimit-control-plane' | 'ratelimit-operator';

function run(
  bin: Program,
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [builtBin(bin), ...args], {
      cwd: REPO_ROOT,
      env: { PATH: process.env.PATH ?? '', KUBECONFIG: '/nonexistent', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

for (const [bin, option, near] of [
  ['ratelimit', '--verison', '--version'],
  ['ratelimit-client', '-dial_strng', '--dial_string'],
  ['ratelimit-control-plane', '--lisen', '--listen'],
  ['ratelimit-operator', '--kubeconfg', '--kubeconfig'],
] as const) {
  t.test(`${bin}: --version, did you mean, exit 2 for bad usage`, async (t) => {
    const v = await run(bin, ['--version']);
    t.equal(v.code, 0);
    t.equal(v.stdout, `${bin} ${version}\n`);
    const bad = await run(bin, [option, 'x']);
    t.equal(bad.code, 2, 'bad usage: exit 2');
    const shown = bin === 'ratelimit-client' ? `-${option}` : option;
    t.equal(bad.stderr, `${bin}: unknown option '${shown}'; did you mean ${near}? (see ${bin} --help)\n`);
    const help = await run(bin, ['--help']);
    t.equal(help.code, 0, '--help: exit 0');
    t.match(help.stdout, new RegExp(`^usage: ${bin}`, 'i'), '--help prints the usage on stdout');
  });
}

t.test('ratelimit: an argument it does not take and an invalid setting are bad usage', async (t) => {
  const stray = await run('ratelimit', ['config.yaml']);
  t.equal(stray.code, 2);
  t.match(stray.stderr, /^ratelimit: Unexpected argument 'config\.yaml'.* \(see ratelimit --help\)\n$/);
  const setting = await run('ratelimit', [], { GRPC_PORT: 'abc' });
  t.equal(setting.code, 2, 'an invalid setting: exit 2');
  t.equal(
    setting.stderr,
    "ratelimit: invalid setting GRPC_PORT: invalid integer 'abc' (see ratelimit --help)\n",
  );
});

t.test('ratelimit-client: a bad value is bad usage, a failed call exit 1 in the same format', async (t) => {
  const bad = await run('ratelimit-client', ['-descriptors', 'nokey']);
  t.equal(bad.code, 2);
  t.equal(
    bad.stderr,
    "ratelimit-client: invalid descriptor entry 'nokey' (expected name=value) (see ratelimit-client --help)\n",
  );
  const closed = createServer();
  await new Promise<void>((r) => closed.listen(0, LOOPBACK, r));
  const port = (closed.address() as { port: number }).port;
  await new Promise((r) => closed.close(r));
  const failed = await run('ratelimit-client', ['-dial_string', `${LOOPBACK}:${port}`, '-domain', 'd']);
  t.equal(failed.code, 1, 'a failure at run time: exit 1');
  t.match(failed.stderr, /^ratelimit-client: request error: 14 UNAVAILABLE/);
  t.equal(failed.stderr.trim().split('\n').length, 1, 'one line');
});

t.test('ratelimit: a port in use is a fatal log line, then one clean line, and exit 1', async (t) => {
  const holder = createServer();
  await new Promise<void>((r) => holder.listen(0, LOOPBACK, r));
  t.teardown(() => holder.close());
  const port = (holder.address() as { port: number }).port;
  const r = await run('ratelimit', [], {
    BACKEND_TYPE: 'memory',
    USE_STATSD: 'false',
    RUNTIME_WATCH_ROOT: 'false',
    RUNTIME_ROOT: join(REPO_ROOT, 'examples'),
    RUNTIME_SUBDIRECTORY: 'config',
    HOST: LOOPBACK,
    PORT: '0',
    DEBUG_HOST: LOOPBACK,
    DEBUG_PORT: '0',
    GRPC_HOST: LOOPBACK,
    GRPC_PORT: String(port),
  });
  t.equal(r.code, 1, 'a failure at run time: exit 1');
  const message = `cannot listen on ${LOOPBACK}:${port}: address already in use (another process listens there)`;
  const lines = r.stderr.trim().split('\n');
  t.equal(lines.at(-1), `ratelimit: ${message}`, "the programs' line last");
  t.ok(
    lines.some((l) => l.includes('level=fatal') && l.includes(`startup failed: ${message}`)),
    'the same words in the log, for a log collector',
  );
  t.notMatch(r.stderr, /EADDRINUSE/, 'no library wording');
});

t.test('ratelimit-control-plane: a port in use is one clean line and exit 1', async (t) => {
  const holder = createServer();
  await new Promise<void>((r) => holder.listen(0, LOOPBACK, r));
  t.teardown(() => holder.close());
  const port = (holder.address() as { port: number }).port;
  const r = await run('ratelimit-control-plane', [
    '--dir',
    join(REPO_ROOT, 'examples', 'crds'),
    '--listen',
    `${LOOPBACK}:${port}`,
  ]);
  t.equal(r.code, 1, 'a failure at run time: exit 1');
  t.equal(
    r.stderr
      .trim()
      .split('\n')
      .filter((l) => !l.startsWith('time='))
      .join('\n'),
    `ratelimit-control-plane: cannot listen on ${LOOPBACK}:${port}: address already in use (another process listens there)`,
    "one line in the programs' format besides the log",
  );
  t.notMatch(r.stderr + r.stdout, /No address added/, 'no grpc-js line');
});
