// What a benchmark phase is. A phase is one module in this directory exporting a `Phase`, listed once in
// `phases/index.ts`; the orchestrator (run.ts) runs the selected phases in that order with one context.
//
// Adding a phase: write `phases/<name>.ts` exporting `export const <name>Phase: Phase = { name, run, figures }`,
// add it to PHASES in index.ts. Keep its records in `ctx.results.extra[name]` (or a typed field of
// BenchResults) and turn them into table rows in `figures` (see figures.ts for `figureAdder`).
import { execFile, spawnSync } from 'node:child_process';
import { promisify } from 'node:util';
import type { LoadDriver, Shape } from '../harness/drivers.js';
import { measure, type MeasureOptions, type Sample } from '../harness/measure.js';
import type { BenchOptions } from '../options.js';
import type { Figure } from '../report/table.js';
import type { BenchResults } from '../report/results.js';
import type { BenchRedis, BenchService, RuntimeDir, ServiceKind } from '../harness/services.js';
import type { WorkloadName } from '../load/workloads.js';

/** Services under test on core 0, one under load at a time; Redis, load generators and harness on core 1. */
export const SERVICE_CPUS = '0';
export const AUX_CPUS = '1';

export interface PhaseContext {
  o: BenchOptions;
  /** Every service of this run, in interleaving order (ours first). */
  kinds: ServiceKind[];
  svcs: Partial<Record<ServiceKind, BenchService>>;
  redis: BenchRedis;
  /** Our service's config directory (each service has its own: `svc.runtime`). */
  runtime: RuntimeDir;
  /** Scratch directory of this run (removed at the end). */
  tmp: string;
  results: BenchResults;
  log: (msg: string) => void;
  /** The load drivers available in this run (`loadgen` first; `go` when asked for and built). */
  drivers: LoadDriver[];
  /** Runs `fn` for every service, `rounds` times, interleaved: ours, reference, ours, reference, ... */
  each(fn: (svc: BenchService, round: number) => Promise<void>, rounds?: number): Promise<void>;
  /** As `each`, for every load shape and driver too: per round, per shape, per driver, every service. */
  eachVariant(
    fn: (svc: BenchService, round: number, v: Variant) => Promise<void>,
    rounds?: number,
  ): Promise<void>;
  /** A fresh first key number for the highcard workload (distinct keys across runs of one service). */
  nextKeyBase(step?: number): number;
  /** Records a measured sample and logs its one-line summary. */
  record(s: Sample, label: string): void;
}

/** One way of loading a service: a shape and a driver. */
export interface Variant {
  shape: Shape;
  driver: LoadDriver;
}

export interface Phase {
  /** The name `--phases=` selects it by. */
  name: string;
  /** 'services' (default): runs while Redis and the services are up. 'standalone': after they stopped
   *  (the phase starts its own processes, e.g. the xDS fan-out). */
  needs?: 'services' | 'standalone';
  run(ctx: PhaseContext): Promise<void>;
  /** Table rows from this phase's records (called again by `--render`). */
  figures?(r: BenchResults, o: BenchOptions): Figure[];
}

/**
 * One measured run of `svc` under variant `v` (its driver, and its shape's connections) after a FLUSHALL,
 * the load generator on the aux core.
 */
export async function measureVariant(
  ctx: PhaseContext,
  svc: BenchService,
  round: number,
  v: Variant,
  spec: Omit<MeasureOptions['spec'], 'connections'>,
): Promise<Sample> {
  await ctx.redis.flushAll();
  return measure({
    service: svc,
    redis: ctx.redis,
    round,
    loadgenCpus: AUX_CPUS,
    driver: v.driver,
    shape: v.shape.label,
    spec: { connections: v.shape.connections, ...spec },
  });
}

/**
 * The unrecorded warm-up pass before a phase's first round: each service under closed-loop load for
 * `warmupPassMs` per workload (the first shape, our driver). Our service's code is compiled by V8 as it
 * runs: a service that has served only a few calls answers its first ~10k calls at 1k/s with a p99 about
 * 0.5 ms higher while the compiler catches up (docs/performance.md); the reference has no such warm-up.
 */
export async function warmUpPass(ctx: PhaseContext, workloads: readonly WorkloadName[]): Promise<void> {
  const { o, kinds, svcs, redis } = ctx;
  const [shape0] = o.shapes;
  for (const w of workloads) {
    for (const k of kinds) {
      await measure({
        service: svcs[k]!,
        redis,
        round: -1,
        loadgenCpus: AUX_CPUS,
        spec: {
          connections: shape0.connections,
          inFlight: shape0.inFlight,
          warmupMs: 0,
          durationMs: o.warmupPassMs,
          workload: w,
          seed: 1,
          keyBase: ctx.nextKeyBase(),
          mode: 'closed',
        },
      });
    }
  }
  ctx.log('warm-up pass done');
}

const execFileP = promisify(execFile);

/** Whether h2load (Debian `nghttp2-client`) is installed; the json and h2load phases skip without it. */
export function h2loadInstalled(): boolean {
  return spawnSync('h2load', ['--version'], { stdio: 'ignore' }).status === 0;
}

/** Runs `h2load` on the aux core and returns its requests/s (null when h2load is missing or fails). */
export async function h2load(args: string[]): Promise<number | null> {
  try {
    const { stdout } = await execFileP('taskset', ['-c', AUX_CPUS, 'h2load', ...args], { timeout: 120_000 });
    const m = /finished in [\d.]+m?s, ([\d.]+) req\/s/.exec(stdout);
    const done = /requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded/.exec(stdout);
    if (!m) return null;
    if (done && Number(done[2]) < Number(done[1]) * 0.99) return null;
    return Number(m[1]);
  } catch {
    return null;
  }
}
