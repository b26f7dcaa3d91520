// The standalone control plane's metrics listener (--metrics-listen): the address is checked and a bad
// one is refused naming the flag; /metrics answers GET (a query string is ignored, as scrapers may add
// one) and refuses other methods.
import t from 'tap';
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const CONFIG =
  'domain: a\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: minute\n      requests_per_unit: 1\n';

function configDir(t: { teardown(fn: () => unknown): void }): string {
  const dir = mkdtempSync(join(tmpdir(), 'rl-cp-main-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'a.yaml'), CONFIG);
  return dir;
}

t.test('a --metrics-listen with a bad port is refused, naming the flag', async (t) => {
  const dir = configDir(t);
  const r = await new Promise<{ code: number | null; stderr: string }>((resolve) =>
    execFile(
      process.execPath,
      [
        '--import',
        'tsx',
        'control-plane/main.ts',
        '--dir',
        dir,
        '--listen',
        '127.0.0.1:0',
        '--metrics-listen',
        '127.0.0.1:99999',
      ],
      { timeout: 120_000 },
      (err, _stdout, stderr) => resolve({ code: err && typeof err.code === 'number' ? err.code : 0, stderr }),
    ),
  );
  t.equal(r.code, 2);
  t.match(r.stderr, "--metrics-listen '127.0.0.1:99999': bad port");
});

t.test('/metrics answers GET with a query string and refuses POST', async (t) => {
  const dir = configDir(t);
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      'control-plane/main.ts',
      '--dir',
      dir,
      '--listen',
      '127.0.0.1:0',
      '--metrics-listen',
      '127.0.0.1:0',
      '--log-format',
      'json',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  t.teardown(() => child.kill('SIGTERM'));
  let logs = '';
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no metrics port: ${logs}`)), 60_000);
    child.stderr.on('data', (d) => {
      logs += d;
      const m = /"port":(\d+)[^\n]*metrics listening/.exec(logs);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
  });
  const get = await fetch(`http://127.0.0.1:${port}/metrics?format=text`);
  t.equal(get.status, 200);
  t.match(await get.text(), /ratelimit_control_plane_|xds_/, 'the registry');
  const post = await fetch(`http://127.0.0.1:${port}/metrics`, { method: 'POST' });
  t.equal(post.status, 405);
  t.equal(post.headers.get('allow'), 'GET, HEAD');
  t.equal((await fetch(`http://127.0.0.1:${port}/other`)).status, 404);
});
