#!/usr/bin/env node
// `npm start`: the whole config path on one machine.
//   ratelimit-control-plane --dir examples/config --listen 127.0.0.1:18000   (the GitOps path without Kubernetes)
//   ratelimit with CONFIG_TYPE=GRPC_XDS_SOTW, counting in memory unless REDIS_URL is set
// Edit examples/config/*.yaml while it runs: the control plane re-reads it, pushes a new version,
// and the service's decisions change within a second. A broken file is reported and not served.
// Set LOCAL_STACK_CONFIG=file to skip the control plane and read the files directly.
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = join(dirname(fileURLToPath(import.meta.url)), '..');
const configDir = process.env.LOCAL_STACK_DIR ?? join(repo, 'examples', 'config');
const xdsListen = process.env.LOCAL_STACK_XDS ?? '127.0.0.1:18000';
const viaFiles = process.env.LOCAL_STACK_CONFIG === 'file';

const env = {
  USE_STATSD: 'false',
  LOG_LEVEL: 'warn',
  ...(viaFiles
    ? { RUNTIME_ROOT: dirname(configDir), RUNTIME_APPDIRECTORY: 'config', RUNTIME_WATCH_ROOT: 'false' }
    : {
        CONFIG_TYPE: 'GRPC_XDS_SOTW',
        CONFIG_GRPC_XDS_SERVER_URL: xdsListen,
        CONFIG_GRPC_XDS_NODE_ID: 'local',
        XDS_CLIENT_BACKOFF_INITIAL_INTERVAL: '1s',
        XDS_CLIENT_BACKOFF_MAX_INTERVAL: '5s',
      }),
  ...process.env,
};
if (!process.env.BACKEND_TYPE) {
  env.BACKEND_TYPE = process.env.REDIS_URL ? 'redis' : 'memory';
  if (process.env.REDIS_URL && !process.env.REDIS_SOCKET_TYPE) env.REDIS_SOCKET_TYPE = 'tcp';
}

// LOCAL_STACK_TSX=1 runs the TypeScript sources through tsx instead of dist/ (for quick edits; the
// test runs the built bins).
const fromSource = process.env.LOCAL_STACK_TSX === '1';
const entry = (bin, source) => (fromSource ? ['--import', 'tsx', join(repo, source)] : [join(repo, bin)]);

const children = [];
function run(name, args, childEnv) {
  const child = spawn(process.execPath, args, { env: childEnv, stdio: 'inherit', cwd: repo });
  child.on('exit', (code, signal) => {
    if (!stopping) {
      console.error(`local-stack: ${name} exited (${signal ?? code}); stopping`);
      stop(code ?? 1);
    }
  });
  children.push(child);
  return child;
}

let stopping = false;
function stop(code) {
  stopping = true;
  for (const c of children) if (c.exitCode === null) c.kill('SIGTERM');
  setTimeout(() => process.exit(code), 500).unref();
  Promise.all(children.map((c) => (c.exitCode === null ? new Promise((r) => c.on('exit', r)) : null))).then(
    () => process.exit(code),
  );
}
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => stop(0));

if (!viaFiles) {
  run(
    'ratelimit-control-plane',
    [
      ...entry('bin/ratelimit-control-plane.js', 'control-plane/main.ts'),
      ...['--dir', configDir, '--listen', xdsListen, '--log-level', 'warn'],
    ],
    process.env,
  );
}
run('ratelimit', entry('bin/ratelimit.js', 'ratelimit/main.ts'), env);
console.error(
  viaFiles
    ? `local-stack: ratelimit reading ${configDir}`
    : `local-stack: control plane on ${xdsListen} serving ${configDir}; ratelimit takes its config over xDS`,
);
console.error('local-stack: gRPC :8081, HTTP :8080 (POST /json, /healthcheck), debug :6070; Ctrl-C stops');
