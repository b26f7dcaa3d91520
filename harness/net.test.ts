import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import t from 'tap';
import {
  ServerProcess,
  canBind,
  freePorts,
  makeTempDir,
  removeTempDir,
  waitForPort,
  waitUntil,
} from './net.js';

t.test('freePorts hands out distinct bindable ports, never the well-known defaults', async (t) => {
  const ports = await freePorts(20);
  t.equal(new Set(ports).size, 20);
  for (const p of ports) {
    t.notOk([6379, 11211, 26379].includes(p));
    t.ok(await canBind(p), `port ${p} is bindable`);
  }
});

t.test('waitForPort resolves once something listens and fails at its deadline otherwise', async (t) => {
  const [open, closed] = await freePorts(2);
  const srv = createServer();
  setTimeout(() => srv.listen(open, '127.0.0.1'), 100);
  await waitForPort(open, { deadlineMs: 3000 });
  srv.close();
  const t0 = Date.now();
  await t.rejects(waitForPort(closed, { deadlineMs: 300 }), /timed out after 300 ms/);
  t.ok(Date.now() - t0 < 2000, 'gave up near the deadline');
});

t.test('ServerProcess stop is idempotent and escalates to SIGKILL after the deadline', async (t) => {
  const dir = makeTempDir('rl-net-test');
  t.teardown(() => removeTempDir(dir));
  // a process that ignores SIGTERM
  const p = new ServerProcess(
    'stubborn',
    'sh',
    ['-c', 'trap "" TERM; echo started; while :; do sleep 0.1; done'],
    {
      logPath: join(dir, 'stubborn.log'),
    },
  );
  t.ok(p.running);
  // the trap must be installed before SIGTERM is sent, or the shell dies of it (seen under load)
  await waitUntil(() => /started/.test(p.logTail()), { deadlineMs: 10_000, what: 'the trap to be set' });
  const t0 = Date.now();
  await p.stop(300);
  t.notOk(p.running);
  t.ok(Date.now() - t0 >= 300, 'waited for the deadline before SIGKILL');
  t.match(p.exitReason(), /signal SIGKILL/);
  await p.stop(); // idempotent
  await p.kill();
  t.match(p.logTail(), /started/);
});

t.test('the exit safety net SIGKILLs children and removes temp dirs left running', async (t) => {
  const script = `
    import { ServerProcess, makeTempDir } from ${JSON.stringify(new URL('./net.ts', import.meta.url).pathname)};
    const dir = makeTempDir('rl-net-leak');
    const p = new ServerProcess('sleeper', 'sleep', ['300'], { logPath: dir + '/log' });
    console.log(JSON.stringify({ pid: p.pid, dir }));
    process.exit(0);
  `;
  const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    encoding: 'utf8',
  });
  t.equal(r.status, 0, r.stderr);
  const { pid, dir } = JSON.parse(r.stdout.trim().split('\n').pop()!);
  let alive = true;
  for (let i = 0; i < 40 && alive; i++) {
    try {
      process.kill(pid, 0);
      await new Promise((res) => setTimeout(res, 50));
    } catch {
      alive = false;
    }
  }
  t.notOk(alive, `child ${pid} is gone`);
  t.notOk(existsSync(dir), 'temp dir removed');
});
