// Shared by the ours-only phases that compare variants of our own service (algorithms, Node versions):
// what a phase gets from the orchestrator, and interleaved rounds over a list of arms (service +
// workload), each measured by measure.ts exactly like the throughput phase measures ours and the reference.
import { measure, stat, type Sample, type Stat } from '../harness/measure.js';
import type { BenchRedis, BenchService } from '../harness/services.js';
import type { WorkloadName } from '../load/workloads.js';
import { AUX_CPUS, SERVICE_CPUS, type PhaseContext } from './phase.js';

export interface ArmsContext {
  redis: BenchRedis;
  /** CPU list of the services under test, and of Redis, the load generator and the harness. */
  serviceCpus: string;
  auxCpus: string;
  /** Where the phase's services write their logs (the run's output directory). */
  logDir: string;
  /** A scratch directory the orchestrator removes at the end. */
  tmpDir: string;
  localCacheBytes: number;
  rounds: number;
  durationMs: number;
  warmupMs: number;
  /** Unrecorded load per arm before the first round (JIT warm-up). */
  warmupPassMs: number;
  log: (msg: string) => void;
}

/** The ours-only phases' context, from the orchestrator's. */
export function armsContext(ctx: PhaseContext): ArmsContext {
  const o = ctx.o;
  return {
    redis: ctx.redis,
    serviceCpus: SERVICE_CPUS,
    auxCpus: AUX_CPUS,
    logDir: o.outDir,
    tmpDir: ctx.tmp,
    localCacheBytes: 256 << 20,
    rounds: o.rounds,
    durationMs: o.durationMs,
    warmupMs: o.warmupMs,
    warmupPassMs: o.warmupPassMs,
    log: ctx.log,
  };
}

/** One thing measured per round: a service under one workload (optionally sent to another domain). */
export interface Arm {
  label: string;
  service: BenchService;
  workload: WorkloadName;
  domain?: string;
}

/**
 * One warm-up pass per arm, then `ctx.rounds` rounds, each measuring every arm in turn (FLUSHALL before
 * each run), closed loop with 64 calls in flight on 4 connections as the throughput phase. Returns the
 * samples per arm label, in round order; each sample's `workload` is the arm's label.
 */
export async function interleavedRounds(ctx: ArmsContext, arms: Arm[]): Promise<Map<string, Sample[]>> {
  const out = new Map<string, Sample[]>(arms.map((a) => [a.label, []]));
  const run = async (arm: Arm, round: number, warm: boolean): Promise<Sample> => {
    await ctx.redis.flushAll();
    const s = await measure({
      service: arm.service,
      redis: ctx.redis,
      round,
      loadgenCpus: ctx.auxCpus,
      spec: {
        workload: arm.workload,
        domain: arm.domain,
        seed: 1000 + round,
        mode: 'closed',
        connections: 4,
        concurrency: 64,
        warmupMs: warm ? 0 : ctx.warmupMs,
        durationMs: warm ? ctx.warmupPassMs : ctx.durationMs,
      },
    });
    return { ...s, workload: arm.label };
  };
  for (const arm of arms) await run(arm, -1, true);
  ctx.log('warm-up pass done');
  for (let round = 0; round < ctx.rounds; round++) {
    // The order alternates (A B, B A, ...) so that no arm always runs first after the warm-up or last.
    for (const arm of round % 2 ? [...arms].reverse() : arms) {
      const s = await run(arm, round, false);
      out.get(arm.label)!.push(s);
      ctx.log(
        `${arm.label} r${round}: ${s.callsPerSecond}/s, ${Math.round(s.decisionsPerCoreSecond)}/core-s, ` +
          `redis ${s.redisCommandsPerDecision.toFixed(2)} cmd/dec ${s.redisCpuUsPerDecision.toFixed(1)} µs/dec, ` +
          `svc ${s.serviceCores.toFixed(2)} cores, loadgen ${s.loadgenCores.toFixed(2)}, errors ${s.errors}`,
      );
    }
  }
  return out;
}

/** Per round, a's figure divided by b's (rounds paired by index): the ratio robust to drifting load. */
export function pairedRatios(a: Sample[], b: Sample[], pick: (s: Sample) => number): Stat {
  const r: number[] = [];
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    const d = pick(b[i]);
    if (d > 0) r.push(pick(a[i]) / d);
  }
  return stat(r);
}
