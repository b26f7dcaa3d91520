#!/usr/bin/env node
// `npm start`: the whole config path on one machine.
//   ratelimit-control-plane --dir examples/config --listen 127.0.0.1:18000   (the GitOps path without Kubernetes)
//   ratelimit with CONFIG_TYPE=GRPC_XDS_DELTA (incremental xDS, as the chart deploys it), counting in memory unless REDIS_URL is set
// Edit examples/config/*.yaml while it runs: the control plane re-reads it, pushes a new version,
// and the service's decisions change within a second. A broken file is reported and not served.
// Set LOCAL_STACK_CONFIG=file to skip the control plane and read the files directly.
// Every listener binds 127.0.0.1 (a development stack is nobody else's business); LOCAL_STACK_HOST or
// --host=ADDR binds them elsewhere, and HOST, GRPC_HOST, DEBUG_HOST, PROMETHEUS_ADDR, LOCAL_STACK_XDS
// still override one listener each.
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = join(dirname(fileURLToPath(import.meta.url)), '..');

function hostArg(argv) {
  for (let i = 0; i < argv.length; i++) {
    if (argv[i].startsWith('--host=')) return argv[i].slice('--host='.length);
    if (argv[i] === '--host' && argv[i + 1]) return argv[i + 1];
    console.error(`local-stack: unknown argument ${argv[i]} (the only one is --host=ADDR)`);
    process.exit(2);
  }
  return undefined;
}
const host = hostArg(process.argv.slice(2)) ?? process.env.LOCAL_STACK_HOST ?? '127.0.0.1';
// host:port, with [] around an IPv6 address.
const hostPort = (h, port) => (h.includes(':') ? `[${h}]:${port}` : `${h}:${port}`);
// The service dials the control plane: an "any address" bind is reached on loopback.
const dialHost = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;

const configDir = process.env.LOCAL_STACK_DIR ?? join(repo, 'examples', 'config');
const xdsPort = process.env.LOCAL_STACK_XDS_PORT ?? '18000';
const xdsListen = process.env.LOCAL_STACK_XDS ?? hostPort(host, xdsPort);
const xdsDial = process.env.LOCAL_STACK_XDS ?? hostPort(dialHost, xdsPort);
const viaFiles = process.env.LOCAL_STACK_CONFIG === 'file';

const env = {
  USE_STATSD: 'false',
  LOG_LEVEL: 'warn',
  HOST: host,
  GRPC_HOST: host,
  DEBUG_HOST: host,
  PROMETHEUS_ADDR: hostPort(host, 9090),
  ...(viaFiles
    ? { RUNTIME_ROOT: dirname(configDir), RUNTIME_APPDIRECTORY: 'config', RUNTIME_WATCH_ROOT: 'false' }
    : {
        CONFIG_TYPE: 'GRPC_XDS_DELTA',
        CONFIG_GRPC_XDS_SERVER_URL: xdsDial,
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
console.error(
  `local-stack: on ${env.HOST}: gRPC :${env.GRPC_PORT ?? 8081}, HTTP :${env.PORT ?? 8080} (POST /json, /healthcheck), ` +
    `debug :${env.DEBUG_PORT ?? 6070}; Ctrl-C stops`,
);
