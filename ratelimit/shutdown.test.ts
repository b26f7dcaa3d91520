// SIGTERM never waits on a config parse, a slow client or an idle connection: the process exits 0 within
// the drain time (SHUTDOWN_DRAIN_TIMEOUT) plus SHUTDOWN_EXIT_SLACK_MS, with its write-behind hits sent.
import t from 'tap';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect as connectHttp2 } from 'node:http2';
import { createConnection, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SHOULD_RATE_LIMIT_PATH } from '../proto/index.js';
import { builtBin } from '../harness/dist.js';
import { freePort, freePorts, LOOPBACK, loopbackListenEnv, ServerProcess } from '../harness/net.js';
import { respCommand, startRedis } from '../harness/redis/index.js';
import { request, RlsClient } from '../harness/system.js';
import { SHUTDOWN_EXIT_SLACK_MS } from './app.js';
import { loadSettings } from './settings/index.js';
import { eventually, startTestApp } from './test-support.js';

const repo = join(dirname(fileURLToPath(import.meta.url)), '..');

t.test('SIGTERM during a slow config parse exits 0 within the drain time', async (t) => {
  const root = mkdtempSync(join(tmpdir(), 'rl-sigterm-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  mkdirSync(join(root, 'config'));
  writeFileSync(join(root, 'config', 'a.yaml'), 'domain: a\ndescriptors:\n  - key: k\n');
  const [grpcPort, httpPort, debugPort] = [await freePort(), await freePort(), await freePort()];
  const child = spawn(process.execPath, ['--import', 'tsx', join(repo, 'ratelimit/main.ts')], {
    cwd: repo,
    env: {
      ...process.env,
      HOST: '127.0.0.1',
      PORT: String(httpPort),
      GRPC_HOST: '127.0.0.1',
      GRPC_PORT: String(grpcPort),
      DEBUG_HOST: '127.0.0.1',
      DEBUG_PORT: String(debugPort),
      BACKEND_TYPE: 'memory',
      RUNTIME_ROOT: root,
      RUNTIME_WATCH_ROOT: 'false',
      USE_STATSD: 'false',
      LOG_LEVEL: 'debug',
      // Admit a file that takes tens of seconds to parse, and never time it out.
      CONFIG_YAML_MAX_BYTES: String(300 * 1024 * 1024),
      CONFIG_YAML_MAX_SCALAR_BYTES: String(300 * 1024 * 1024),
      CONFIG_PARSE_TIMEOUT: '1h',
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  await eventually(
    async () => {
      try {
        return (await fetch(`http://127.0.0.1:${httpPort}/healthcheck`)).status === 200;
      } catch {
        return false;
      }
    },
    30_000,
    'the service to become healthy',
  );
  const loadsBefore = stderr.split('loading config from').length;
  writeFileSync(join(root, 'config', 'slow.yaml'), `domain: "${'a'.repeat(120 * 1024 * 1024)}"\n`);
  await eventually(() => stderr.split('loading config from').length > loadsBefore, 20_000, 'the reload');
  const started = performance.now();
  child.kill('SIGTERM');
  const code = await exited;
  const tookMs = performance.now() - started;
  t.equal(code, 0, 'exits 0');
  const drainMs = loadSettings({}).shutdownDrainMs;
  t.ok(tookMs < drainMs, `exited ${Math.round(tookMs)} ms after SIGTERM (drain time ${drainMs} ms)`);
});

// The built binary on a real Redis with write-behind counting and every kind of connection a pod keeps
// open when it is told to stop: an HTTP client trickling a request body, an idle HTTP keep-alive
// connection, an idle gRPC (HTTP/2) connection, one with an unfinished call and a health Watch, and a
// debug client trickling its headers. None of them
// may hold the exit past the drain time, and every hit the pod admitted must be in Redis afterwards.
t.test(
  'SIGTERM with slow and idle clients: exit 0 within drain + 2 s, every admitted write-behind hit in Redis',
  async (t) => {
    const DRAIN_MS = 1000;
    const HITS = 20;
    const redis = await startRedis();
    t.teardown(() => redis.stop());
    const root = mkdtempSync(join(tmpdir(), 'rl-sigterm-wb-'));
    t.teardown(() => rmSync(root, { recursive: true, force: true }));
    mkdirSync(join(root, 'config'));
    writeFileSync(
      join(root, 'config', 'sd.yaml'),
      'domain: sd\ndescriptors:\n  - key: user\n    rate_limit: { unit: day, requests_per_unit: 1000000 }\n',
    );
    const [grpcPort, httpPort, debugPort] = await freePorts(3);
    const pod = new ServerProcess('ratelimit', process.execPath, [builtBin('ratelimit')], {
      logPath: join(root, 'ratelimit.log'),
      cwd: repo,
      env: {
        PATH: process.env.PATH,
        ...loopbackListenEnv(grpcPort, httpPort, debugPort),
        BACKEND_TYPE: 'redis',
        REDIS_SOCKET_TYPE: 'tcp',
        REDIS_URL: redis.url,
        // A key's first hit is counted in Redis at once; the others wait for a flush a minute away,
        // so only the shutdown can send them.
        CACHE_WRITE_BEHIND_ENABLED: 'true',
        CACHE_WRITE_BEHIND_INTERVAL: '1m',
        SHUTDOWN_DRAIN_TIMEOUT: `${DRAIN_MS}ms`,
        RUNTIME_ROOT: root,
        RUNTIME_WATCH_ROOT: 'false',
        USE_STATSD: 'false',
      },
    });
    t.teardown(() => pod.kill());
    await eventually(
      async () => {
        if (!pod.running) throw new Error(`${pod.exitReason()}\n${pod.logTail()}`);
        try {
          return (await fetch(`http://${LOOPBACK}:${httpPort}/healthcheck`)).status === 200;
        } catch {
          return false;
        }
      },
      60_000,
      'the service to become healthy',
    );

    // HITS admitted hits, half over HTTP (its keep-alive connection stays open), half over gRPC (its
    // HTTP/2 connection stays open, idle).
    const grpc = new RlsClient(`${LOOPBACK}:${grpcPort}`);
    t.teardown(() => grpc.close());
    let admitted = 0;
    for (let i = 0; i < HITS / 2; i++) {
      const res = await fetch(`http://${LOOPBACK}:${httpPort}/json`, {
        method: 'POST',
        body: JSON.stringify({ domain: 'sd', descriptors: [{ entries: [{ key: 'user', value: 'u1' }] }] }),
      });
      if (res.status === 200 && ((await res.json()) as { overallCode: string }).overallCode === 'OK')
        admitted++;
      const g = await grpc.call(request('sd', ['user', 'u1']), 10_000);
      if (g.overallCode === 'OK') admitted++;
    }
    t.equal(admitted, HITS, 'every hit admitted');
    const counted = async () => {
      let sum = 0;
      for (const key of (await respCommand({ port: redis.port }, 'KEYS', 'sd_user_u1_*')) as string[])
        sum += Number(await respCommand({ port: redis.port }, 'GET', key));
      return sum;
    };
    t.ok((await counted()) < HITS, 'hits wait in the pod (write-behind), not yet in Redis');

    // An HTTP request whose body never finishes (announced under HTTP_MAX_BODY_BYTES, so it is read, not
    // refused with 413): the 100 Continue proves the server has the request.
    const slow = await slowClient(
      httpPort,
      'POST /json HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 50000\r\n' +
        'Expect: 100-continue\r\n\r\n',
      (got) => got.includes('100 Continue'),
    );
    t.teardown(() => slow.destroy());
    // A debug client that never finishes its headers.
    const slowDebug = await slowClient(debugPort, 'GET /stats HTTP/1.1\r\nHost: x\r\n', () => true);
    t.teardown(() => slowDebug.destroy());
    // A gRPC call whose request message never arrives (5 bytes of frame header announcing 100), then a
    // health Watch on the same HTTP/2 connection: the server handles the connection's frames in order,
    // so once the Watch answers it has the unfinished call too.
    const h2 = connectHttp2(`http://${LOOPBACK}:${grpcPort}`);
    h2.on('error', () => {});
    t.teardown(() => h2.destroy());
    const grpcHeaders = { ':method': 'POST', 'content-type': 'application/grpc', te: 'trailers' };
    const partial = h2.request({ ...grpcHeaders, ':path': SHOULD_RATE_LIMIT_PATH });
    partial.on('error', () => {});
    partial.write(Buffer.from([0, 0, 0, 0, 100]));
    const watch = h2.request({ ...grpcHeaders, ':path': '/grpc.health.v1.Health/Watch' });
    watch.on('error', () => {});
    const watching = new Promise((r) => watch.once('data', r));
    watch.end(Buffer.from([0, 0, 0, 0, 0]));
    await watching;

    const signalled = performance.now();
    pod.child.kill('SIGTERM');
    let timer: NodeJS.Timeout | undefined;
    const exit = await Promise.race([
      pod.exited,
      new Promise<'hung'>((r) => (timer = setTimeout(() => r('hung'), 30_000))),
    ]);
    clearTimeout(timer);
    const tookMs = performance.now() - signalled;
    t.not(exit, 'hung', 'the process exits');
    if (exit === 'hung' || exit.code !== 0) t.comment(pod.logTail(10));
    t.same(exit, { code: 0, signal: null }, 'exits 0');
    t.ok(
      tookMs < DRAIN_MS + SHUTDOWN_EXIT_SLACK_MS,
      `exited ${Math.round(tookMs)} ms after SIGTERM (drain ${DRAIN_MS} ms + ${SHUTDOWN_EXIT_SLACK_MS} ms at most)`,
    );
    const inRedis = await counted();
    t.equal(inRedis, HITS, `every admitted hit is in Redis (${inRedis} of ${HITS})`);
  },
);

/**
 * Connects, writes `head`, waits until the server's answer so far satisfies `ready`, then sends one more
 * space every 100 ms for as long as the connection lasts.
 */
async function slowClient(port: number, head: string, ready: (got: string) => boolean): Promise<Socket> {
  const socket = createConnection({ host: LOOPBACK, port });
  socket.on('error', () => {});
  let got = '';
  socket.on('data', (d: Buffer) => (got += d.toString('latin1')));
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('close', () => reject(new Error('closed before connecting')));
  });
  socket.write(head);
  await eventually(() => ready(got), 30_000, 'the server to read the request head');
  const trickle = setInterval(() => socket.write(' '), 100);
  socket.once('close', () => clearInterval(trickle));
  return socket;
}

// The drain lets a request in progress finish, and ends when nothing is left open: the keep-alive
// connection it came on is closed once answered, not kept until its keep-alive timeout (72 s) or the
// drain deadline.
t.test(
  'a keep-alive request finishing during the drain is answered in full and the drain ends early',
  async (t) => {
    const DRAIN_MS = 30_000;
    const pod = await startTestApp({
      env: { DEBUG_PPROF_ENABLED: 'true' },
      files: { 'a.yaml': 'domain: a\n' },
    });
    t.teardown(() => rmSync(pod.root, { recursive: true, force: true }));
    const port = Number(new URL(pod.debugUrl).port);
    // A CPU profile of 300 ms: a request that takes a while, on a keep-alive (HTTP/1.1) connection.
    const socket = createConnection({ host: LOOPBACK, port });
    socket.on('error', () => {});
    let got = '';
    socket.on('data', (d: Buffer) => (got += d.toString('latin1')));
    const closed = new Promise<void>((r) => socket.once('close', () => r()));
    await new Promise<void>((r) => socket.once('connect', r));
    socket.write('GET /debug/pprof/profile?seconds=0.3 HTTP/1.1\r\nHost: x\r\n\r\n');
    // In progress once a second profile is refused.
    await eventually(
      async () => (await fetch(`${pod.debugUrl}/debug/pprof/profile?seconds=0.3`)).status === 409,
      30_000,
      'the profile to be running',
    );
    const started = performance.now();
    let timer: NodeJS.Timeout | undefined;
    const outcome = await Promise.race([
      pod.app.close(DRAIN_MS).then(() => 'closed'),
      new Promise<string>((r) => (timer = setTimeout(() => r('still draining'), DRAIN_MS - 5000))),
    ]);
    clearTimeout(timer);
    const tookMs = performance.now() - started;
    t.equal(
      outcome,
      'closed',
      `the drain ended after ${Math.round(tookMs)} ms, before its ${DRAIN_MS} ms deadline`,
    );
    await closed;
    t.match(got, /^HTTP\/1\.1 200 /, 'the request in progress was answered');
    const length = Number(/\r\ncontent-length: (\d+)\r\n/i.exec(got)?.[1]);
    t.equal(got.length - (got.indexOf('\r\n\r\n') + 4), length, 'in full');
    t.ok(JSON.parse(got.slice(got.indexOf('\r\n\r\n') + 4)).nodes, 'a CPU profile');
  },
);

t.test('SHUTDOWN_DRAIN_TIMEOUT: 10 s by default, a duration from 0 to 1h', async (t) => {
  t.equal(loadSettings({}).shutdownDrainMs, 10_000);
  t.equal(loadSettings({ SHUTDOWN_DRAIN_TIMEOUT: '0' }).shutdownDrainMs, 0);
  t.equal(loadSettings({ SHUTDOWN_DRAIN_TIMEOUT: '1500ms' }).shutdownDrainMs, 1500);
  for (const bad of ['-1s', '2h', 'soon'])
    t.throws(() => loadSettings({ SHUTDOWN_DRAIN_TIMEOUT: bad }), /SHUTDOWN_DRAIN_TIMEOUT/, bad);
});
