// Phase `cluster` (standalone): our service and the reference side by side on one Redis Cluster of three
// masters (the harness' real cluster, every node on the aux core), both with REDIS_TYPE=cluster and the
// same config files. Hot key, 10k uniform keys and three descriptors per request (their keys spread over
// the slots, so over the masters); per workload, shape and driver, in interleaved rounds: decisions per
// core-second at saturation, p99 at 1k and 2k calls/s (open loop), Redis commands per decision (INFO
// commandstats summed over the masters, before and after each window), and the ratios ours/reference of
// each round.
import { join } from 'node:path';
import { measure, stat, type Sample, type Stat } from '../harness/measure.js';
import { BenchRedisCluster } from '../harness/redis-cluster.js';
import { BenchService, RuntimeDir } from '../harness/services.js';
import type { LoadDriver, Shape } from '../harness/drivers.js';
import { configFiles, WORKLOAD_TITLES, type WorkloadName } from '../load/workloads.js';
import type { BenchOptions } from '../options.js';
import type { BenchResults } from '../report/results.js';
import type { Figure } from '../report/table.js';
import { evaluateTarget } from '../report/table.js';
import { AUX_CPUS, SERVICE_CPUS, type Phase } from './phase.js';

export const CLUSTER_WORKLOADS: readonly WorkloadName[] = ['hot', 'uniform', 'desc3'];
/** The rates whose p99 the phase measures (open loop). */
export const CLUSTER_RATES: readonly number[] = [1000, 2000];
/**
 * The reference's write flush interval on a cluster: its README requires a non-zero
 * REDIS_PIPELINE_WINDOW in cluster mode and suggests 150–500 µs. Ours runs with its defaults (below).
 */
export const REFERENCE_CLUSTER_ENV = { REDIS_PIPELINE_WINDOW: '150us' };
/**
 * Ours: its defaults, and a longer bound on the first config's parse (the 10k-descriptor file among the
 * bench domains runs on a low-priority thread; on a shared machine that took over the default 30 s).
 */
export const OURS_CLUSTER_ENV = { REDIS_TYPE: 'cluster', CONFIG_PARSE_TIMEOUT: '150s' };

export interface ClusterPhaseOptions {
  workloads: readonly WorkloadName[];
  rates: readonly number[];
  shapes: readonly Shape[];
  drivers: readonly LoadDriver[];
  rounds: number;
  durationMs: number;
  latencyRounds: number;
  latencyDurationMs: number;
  warmupMs: number;
  warmupPassMs: number;
  /** Measure the reference too (when its binary is built). */
  reference: boolean;
  /** Another build's bin/ratelimit.js, measured as the arm `ours-base` (`--base`). */
  baseBin?: string;
  /** Node flags for our service (GC settings, --cpu-prof). */
  oursNodeArgs: string[];
  logDir: string;
  tmpDir: string;
  log: (msg: string) => void;
}

/** One cell: a workload under one shape and driver, saturated or at one rate. */
export interface ClusterCell {
  workload: WorkloadName;
  shape: string;
  driver: string;
  /** Open-loop rate; absent at saturation. */
  rate?: number;
  samples: Partial<Record<ClusterArm, Sample[]>>;
}

/** `ours-base`: another build of ours (`--base`), to measure a change before and after in one run. */
export type ClusterArm = 'ours' | 'reference' | 'ours-base';

export interface ClusterResult {
  masters: number;
  referenceEnv: Record<string, string>;
  cells: ClusterCell[];
}

/** Per round, ours ÷ the reference's (or ÷ another arm's; rounds paired by index). */
export function roundRatios(
  c: ClusterCell,
  pick: (s: Sample) => number,
  over: ClusterArm = 'reference',
): Stat {
  const a = c.samples.ours ?? [];
  const b = c.samples[over] ?? [];
  const r: number[] = [];
  for (let i = 0; i < Math.min(a.length, b.length); i++) if (pick(b[i]) > 0) r.push(pick(a[i]) / pick(b[i]));
  return stat(r);
}

export async function runClusterPhase(o: ClusterPhaseOptions): Promise<ClusterResult> {
  const redis = await BenchRedisCluster.start(AUX_CPUS);
  const svcs: Partial<Record<ClusterArm, BenchService>> = {};
  const kinds: ClusterArm[] = [];
  const result: ClusterResult = {
    masters: redis.masters.length,
    referenceEnv: REFERENCE_CLUSTER_ENV,
    cells: [],
  };
  try {
    const common = {
      redisUrl: redis.urls,
      cpus: SERVICE_CPUS,
      logDir: o.logDir,
      localCacheBytes: 256 << 20,
    };
    const runtimeOf = (k: ClusterArm) => {
      const rt = new RuntimeDir(join(o.tmpDir, `cluster-runtime-${k}`));
      for (const [name, text] of Object.entries(configFiles(0))) rt.write(name, text);
      return rt;
    };
    svcs.ours = await BenchService.start({
      ...common,
      kind: 'ours',
      runtime: runtimeOf('ours'),
      logName: 'cluster-ours',
      nodeArgs: o.oursNodeArgs,
      env: OURS_CLUSTER_ENV,
    });
    kinds.push('ours');
    if (o.baseBin) {
      svcs['ours-base'] = await BenchService.start({
        ...common,
        kind: 'ours',
        bin: o.baseBin,
        runtime: runtimeOf('ours-base'),
        logName: 'cluster-ours-base',
        nodeArgs: o.oursNodeArgs.filter((a) => !a.startsWith('--cpu-prof')),
        env: OURS_CLUSTER_ENV,
      });
      kinds.push('ours-base');
    }
    if (o.reference && BenchService.referenceBinary()) {
      svcs.reference = await BenchService.start({
        ...common,
        kind: 'reference',
        runtime: runtimeOf('reference'),
        logName: 'cluster-reference',
        env: { REDIS_TYPE: 'cluster', ...REFERENCE_CLUSTER_ENV },
      });
      kinds.push('reference');
    } else o.log('cluster phase: measuring ours only (no reference binary, or --no-reference)');
    o.log(`cluster phase: ${redis.masters.length} masters at ${redis.urls}; ${kinds.join(', ')}`);

    const run = async (
      k: ClusterArm,
      w: WorkloadName,
      round: number,
      shape: Shape,
      driver: LoadDriver | undefined,
      rate?: number,
      warm = false,
    ): Promise<Sample> => {
      await redis.flushAll();
      return measure({
        service: svcs[k]!,
        redis,
        round,
        loadgenCpus: AUX_CPUS,
        driver,
        shape: shape.label,
        spec: {
          workload: w,
          seed: (rate ? 2000 : 1000) + round,
          connections: shape.connections,
          ...(rate ? { mode: 'open' as const, rate } : { mode: 'closed' as const, inFlight: shape.inFlight }),
          warmupMs: warm ? 0 : o.warmupMs,
          durationMs: warm ? o.warmupPassMs : rate ? o.latencyDurationMs : o.durationMs,
        },
      });
    };
    // JIT warm-up: one unrecorded closed-loop pass per service and workload.
    for (const w of o.workloads)
      for (const k of kinds) await run(k, w, -1, o.shapes[0], undefined, undefined, true);
    o.log('cluster phase: warm-up pass done');

    const measureCells = async (rate: number | undefined, rounds: number) => {
      for (const w of o.workloads) {
        const cells = new Map<string, ClusterCell>();
        for (let round = 0; round < rounds; round++) {
          for (const shape of o.shapes) {
            for (const driver of o.drivers) {
              const key = `${shape.label} ${driver.name}`;
              let cell = cells.get(key);
              if (!cell) {
                cell = { workload: w, shape: shape.label, driver: driver.name, rate, samples: {} };
                cells.set(key, cell);
                result.cells.push(cell);
              }
              // A B C, then C B A: no service always runs first.
              for (const k of round % 2 ? [...kinds].reverse() : kinds) {
                const s = await run(k, w, round, shape, driver, rate);
                (cell.samples[k] ??= []).push(s);
                o.log(
                  `cluster ${w} ${k} ${key}${rate ? ` @${rate}/s` : ''} r${round}: ${s.callsPerSecond}/s, ` +
                    `${Math.round(s.decisionsPerCoreSecond)}/core-s, p99 ${(s.latency.p99Us / 1000).toFixed(2)} ms, ` +
                    `redis ${s.redisCommandsPerDecision.toFixed(2)} cmd/dec ${s.redisCpuUsPerDecision.toFixed(1)} µs/dec, ` +
                    `errors ${s.errors}`,
                );
              }
            }
          }
        }
      }
    };
    await measureCells(undefined, o.rounds);
    for (const rate of o.rates) await measureCells(rate, o.latencyRounds);
  } finally {
    for (const k of kinds) await svcs[k]?.stop();
    await redis.stop();
  }
  return result;
}

const median = (v: number[]) => stat(v);

/** Report rows: per cell, ours, the reference, the ratio of medians and the per-round ratios. */
export function clusterFigures(r: ClusterResult): Figure[] {
  const out: Figure[] = [];
  const push = (
    c: ClusterCell,
    name: string,
    unit: string,
    better: Figure['better'],
    pick: (s: Sample) => number,
    target?: { ratioMin?: number; ratioMax?: number; tolerance?: number },
  ) => {
    const f: Figure = {
      group: `Redis Cluster (${r.masters} masters): ${WORKLOAD_TITLES[c.workload]}`,
      name: `${name} [${c.shape}, ${c.driver}]`,
      unit,
      better,
      ours: median((c.samples.ours ?? []).map(pick)),
    };
    if (c.samples.reference) f.reference = median(c.samples.reference.map(pick));
    if (target && f.reference) f.target = evaluateTarget(target, f);
    out.push(f);
    if (f.reference)
      out.push({
        group: f.group,
        name: `${name}, ours ÷ reference of each round [${c.shape}, ${c.driver}]`,
        unit: 'ratio',
        better,
        ours: roundRatios(c, pick),
      });
    if (c.samples['ours-base'])
      out.push({
        group: f.group,
        name: `${name}, ours ÷ the --base build of each round [${c.shape}, ${c.driver}]`,
        unit: 'ratio',
        better,
        ours: roundRatios(c, pick, 'ours-base'),
      });
  };
  for (const c of r.cells) {
    if (c.rate === undefined) {
      push(
        c,
        'decisions per core-second at saturation',
        'calls / CPU-s',
        'higher',
        (s) => s.decisionsPerCoreSecond,
        {
          ratioMin: 4.5,
        },
      );
      push(c, 'Redis commands per decision', 'commands', 'lower', (s) => s.redisCommandsPerDecision, {
        ratioMax: c.workload === 'hot' ? 0.5 : 1.0,
        tolerance: 0.02,
      });
      push(c, 'Redis CPU per decision', 'µs', 'lower', (s) => s.redisCpuUsPerDecision);
    } else {
      push(c, `p99 at ${c.rate}/s`, 'ms', 'lower', (s) => s.latency.p99Us / 1000, { ratioMax: 0.9 });
      push(c, `service CPU per decision at ${c.rate}/s`, 'µs', 'lower', (s) => s.serviceCpuUsPerDecision);
    }
  }
  return out;
}

/** The phase's options from the run's: `--workloads` narrows the three, `--rates` above 2k/s are left out. */
export function clusterOptions(
  o: BenchOptions,
  drivers: readonly LoadDriver[],
  tmpDir: string,
  log: (m: string) => void,
): ClusterPhaseOptions {
  const workloads = CLUSTER_WORKLOADS.filter((w) => o.workloads.includes(w));
  const rates = o.rates.filter((x) => CLUSTER_RATES.includes(x));
  return {
    workloads,
    rates,
    shapes: o.shapes,
    drivers,
    rounds: o.rounds,
    durationMs: o.durationMs,
    latencyRounds: o.latencyRounds,
    latencyDurationMs: o.latencyDurationMs,
    warmupMs: o.warmupMs,
    warmupPassMs: o.warmupPassMs,
    reference: o.reference,
    baseBin: o.base ? join(o.base, 'bin', 'ratelimit.js') : undefined,
    oursNodeArgs: [
      ...(o.profile ? ['--cpu-prof', `--cpu-prof-dir=${join(o.outDir, 'cluster-profile')}`] : []),
      ...o.oursNodeFlags,
    ],
    logDir: o.outDir,
    tmpDir,
    log,
  };
}

export const clusterPhase: Phase = {
  name: 'cluster',
  needs: 'standalone',
  run: async (ctx) => {
    ctx.results.extra.cluster = await runClusterPhase(clusterOptions(ctx.o, ctx.drivers, ctx.tmp, ctx.log));
  },
  figures: (r: BenchResults) => {
    const c = r.extra.cluster as ClusterResult | undefined;
    return c ? clusterFigures(c) : [];
  },
};
