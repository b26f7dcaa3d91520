// The processes a benchmark run owns: Redis, our service and the reference Go service, each pinned to a
// core with taskset, plus /proc and INFO readers for the CPU, memory and command counts of each.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { rateLimitServiceDefinition } from '../../proto/index.js';
import type { WireRateLimitRequest, WireRateLimitResponse } from '../../proto/index.js';
import { builtBin } from '../../harness/dist.js';
import { resolveReferenceRatelimit } from '../../harness/kube.js';
import { freePort, LOOPBACK, quietListenEnv, ServerProcess, waitForPort } from '../../harness/net.js';
export { quietListenEnv };
import { redisInfo, respCommand, startRedis, type RedisServer } from '../../harness/redis/index.js';
import type { BenchRequest } from '../load/frames.js';

export const REPO_ROOT = new URL('../../', import.meta.url).pathname.replace(/\/$/, '');
export const CLOCK_TICKS = 100; // USER_HZ on Linux

/** Pins a running process (all its threads) to the given CPU list. */
export function pin(pid: number, cpus: string): void {
  try {
    execFileSync('taskset', ['-a', '-pc', cpus, String(pid)], { stdio: 'ignore' });
  } catch {
    /* taskset missing or not permitted: run unpinned */
  }
}

/** Steal time so far of each core (ms), from /proc/stat (USER_HZ ticks, 10 ms each on Linux). */
export function stealMsPerCpu(): number[] {
  try {
    const out: number[] = [];
    for (const line of readFileSync('/proc/stat', 'utf8').split('\n')) {
      const m = /^cpu(\d+) /.exec(line);
      if (!m) continue;
      const f = line.trim().split(/\s+/);
      out[Number(m[1])] = Number(f[8] ?? 0) * 10;
    }
    return out;
  } catch {
    return [];
  }
}

/** CPU seconds (user + system) a process has used so far. */
export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / CLOCK_TICKS; // fields 14 and 15 of stat(5)
}

/** Resident set size in MiB. */
export function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : 0;
}

const NOT_COUNTED = new Set([
  'info',
  'flushall',
  'config',
  'ping',
  'client',
  'hello',
  'command',
  'select',
  'auth',
  'cluster',
  'readonly',
]);

/** The Redis a measurement counts: commands executed, CPU used, and a way to empty it between runs. */
export interface RedisUnderTest {
  /** Calls of the commands a rate limiter sends (harness and topology commands excluded). */
  commandCalls(): Promise<{ total: number; byCommand: Record<string, number> }>;
  /** CPU seconds the Redis process(es) used so far. */
  cpuSeconds(): number;
  flushAll(): Promise<void>;
}

/** A process' INFO commandstats, the commands in NOT_COUNTED left out. */
export async function countedCommandCalls(
  port: number,
): Promise<{ total: number; byCommand: Record<string, number> }> {
  const info = await redisInfo({ port }, 'commandstats');
  const byCommand: Record<string, number> = {};
  let total = 0;
  for (const [k, v] of Object.entries(info)) {
    if (!k.startsWith('cmdstat_')) continue;
    const name = k.slice(8);
    if (NOT_COUNTED.has(name)) continue;
    const calls = Number(/calls=(\d+)/.exec(v)?.[1] ?? 0);
    byCommand[name] = calls;
    total += calls;
  }
  return { total, byCommand };
}

export class BenchRedis implements RedisUnderTest {
  constructor(readonly server: RedisServer) {}

  static async start(cpus: string): Promise<BenchRedis> {
    const server = await startRedis({ args: ['--save', '', '--appendonly', 'no'] });
    pin(server.pid, cpus);
    return new BenchRedis(server);
  }

  get pid(): number {
    return this.server.pid;
  }
  get url(): string {
    return this.server.url;
  }

  /** Calls of the commands a rate limiter sends (harness commands such as INFO excluded). */
  commandCalls(): Promise<{ total: number; byCommand: Record<string, number> }> {
    return countedCommandCalls(this.server.port);
  }

  cpuSeconds(): number {
    return cpuSeconds(this.server.pid);
  }

  async flushAll(): Promise<void> {
    await respCommand({ port: this.server.port, timeoutMs: 30_000 }, 'FLUSHALL');
  }

  stop(): Promise<void> {
    return this.server.stop();
  }
}

export type ServiceKind = 'ours' | 'reference';

/**
 * A service's runtime directory: RUNTIME_ROOT/ratelimit/config/*.yaml. Each service has its own, so a
 * reload measured on one does not make the other parse the same file on the same core at that moment.
 */
export class RuntimeDir {
  readonly configDir: string;
  private readonly staging: string;
  constructor(readonly root: string) {
    this.configDir = join(root, 'ratelimit', 'config');
    this.staging = join(root, 'staging');
    mkdirSync(this.configDir, { recursive: true });
    mkdirSync(this.staging, { recursive: true });
  }
  /** Writes a file atomically: written outside the watched directory, then renamed into it. */
  write(name: string, text: string): void {
    const tmp = join(this.staging, name);
    writeFileSync(tmp, text);
    renameSync(tmp, join(this.configDir, name));
  }
}

export interface ServiceOptions {
  kind: ServiceKind;
  runtime: RuntimeDir;
  redisUrl: string;
  cpus: string;
  logDir: string;
  localCacheBytes: number;
  /** Extra node flags for our service, e.g. --cpu-prof (ignored for the reference). */
  nodeArgs?: string[];
  /** Our service only: load loop-probe-preload.mjs, writing event-loop stalls to this file. */
  loopProbeFile?: string;
  /** Our service only: the node binary that runs it (default: the harness' own, process.execPath). */
  node?: string;
  /** Name of the log file (`<logName>.log` in logDir); default the kind. */
  logName?: string;
  /** Our service only: the bin it runs (default this build's bin/ratelimit.js). */
  bin?: string;
  /** How often to try the listeners while the service starts (default 50 ms). */
  pollMs?: number;
  /** More environment variables for the service (e.g. `REDIS_TYPE=cluster`). */
  env?: NodeJS.ProcessEnv;
  /** How long the service may take to listen (default 180 s). */
  startDeadlineMs?: number;
}

export class BenchService {
  private client: grpc.Client | undefined;

  private constructor(
    readonly kind: ServiceKind,
    readonly proc: ServerProcess,
    readonly grpcPort: number,
    readonly httpPort: number,
    /** The directory this service reads its config files from. */
    readonly runtime: RuntimeDir,
  ) {}

  get pid(): number {
    return this.proc.pid;
  }
  get grpcTarget(): string {
    return `${LOOPBACK}:${this.grpcPort}`;
  }

  static referenceBinary(): string | undefined {
    try {
      return resolveReferenceRatelimit();
    } catch {
      return undefined;
    }
  }

  static async start(o: ServiceOptions): Promise<BenchService> {
    const [grpcPort, httpPort, debugPort] = [await freePort(), await freePort(), await freePort()];
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      BACKEND_TYPE: 'redis',
      REDIS_SOCKET_TYPE: 'tcp',
      REDIS_URL: o.redisUrl,
      RUNTIME_ROOT: o.runtime.root,
      RUNTIME_SUBDIRECTORY: 'ratelimit',
      RUNTIME_WATCH_ROOT: 'false',
      ...quietListenEnv(grpcPort, httpPort, debugPort),
      LOCAL_CACHE_SIZE_IN_BYTES: String(o.localCacheBytes),
      ...(o.loopProbeFile && o.kind === 'ours' ? { BENCH_LOOP_PROBE: o.loopProbeFile } : {}),
      ...o.env,
    };
    let command: string[];
    if (o.kind === 'ours') {
      // The shipped bin (dist/), no tsx; the loop probe is plain JavaScript.
      command = [
        o.node ?? process.execPath,
        ...(o.nodeArgs ?? []),
        ...(o.loopProbeFile
          ? ['--import', join(REPO_ROOT, 'bench', 'harness', 'loop-probe-preload.mjs')]
          : []),
        o.bin ?? builtBin('ratelimit'),
      ];
    } else {
      const bin = BenchService.referenceBinary();
      if (!bin) throw new Error('reference service_cmd not built (scripts/build-go-tools.sh)');
      command = [bin];
    }
    // taskset execs the service: the pid we hold is the service's own.
    const proc = new ServerProcess(o.kind, 'taskset', ['-c', o.cpus, ...command], {
      logPath: join(o.logDir, `${o.logName ?? o.kind}.log`),
      cwd: REPO_ROOT,
      env,
    });
    // Startup took over 60 s twice on the shared machine (load average 15-19, 2026-11-24), most likely
    // because the first config (10k descriptors among the bench domains) is parsed on a nice-19 thread.
    await waitForPort(grpcPort, {
      deadlineMs: o.startDeadlineMs ?? 180_000,
      intervalMs: o.pollMs,
      what: `${o.kind} gRPC listener`,
      abort: () => proc.exitReason(),
      context: () => proc.logTail(),
    });
    await waitForPort(httpPort, { deadlineMs: 10_000, intervalMs: o.pollMs, abort: () => proc.exitReason() });
    return new BenchService(o.kind, proc, grpcPort, httpPort, o.runtime);
  }

  /** One ShouldRateLimit call through grpc-js (decision checks and reload probes, not load). */
  call(r: BenchRequest, deadlineMs = 5000): Promise<WireRateLimitResponse> {
    if (!this.client) {
      const Ctor = grpc.makeGenericClientConstructor(rateLimitServiceDefinition(), 'RateLimitService');
      this.client = new Ctor(this.grpcTarget, grpc.credentials.createInsecure());
    }
    const req: WireRateLimitRequest = {
      domain: r.domain,
      descriptors: r.descriptors.map((d) => ({ entries: d.map(([key, value]) => ({ key, value })) })),
      hitsAddend: r.hitsAddend ?? 0,
    };
    const client = this.client as unknown as Record<
      string,
      (
        req: WireRateLimitRequest,
        opts: grpc.CallOptions,
        cb: (err: grpc.ServiceError | null, res: WireRateLimitResponse) => void,
      ) => void
    >;
    return new Promise((resolve, reject) =>
      client.ShouldRateLimit.call(this.client, req, { deadline: Date.now() + deadlineMs }, (err, res) =>
        err ? reject(err) : resolve(res),
      ),
    );
  }

  async stop(): Promise<void> {
    this.client?.close();
    await this.proc.stop(10_000);
  }
}

export function referenceAvailable(): boolean {
  const b = BenchService.referenceBinary();
  return b !== undefined && existsSync(b);
}
