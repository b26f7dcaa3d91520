// One measured load run: spawns the load generator pinned to its core, samples the service's and Redis'
// CPU and Redis' command counters exactly around the generator's measured window, and returns a sample.
import { spawn } from 'node:child_process';
import { loadgenDriver, type LoadDriver } from './drivers.js';
import type { LoadResult, LoadSpec } from '../load/loadgen.js';
import { cpuSeconds, REPO_ROOT, stealMsPerCpu, type BenchService, type RedisUnderTest } from './services.js';

export interface Sample {
  service: string;
  workload: string;
  round: number;
  mode: 'closed' | 'open';
  targetRate?: number;
  /** The load shape (`2x50`: connections x in flight per connection); absent in runs before shapes. */
  shape?: string;
  /** The load driver (`loadgen`, `go`); absent in runs before drivers (= loadgen). */
  driver?: string;
  callsPerSecond: number;
  completed: number;
  errors: number;
  ok: number;
  overLimit: number;
  latency: LoadResult['latency'];
  /** Open loop: latency from each call's actual send (the driver's own lateness in starting calls left out). */
  sentLatency?: LoadResult['latency'];
  /** CPU seconds of the service in the window. */
  serviceCpuSec: number;
  /** Share of one core the service used (1.0 = a full core). */
  serviceCores: number;
  /** Calls per CPU-second of the service: decisions per second per core, robust to a busy machine. */
  decisionsPerCoreSecond: number;
  redisCommandsPerDecision: number;
  redisCpuUsPerDecision: number;
  serviceCpuUsPerDecision: number;
  /** Share of a core the load generator used: near 1.0 means the generator, not the service, was the limit. */
  loadgenCores: number;
  /** The driver's own longest event-loop lateness in the window (ms; our driver only). */
  driverLoopMaxMs?: number;
  redisByCommand: Record<string, number>;
  firstError?: string;
  /** The measured window (epoch ms, as the harness saw the driver's marks), for tail attribution. */
  windowStartMs?: number;
  windowEndMs?: number;
  /** Steal time of each core in the window (ms; /proc/stat), for tail attribution. */
  stealMs?: number[];
  /**
   * Ours, latency phase (from its loop probe): V8 heap bytes allocated per decision in the window, and
   * the window's GC pauses (count, median, 99th percentile, longest; ms).
   */
  heapBytesPerDecision?: number;
  gcPauses?: number;
  gcPauseP50Ms?: number;
  gcPauseP99Ms?: number;
  gcPauseMaxMs?: number;
}

export interface MeasureOptions {
  service: BenchService;
  redis: RedisUnderTest;
  spec: Omit<LoadSpec, 'target'>;
  round: number;
  loadgenCpus: string;
  /** The load generator process (ours by default). */
  driver?: LoadDriver;
  /** Label of the load shape, recorded in the sample. */
  shape?: string;
  /** Called right after the measured window opens (e.g. to trigger a reload). */
  onWindowStart?: () => void;
}

export async function measure(o: MeasureOptions): Promise<Sample> {
  const spec: LoadSpec = { ...o.spec, target: o.service.grpcTarget };
  const driver = o.driver ?? loadgenDriver;
  const child = spawn('taskset', ['-c', o.loadgenCpus, ...driver.argv(spec)], {
    cwd: REPO_ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  let start:
    | {
        svc: number;
        redis: number;
        calls: number;
        byCommand: Record<string, number>;
        at: number;
        steal: number[];
      }
    | undefined;
  let end: typeof start;
  let pending: Promise<void> = Promise.resolve();
  const sample = async () => {
    const at = Date.now();
    const steal = stealMsPerCpu();
    const c = await o.redis.commandCalls();
    return {
      at,
      steal,
      svc: cpuSeconds(o.service.pid),
      redis: o.redis.cpuSeconds(),
      calls: c.total,
      byCommand: c.byCommand,
    };
  };
  let result: LoadResult | undefined;
  let buf = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => {
    buf += d;
    let nl: number;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      if (line === 'MEASURE_START') {
        pending = pending.then(async () => {
          start = await sample();
        });
        o.onWindowStart?.();
      } else if (line === 'MEASURE_END') {
        pending = pending.then(async () => {
          end = await sample();
        });
      } else if (line.startsWith('{')) result = JSON.parse(line) as LoadResult;
    }
  });
  const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
  await pending;
  if (!result || !start || !end) {
    throw new Error(
      `load generator ${driver.name} failed (exit ${code}) against ${o.service.kind}: ${stderr.slice(-2000)}`,
    );
  }
  const n = Math.max(1, result.completed);
  const svcCpu = end.svc - start.svc;
  const windowSec = result.windowMs / 1000;
  const byCommand: Record<string, number> = {};
  for (const [k, v] of Object.entries(end.byCommand)) {
    const d = v - (start.byCommand[k] ?? 0);
    if (d > 0) byCommand[k] = Math.round((d / n) * 1000) / 1000;
  }
  return {
    service: o.service.kind,
    workload: spec.workload,
    round: o.round,
    mode: spec.mode,
    targetRate: spec.rate,
    shape: o.shape,
    driver: driver.name,
    callsPerSecond: result.callsPerSecond,
    completed: result.completed,
    errors: result.errors,
    ok: result.ok,
    overLimit: result.overLimit,
    latency: result.latency,
    sentLatency: result.sentLatency,
    serviceCpuSec: svcCpu,
    serviceCores: svcCpu / windowSec,
    decisionsPerCoreSecond: svcCpu > 0 ? result.completed / svcCpu : 0,
    redisCommandsPerDecision: (end.calls - start.calls) / n,
    redisCpuUsPerDecision: ((end.redis - start.redis) * 1e6) / n,
    serviceCpuUsPerDecision: (svcCpu * 1e6) / n,
    loadgenCores: result.cpuMs / result.windowMs,
    driverLoopMaxMs: result.driverLoopMaxMs,
    redisByCommand: byCommand,
    firstError: result.firstError,
    windowStartMs: start.at,
    windowEndMs: end.at,
    stealMs: end.steal.map((v, i) => v - (start!.steal[i] ?? v)),
  };
}

export interface Stat {
  median: number;
  min: number;
  max: number;
  n: number;
}

export function stat(values: number[]): Stat {
  const v = values.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return { median: NaN, min: NaN, max: NaN, n: 0 };
  const mid = Math.floor(v.length / 2);
  const median = v.length % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
  return { median, min: v[0], max: v[v.length - 1], n: v.length };
}
