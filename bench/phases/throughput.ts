// Phase `throughput`: saturation, closed loop, for every load shape and driver, after one unrecorded pass
// per service and workload (JIT warm-up); rounds interleaved (per round: shape, driver, service). Its
// figures, per shape and driver: decisions per core-second, calls/s, p99 at saturation, Redis commands
// and Redis / service CPU per decision.
import type { Sample } from '../harness/measure.js';
import type { BenchOptions } from '../options.js';
import type { Figure, TargetRule } from '../report/table.js';
import type { BenchResults } from '../report/results.js';
import {
  COUNT_TOLERANCE,
  driverOf,
  figureAdder,
  shapeOf,
  variantLabel,
  variantsOf,
} from '../report/figures.js';
import { WORKLOAD_TITLES, type WorkloadName } from '../load/workloads.js';
import { measureVariant, warmUpPass, type Phase, type PhaseContext } from './phase.js';

/** Closed-loop samples of workload `w` and service `k` (of one shape and driver when given). */
export const closedSamples = (
  r: BenchResults,
  w: string,
  k: string,
  v?: { shape: string; driver: string },
): Sample[] =>
  r.samples.filter(
    (s) =>
      s.workload === w &&
      s.service === k &&
      s.mode === 'closed' &&
      s.round >= 0 &&
      (!v || (shapeOf(s) === v.shape && driverOf(s) === v.driver)),
  );

/** Targets on decisions per core-second (ours/reference). */
const THROUGHPUT_TARGET: Partial<Record<WorkloadName, number>> = {
  hot: 1.5,
  uniform: 1.5,
  desc3: 1.5,
  desc8: 1.5,
};

async function run(ctx: PhaseContext): Promise<void> {
  const { o } = ctx;
  await warmUpPass(ctx, o.workloads);
  for (const w of o.workloads) {
    await ctx.eachVariant(async (svc, round, v) => {
      const s = await measureVariant(ctx, svc, round, v, {
        inFlight: v.shape.inFlight,
        warmupMs: o.warmupMs,
        durationMs: o.durationMs,
        workload: w,
        seed: 1000 + round,
        keyBase: ctx.nextKeyBase(),
        mode: 'closed',
      });
      ctx.record(s, `${w} ${svc.kind} ${v.shape.label} ${v.driver.name} r${round}`);
    });
  }
}

function figures(r: BenchResults, o: BenchOptions): Figure[] {
  const out: Figure[] = [];
  const add = figureAdder(r, out);
  for (const w of o.workloads) {
    const g = WORKLOAD_TITLES[w];
    for (const v of variantsOf(r.samples, (s) => s.workload === w && s.mode === 'closed' && s.round >= 0)) {
      const by = (k: string) => closedSamples(r, w, k, v);
      const vl = variantLabel(v);
      const key = (metric: string) => ({ workload: w, metric, shape: v.shape, driver: v.driver });
      const tp = THROUGHPUT_TARGET[w];
      const redisTarget: TargetRule = { ratioMax: w === 'hot' ? 0.5 : 1.0, tolerance: COUNT_TOLERANCE };
      add(
        g,
        `decisions per core-second at saturation ${vl}`,
        'calls / CPU-s',
        'higher',
        (k) => by(k).map((s) => s.decisionsPerCoreSecond),
        tp ? { ratioMin: tp } : undefined,
        key('decisionsPerCoreSecond'),
      );
      add(
        g,
        `calls per second at saturation (wall clock, 1 pinned core) ${vl}`,
        'calls/s',
        'higher',
        (k) => by(k).map((s) => s.callsPerSecond),
        undefined,
        key('callsPerSecond'),
      );
      add(
        g,
        `p99 at saturation ${vl}`,
        'ms',
        'lower',
        (k) => by(k).map((s) => s.latency.p99Us / 1000),
        undefined,
        key('p99AtSaturation'),
      );
      add(
        g,
        `Redis commands per decision ${vl}`,
        'commands',
        'lower',
        (k) => by(k).map((s) => s.redisCommandsPerDecision),
        redisTarget,
        key('redisCommandsPerDecision'),
      );
      add(
        g,
        `Redis CPU per decision ${vl}`,
        'µs',
        'lower',
        (k) => by(k).map((s) => s.redisCpuUsPerDecision),
        undefined,
        key('redisCpuUsPerDecision'),
      );
      add(
        g,
        `service CPU per decision ${vl}`,
        'µs',
        'lower',
        (k) => by(k).map((s) => s.serviceCpuUsPerDecision),
        undefined,
        key('serviceCpuUsPerDecision'),
      );
      add(
        g,
        `load generator CPU per call ${vl}`,
        'µs',
        'lower',
        (k) => by(k).map((s) => (s.loadgenCores * 1e6) / Math.max(1, s.callsPerSecond)),
        undefined,
        key('driverCpuUsPerCall'),
      );
      // Core 1 holds the driver and Redis: near 1.0 the generator side, not the service, sets the pace.
      add(
        g,
        `core 1 busy: driver + Redis (share of the core) ${vl}`,
        'cores',
        'lower',
        (k) => by(k).map((s) => s.loadgenCores + (s.redisCpuUsPerDecision * s.callsPerSecond) / 1e6),
        undefined,
        key('auxCoreBusy'),
      );
    }
  }
  return out;
}

export const throughputPhase: Phase = { name: 'throughput', run, figures };
