#!/usr/bin/env node
// `npm start`: the service on the example config, with in-memory counters unless REDIS_URL is set.
// Edit examples/config/*.yaml while it runs: the change is live within a second.
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = join(dirname(fileURLToPath(import.meta.url)), '..');
const env = {
  RUNTIME_ROOT: join(repo, 'examples'),
  RUNTIME_APPDIRECTORY: 'config',
  RUNTIME_WATCH_ROOT: 'false',
  USE_STATSD: 'false',
  LOG_LEVEL: 'warn',
  ...process.env,
};
if (!process.env.BACKEND_TYPE) {
  env.BACKEND_TYPE = process.env.REDIS_URL ? 'redis' : 'memory';
  if (process.env.REDIS_URL && !process.env.REDIS_SOCKET_TYPE) env.REDIS_SOCKET_TYPE = 'tcp';
}
const child = spawn(process.execPath, [join(repo, 'bin/ratelimit.js')], { env, stdio: 'inherit' });
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => child.kill(sig));
child.on('exit', (code) => process.exit(code ?? 0));
