// What a user of the reference service reads in the log of a default start, and what an invalid
// LOG_LEVEL does, compared with the reference's own words (src/server/server_impl.go logs
// "Listening for gRPC on '%s'", "Listening for HTTP on '%s'" and "Listening for debug on '%s'" with
// logger.Warnf; src/service_cmd/runner/runner.go stops with logger.Fatalf("Could not parse log level. %v")
// when logrus refuses the level, logrus' message being `not a valid logrus Level: "<value>"`).
import t from 'tap';
import { spawn } from 'node:child_process';
import { builtBin, REPO_ROOT } from '../harness/dist.js';
import { freePorts, LOOPBACK, waitUntil } from '../harness/net.js';

const REFERENCE_LISTENING = [
  "Listening for gRPC on '%s'",
  "Listening for HTTP on '%s'",
  "Listening for debug on '%s'",
];

function startService(env: Record<string, string>) {
  const child = spawn(process.execPath, [builtBin('ratelimit')], {
    cwd: REPO_ROOT,
    // LOG_LEVEL and LOG_FORMAT left at their defaults unless the test sets them.
    env: {
      PATH: process.env.PATH ?? '',
      BACKEND_TYPE: 'memory',
      USE_STATSD: 'false',
      RUNTIME_ROOT: `${REPO_ROOT}/examples`,
      RUNTIME_WATCH_ROOT: 'false',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (d) => (output += d));
  child.stderr.on('data', (d) => (output += d));
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  return { child, exited, output: () => output };
}

t.test('a default start logs where it listens, in the reference words, at warning', async (t) => {
  const [grpc, http, debug] = await freePorts(3);
  const svc = startService({
    HOST: LOOPBACK,
    PORT: String(http),
    GRPC_HOST: LOOPBACK,
    GRPC_PORT: String(grpc),
    DEBUG_HOST: LOOPBACK,
    DEBUG_PORT: String(debug),
  });
  t.teardown(() => svc.child.kill('SIGKILL'));
  const want = REFERENCE_LISTENING.map((f, i) => f.replace('%s', `${LOOPBACK}:${[grpc, http, debug][i]}`));
  await waitUntil(() => want.every((w) => svc.output().includes(w)), {
    what: 'the three listening lines',
    deadlineMs: 30_000,
    context: svc.output,
  });
  for (const w of want) {
    const line = svc
      .output()
      .split('\n')
      .find((l) => l.includes(w))!;
    t.match(
      line,
      /^time=\S+ level=warning msg=/,
      `${w}: a text line at warning (the default LOG_LEVEL=WARN)`,
    );
    t.ok(line.includes(`msg=${JSON.stringify(w)}`), `${w}: the message is exactly the reference's`);
  }
});

t.test('an invalid LOG_LEVEL stops the start as the reference does: a fatal line, exit 1', async (t) => {
  const [grpc, http, debug] = await freePorts(3);
  const svc = startService({
    LOG_LEVEL: 'verbose',
    HOST: LOOPBACK,
    PORT: String(http),
    GRPC_HOST: LOOPBACK,
    GRPC_PORT: String(grpc),
    DEBUG_HOST: LOOPBACK,
    DEBUG_PORT: String(debug),
  });
  t.teardown(() => svc.child.kill('SIGKILL'));
  const code = await Promise.race([
    svc.exited,
    new Promise((r) => setTimeout(() => r('still running'), 30_000)),
  ]);
  t.equal(code, 1, 'exit 1');
  t.match(
    svc.output(),
    /level=fatal msg="Could not parse log level\. not a valid logrus Level: \\"verbose\\""/,
    'the reference message',
  );
  t.notMatch(svc.output(), /Listening for/, 'nothing was started');
});
