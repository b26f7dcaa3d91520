// `npm start`'s stack: the standalone control plane on a config folder and a ratelimit process that
// takes its config over xDS. Editing a file changes decisions within seconds; a broken file does not.
// Every listener is bound on loopback only unless asked otherwise.
import t from 'tap';
import { spawn } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureBuilt } from '../harness/dist.js';
import { freePort } from '../harness/net.js';
import { eventually } from '../ratelimit/test-support.js';

const repo = join(dirname(fileURLToPath(import.meta.url)), '..');

/** Addresses with a listening TCP socket on `port`, from /proc/net/tcp and tcp6 (state 0A). */
function listeners(port: number): string[] {
  const found: string[] = [];
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue; // no IPv6
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length < 4 || f[3] !== '0A') continue;
      const [addr, p] = f[1].split(':');
      if (parseInt(p, 16) !== port) continue;
      if (addr.length === 8) {
        // IPv4, little-endian bytes.
        found.push([3, 2, 1, 0].map((i) => parseInt(addr.slice(i * 2, i * 2 + 2), 16)).join('.'));
      } else {
        found.push(addr === '0'.repeat(32) ? '::' : `ipv6:${addr}`);
      }
    }
  }
  return found;
}

t.test('the local stack serves the example config over xDS and follows edits', async (t) => {
  ensureBuilt(); // local-stack.mjs runs the built bins
  const dir = mkdtempSync(join(tmpdir(), 'rl-stack-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  cpSync(join(repo, 'examples/config'), dir, { recursive: true });
  const [xds, http, grpc, debug] = [await freePort(), await freePort(), await freePort(), await freePort()];
  const child = spawn(process.execPath, [join(repo, 'scripts/local-stack.mjs')], {
    cwd: repo,
    // No HOST, GRPC_HOST, DEBUG_HOST, LOCAL_STACK_HOST or LOCAL_STACK_XDS: the defaults are under test.
    env: {
      ...Object.fromEntries(
        Object.entries(process.env).filter(
          ([k]) => !['HOST', 'GRPC_HOST', 'DEBUG_HOST', 'LOCAL_STACK_HOST', 'LOCAL_STACK_XDS'].includes(k),
        ),
      ),
      LOCAL_STACK_DIR: dir,
      LOCAL_STACK_XDS_PORT: String(xds),
      PORT: String(http),
      GRPC_PORT: String(grpc),
      DEBUG_PORT: String(debug),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true, // its own process group, so a failed test can stop the stack's children too
  });
  let log = '';
  child.stdout.on('data', (d) => (log += d));
  child.stderr.on('data', (d) => (log += d));
  const exited = new Promise((r) => child.on('exit', r));
  t.teardown(() => {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      // already gone
    }
  });
  const decide = async (value: string) => {
    const res = await fetch(`http://127.0.0.1:${http}/json`, {
      method: 'POST',
      body: JSON.stringify({
        domain: 'example',
        descriptors: [{ entries: [{ key: 'remote_address', value }] }],
      }),
    });
    return (await res.json()) as { statuses: { currentLimit?: { requestsPerUnit: number } }[] };
  };
  const limitNow = async (value: string) => {
    try {
      return (await decide(value)).statuses[0].currentLimit?.requestsPerUnit;
    } catch {
      return undefined;
    }
  };
  await eventually(async () => (await limitNow('a')) === 5, 30_000, 'the example config').catch((err) => {
    throw new Error(`${err.message}; stack log:\n${log}`);
  });
  t.pass('example served over xDS');
  for (const [name, port] of Object.entries({ xds, http, grpc, debug }))
    t.same(listeners(port), ['127.0.0.1'], `the ${name} port ${port} is bound on 127.0.0.1 only`);

  const file = join(dir, 'example.yaml');
  const original = readFileSync(file, 'utf8');
  writeFileSync(file, original.replace('requests_per_unit: 5\n', 'requests_per_unit: 7\n'));
  const edited = Date.now();
  await eventually(async () => (await limitNow('b')) === 7, 10_000, 'the edited limit');
  t.ok(Date.now() - edited < 10_000, `edit live after ${Date.now() - edited} ms`);

  writeFileSync(file, original.replace('unit: minute', 'unit: fortnight'));
  await eventually(() => /fortnight/.test(log), 10_000, 'the control plane to report the broken file');
  t.equal(await limitNow('c'), 7, 'the last good config keeps serving');

  child.kill('SIGTERM');
  await exited;
});
