// Statements of the docs that a change to the code could silently make false, checked against the built
// service: the level the listeners are logged at (interfaces.md, observability.md) and the exit codes of
// an invalid setting (settings.md).
import t from 'tap';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { builtBin, REPO_ROOT } from '../harness/dist.js';
import { freePorts, LOOPBACK, waitUntil } from '../harness/net.js';

const here = dirname(fileURLToPath(import.meta.url));
const page = (name: string) => readFileSync(join(here, name), 'utf8').replace(/\s+/g, ' ');

function run(env: Record<string, string>) {
  const child = spawn(process.execPath, [builtBin('ratelimit')], {
    cwd: REPO_ROOT,
    env: {
      PATH: process.env.PATH ?? '',
      BACKEND_TYPE: 'memory',
      USE_STATSD: 'false',
      RUNTIME_ROOT: join(REPO_ROOT, 'examples'),
      RUNTIME_WATCH_ROOT: 'false',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  return { child, exited, out: () => out };
}

async function exitOf(env: Record<string, string>): Promise<{ code: number | null; out: string }> {
  const [grpc, http, debug] = await freePorts(3);
  const p = run({
    HOST: LOOPBACK,
    PORT: String(http),
    GRPC_HOST: LOOPBACK,
    GRPC_PORT: String(grpc),
    DEBUG_HOST: LOOPBACK,
    DEBUG_PORT: String(debug),
    ...env,
  });
  const timer = setTimeout(() => p.child.kill('SIGKILL'), 60_000);
  const code = await p.exited;
  clearTimeout(timer);
  return { code, out: p.out() };
}

t.test('settings.md: the exit codes of an invalid setting and of an invalid LOG_LEVEL', async (t) => {
  const text = page('settings.md');
  const m =
    /an invalid value stops startup with exit code (\d+) and a message naming the variable \(`([^`]+)`\)/.exec(
      text,
    );
  t.ok(m, 'the page states the exit code and quotes a message');
  const [, code, example] = m!;
  const [name, value] = [example!.split(':')[0]!, /'([^']*)'/.exec(example!)![1]!];
  const bad = await exitOf({ [name]: value });
  t.equal(bad.code, Number(code), `${name}=${value}: exit code ${code}`);
  t.ok(bad.out.includes(example!), `the message: ${example}`);

  const lm =
    /except `LOG_LEVEL`, which stops it as the reference's does: exit code (\d+) and one `fatal` log line \(`([^`]+)`\)/.exec(
      text,
    );
  t.ok(lm, 'the page states what an invalid LOG_LEVEL does');
  const level = await exitOf({ LOG_LEVEL: 'verbose' });
  t.equal(level.code, Number(lm![1]), `LOG_LEVEL=verbose: exit code ${lm![1]}`);
  t.ok(level.out.includes('level=fatal'), 'a fatal line');
  t.ok(level.out.includes(JSON.stringify(lm![2]).slice(1, -1)), `the message: ${lm![2]}`);
});

t.test('interfaces.md and observability.md: the listening lines show at the level they state', async (t) => {
  const iface = /open the debug, HTTP and gRPC listeners, each logged at (\w+) level/.exec(
    page('interfaces.md'),
  );
  t.ok(iface, 'interfaces.md states the level');
  const obs = /`Listening for HTTP on '<address>'` \(and `debug`, `gRPC`\) at `(\w+)`/.exec(
    page('observability.md'),
  );
  t.ok(obs, 'observability.md states the level');
  t.equal(iface![1], obs![1], 'the two pages agree');
  const [grpc, http, debug] = await freePorts(3);
  // LOG_LEVEL at its default: the pages say the default level shows the lines.
  const p = run({
    HOST: LOOPBACK,
    PORT: String(http),
    GRPC_HOST: LOOPBACK,
    GRPC_PORT: String(grpc),
    DEBUG_HOST: LOOPBACK,
    DEBUG_PORT: String(debug),
  });
  t.teardown(() => p.child.kill('SIGKILL'));
  const names = ['debug', 'HTTP', 'gRPC'];
  await waitUntil(() => names.every((n) => p.out().includes(`Listening for ${n} on`)), {
    what: 'the listening lines at the default level',
    deadlineMs: 60_000,
    context: p.out,
  });
  for (const n of names) {
    const line = p
      .out()
      .split('\n')
      .find((l) => l.includes(`Listening for ${n} on`))!;
    t.match(line, new RegExp(`level=${iface![1]} `), `${n}: at ${iface![1]}`);
  }
});
