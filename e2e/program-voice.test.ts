// The control plane and the operator speak as every program does: --version, "did you mean" for a
// misspelt option, `<program>: <message>` in one line on stderr, exit 2 for bad usage and 1 for a failure
// at run time, and one clean line for a port already in use (no stray library log line).
import t from 'tap';
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { builtBin, REPO_ROOT } from '../harness/dist.js';
import { LOOPBACK } from '../harness/net.js';

const version = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')).version;

function run(
  bin: 'ratelimit-control-plane' | 'ratelimit-operator',
  args: string[],
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [builtBin(bin), ...args], {
      cwd: REPO_ROOT,
      env: { PATH: process.env.PATH ?? '', KUBECONFIG: '/nonexistent' },
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
  ['ratelimit-control-plane', '--lisen', '--listen'],
  ['ratelimit-operator', '--kubeconfg', '--kubeconfig'],
] as const) {
  t.test(`${bin}: --version, did you mean, exit 2 for bad usage`, async (t) => {
    const v = await run(bin, ['--version']);
    t.equal(v.code, 0);
    t.equal(v.stdout, `${bin} ${version}\n`);
    const bad = await run(bin, [option, 'x']);
    t.equal(bad.code, 2, 'bad usage: exit 2');
    t.equal(bad.stderr, `${bin}: unknown option '${option}'; did you mean ${near}? (see ${bin} --help)\n`);
  });
}

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
