// "Pods" of the built ratelimit service for the RLQS measurements: P service processes on loopback, one
// Redis, one config, as P replicas behind a Kubernetes Service would run. Each process's gRPC port serves
// ShouldRateLimit and (when the build has it) StreamRateLimitQuotas.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { builtBin, REPO_ROOT } from '../dist.js';
import { freePort, LOOPBACK, quietListenEnv, ServerProcess, waitForPort } from '../net.js';

export interface Pods {
  grpcPorts: number[];
  targets: string[];
  procs: ServerProcess[];
  stop(): Promise<void>;
}

/** Starts `count` service processes with `configYaml` as ratelimit/config/config.yaml under `root`. */
export async function startPods(opts: {
  count: number;
  redisUrl: string;
  configYaml: string;
  root: string;
  env?: Record<string, string>;
}): Promise<Pods> {
  const cfgDir = join(opts.root, 'ratelimit', 'config');
  mkdirSync(cfgDir, { recursive: true });
  writeFileSync(join(cfgDir, 'config.yaml'), opts.configYaml);
  const procs: ServerProcess[] = [];
  const grpcPorts: number[] = [];
  try {
    for (let i = 0; i < opts.count; i++) {
      const [grpcPort, httpPort, debugPort] = [await freePort(), await freePort(), await freePort()];
      const proc = new ServerProcess(`ratelimit-${i}`, process.execPath, [builtBin('ratelimit')], {
        logPath: join(opts.root, `ratelimit-${i}.log`),
        cwd: REPO_ROOT,
        env: {
          ...process.env,
          BACKEND_TYPE: 'redis',
          REDIS_SOCKET_TYPE: 'tcp',
          REDIS_URL: opts.redisUrl,
          RUNTIME_ROOT: opts.root,
          RUNTIME_SUBDIRECTORY: 'ratelimit',
          RUNTIME_WATCH_ROOT: 'false',
          ...quietListenEnv(grpcPort, httpPort, debugPort),
          ...opts.env,
        },
      });
      procs.push(proc);
      grpcPorts.push(grpcPort);
    }
    for (const [i, proc] of procs.entries())
      await waitForPort(grpcPorts[i], {
        deadlineMs: 120_000,
        what: `${proc.name}'s gRPC listener`,
        abort: () => proc.exitReason(),
        context: () => proc.logTail(),
      });
  } catch (err) {
    await Promise.all(procs.map((p) => p.stop()));
    throw err;
  }
  return {
    grpcPorts,
    targets: grpcPorts.map((p) => `${LOOPBACK}:${p}`),
    procs,
    stop: async () => {
      await Promise.all(procs.map((p) => p.stop()));
    },
  };
}
