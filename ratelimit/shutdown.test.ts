// SIGTERM never waits on a config parse: with a parse in progress on the worker, the process exits
// within the drain time (SHUTDOWN_DRAIN_MS), not when the parse would end.
import t from 'tap';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '../e2e/harness/net.js';
import { SHUTDOWN_DRAIN_MS } from './app.js';
import { eventually } from './test-support.js';

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
  t.ok(tookMs < SHUTDOWN_DRAIN_MS, `exited ${Math.round(tookMs)} ms after SIGTERM`);
});
