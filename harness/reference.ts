// The reference Go rate limit service (service_cmd at the revision scripts/build-go-tools.sh pins) as a
// test peer: started on free loopback ports, stopped and its directory removed at the test's teardown.
// The config source and the counters are the caller's: plain files (`files`, read from RUNTIME_ROOT) and/or
// environment (`env`: CONFIG_TYPE=GRPC_XDS_SOTW, REDIS_URL, ...). Readiness is the caller's too (health,
// or a config arriving over xDS), since what "ready" means differs per test.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Test } from 'tap';
import { resolveReferenceRatelimit } from './kube.js';
import { freePort, LOOPBACK, ServerProcess } from './net.js';

export interface ReferenceService {
  /** host:port of its gRPC listener. */
  readonly dial: string;
  /** http://host:port of its HTTP listener (/json, /healthcheck). */
  readonly httpUrl: string;
  /** The debug listener (`/rlconfig`, `/stats`). */
  readonly debugUrl: string;
  readonly proc: ServerProcess;
}

export interface ReferenceOptions {
  /** Config files written to <dir>/config and read as the reference reads files (RUNTIME_*). */
  readonly files?: Record<string, string>;
  /** Added to (and overriding) the defaults below. */
  readonly env?: Record<string, string>;
}

export async function startReferenceService(t: Test, opts: ReferenceOptions = {}): Promise<ReferenceService> {
  const binary = resolveReferenceRatelimit();
  const dir = mkdtempSync(join(tmpdir(), 'rl-reference-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const fileEnv: Record<string, string> = {};
  if (opts.files) {
    mkdirSync(join(dir, 'config'));
    for (const [name, yaml] of Object.entries(opts.files)) writeFileSync(join(dir, 'config', name), yaml);
    Object.assign(fileEnv, {
      RUNTIME_ROOT: dir,
      RUNTIME_SUBDIRECTORY: '',
      RUNTIME_APPDIRECTORY: 'config',
      RUNTIME_WATCH_ROOT: 'false',
    });
  }
  const [grpcPort, httpPort, debugPort] = [await freePort(), await freePort(), await freePort()];
  const proc = new ServerProcess('reference-ratelimit', binary, [], {
    logPath: join(dir, 'ref.log'),
    env: {
      PATH: process.env.PATH,
      GRPC_HOST: LOOPBACK,
      GRPC_PORT: String(grpcPort),
      HOST: LOOPBACK,
      PORT: String(httpPort),
      DEBUG_HOST: LOOPBACK,
      DEBUG_PORT: String(debugPort),
      USE_STATSD: 'false',
      LOG_LEVEL: 'debug',
      EXPIRATION_JITTER_MAX_SECONDS: '0',
      ...fileEnv,
      ...opts.env,
    },
  });
  t.teardown(() => proc.stop());
  return {
    dial: `${LOOPBACK}:${grpcPort}`,
    httpUrl: `http://${LOOPBACK}:${httpPort}`,
    debugUrl: `http://${LOOPBACK}:${debugPort}`,
    proc,
  };
}
