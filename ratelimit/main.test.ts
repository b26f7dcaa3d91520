// The `ratelimit` and `ratelimit-client` programs as processes, settings parsing, log formats,
// and graceful shutdown.
import t from 'tap';
import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';
import { freePort } from '../harness/net.js';
import { loadSettings, SettingsError, parseGoDuration } from './settings/index.js';
import { createLogger } from '../common/index.js';
import { descriptor, eventually, startTestApp } from './test-support.js';
import type { CounterOp, CounterStore } from './counting/index.js';
import { MemoryCounterStore } from './memory/index.js';

const repo = join(dirname(fileURLToPath(import.meta.url)), '..');

t.test('settings: reference defaults, Go durations, maps, and invalid values named', async (t) => {
  const s = loadSettings({});
  t.equal(s.grpc.port, 8081);
  t.equal(s.port, 8080);
  t.equal(s.debugPort, 6070);
  t.equal(s.grpc.host, '0.0.0.0');
  t.equal(s.runtimeRoot, '/srv/runtime_data/current');
  t.equal(s.runtimeAppDirectory, 'config');
  t.equal(s.runtimeWatchRoot, true);
  t.equal(s.nearLimitRatio, 0.8);
  t.equal(s.xds.serverUrl, 'localhost:18000');
  t.equal(s.xds.backoffInitialMs, 10_000);
  t.equal(s.headerLimit, 'RateLimit-Limit');
  t.equal(s.redis.main.type, 'single');
  t.equal(parseGoDuration('1h30m'), 5_400_000);
  t.equal(parseGoDuration('150us'), 0.15);
  t.equal(parseGoDuration('10x'), undefined);
  t.same(loadSettings({ EXTRA_TAGS: '<a:1>,<b:2>' }).stats.extraTags, { a: '1', b: '2' });
  t.throws(() => loadSettings({ GRPC_PORT: 'eighty' }), {
    name: 'SettingsError',
    message: /^GRPC_PORT: invalid integer/,
  });
  t.throws(() => loadSettings({ NEAR_LIMIT_RATIO: '1.5' }), /^NEAR_LIMIT_RATIO: must be <= 1/);
  t.throws(() => loadSettings({ SHADOW_MODE: 'yes' }), /^SHADOW_MODE: invalid boolean/);
  t.throws(() => loadSettings({ STATS_FLUSH_INTERVAL: 'soon' }), /^STATS_FLUSH_INTERVAL: invalid duration/);
  t.throws(() => loadSettings({ BACKEND_TYPE: 'etcd' }), SettingsError);
});

t.test('logs: LOG_FORMAT=json has @message, @timestamp, level; text has time, level, msg', async (t) => {
  const lines: string[] = [];
  const sink = { write: (s: string) => lines.push(s) };
  createLogger({ format: 'json', level: 'warn' }, sink).warn('hello');
  const j = JSON.parse(lines[0]);
  t.equal(j['@message'], 'hello');
  t.equal(j.level, 'warning');
  t.ok(!Number.isNaN(Date.parse(j['@timestamp'])));
  createLogger({ format: 'text', level: 'warn' }, sink).warn('two words');
  t.match(lines[1], /^time=\S+ level=warning msg="two words"\n$/);
  createLogger({ format: 'text', level: 'warn' }, sink).info('hidden');
  t.equal(lines.length, 2, 'below LOG_LEVEL is dropped');
});

t.test('graceful shutdown: health fails first, in-flight calls finish', async (t) => {
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const inner = new MemoryCounterStore();
  const slow: CounterStore = {
    increment: async (ops: readonly CounterOp[]) => {
      await gate;
      return inner.increment(ops);
    },
    get: (ops) => inner.get(ops),
    isHealthy: () => true,
    close: () => inner.close(),
  };
  const svc = await startTestApp({
    files: {
      'a.yaml':
        'domain: g\ndescriptors:\n  - key: k\n    rate_limit: { unit: minute, requests_per_unit: 5 }\n',
    },
    appOptions: { store: slow },
  });
  const inflight = svc.call({ domain: 'g', descriptors: [descriptor(['k', 'v'])] });
  await eventually(
    () => svc.app.stats.snapshot()['ratelimit.service.rate_limit.g.k.total_hits'] === 1,
    5000,
    'call started',
  );
  const closing = svc.close();
  t.equal(svc.app.health.isHealthy(), false, 'unhealthy as soon as shutdown starts');
  setTimeout(release, 200);
  const r = await inflight;
  t.equal(r.overallCode, 'OK', 'the in-flight call completed');
  await closing;
});

t.test(
  'the ratelimit process serves the example config, the client talks to it, SIGTERM exits 0',
  async (t) => {
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
        RUNTIME_ROOT: join(repo, 'examples'),
        RUNTIME_WATCH_ROOT: 'false',
        USE_STATSD: 'false',
        LOG_FORMAT: 'json',
        LOG_LEVEL: 'info',
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
      20_000,
      'the service to become healthy',
    );
    const logs = stderr
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l));
    t.ok(
      logs.some(
        (l) => l.level === 'warning' && /^Listening for gRPC on '127\.0\.0\.1:\d+'$/.test(l['@message']),
      ),
      'gRPC listener logged',
    );
    t.ok(
      logs.some(
        (l) =>
          l.level === 'warning' &&
          /example\.remote_address: unit=MINUTE requests_per_unit=5/.test(l['@message']),
      ),
      'loaded descriptor logged',
    );

    const client = spawnSync(
      process.execPath,
      [
        '--import',
        'tsx',
        join(repo, 'cli/ratelimit-client/cli.ts'),
        '-dial_string',
        `127.0.0.1:${grpcPort}`,
        '-domain',
        'example',
        '-descriptors',
        'remote_address=10.1.1.1',
      ],
      { cwd: repo, encoding: 'utf8' },
    );
    t.equal(client.status, 0, client.stderr);
    t.match(client.stdout, /"overallCode": "OK"/);
    t.match(client.stdout, /"limitRemaining": 4/);

    const debug = await (await fetch(`http://127.0.0.1:${debugPort}/rlconfig`)).text();
    t.match(debug, /example\.remote_address: unit=MINUTE requests_per_unit=5/);
    const index = await (await fetch(`http://127.0.0.1:${debugPort}/`)).text();
    t.match(index, /\/rlconfig/);
    t.match(index, /\/stats/);

    child.kill('SIGTERM');
    t.equal(await exited, 0, 'exits 0 on SIGTERM');
  },
);

t.test('an invalid setting stops startup with the variable named', async (t) => {
  const r = spawnSync(process.execPath, ['--import', 'tsx', join(repo, 'ratelimit/main.ts')], {
    cwd: repo,
    env: { ...process.env, GRPC_PORT: 'abc' },
    encoding: 'utf8',
  });
  t.equal(r.status, 2);
  t.match(r.stderr, /GRPC_PORT: invalid integer 'abc'/);
});
