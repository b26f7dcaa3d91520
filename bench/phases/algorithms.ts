// The "algorithms" phase (ours only; the reference has no algorithms): the uniform workload (10k keys,
// every decision admitted and counted) through the real gRPC path of the built service, against one
// config in four variants that differ only in how they count — fixed_window, sliding_window,
// token_bucket, and a `rate_limits:` list of two limits (token bucket per second + fixed day) — each in
// its own domain of one service, measured in interleaved rounds. Reports per variant: decisions per
// core-second, its ratio to our fixed window in the same round (target ≥ 0.9x), Redis commands sent
// per descriptor (EVALSHA/EVAL, or INCRBY + EXPIRE), commands Redis executed (with those run inside the
// script) and Redis CPU per decision.
import { join } from 'node:path';
import { stat, type Sample, type Stat } from '../harness/measure.js';
import type { Figure } from '../report/table.js';
import { BenchService, RuntimeDir } from '../harness/services.js';
import { armsContext, interleavedRounds, pairedRatios, type ArmsContext } from './interleave.js';
import type { Phase } from './phase.js';

/** Never reached in a run: every decision is admitted and counted (as the uniform workload's config). */
const HUGE = 1_000_000_000;
const TARGET_RATIO = 0.9;

export const ALGORITHM_VARIANTS = {
  fixed_window: `rate_limit: { unit: minute, requests_per_unit: ${HUGE} }`,
  sliding_window: `rate_limit: { unit: minute, requests_per_unit: ${HUGE}, algorithm: sliding_window }`,
  token_bucket: `rate_limit: { unit: minute, requests_per_unit: ${HUGE}, algorithm: token_bucket }`,
  rate_limits: [
    'rate_limits:',
    `      - { unit: second, requests_per_unit: ${HUGE}, algorithm: token_bucket }`,
    `      - { unit: day, requests_per_unit: ${HUGE} }`,
  ].join('\n'),
} as const;
export type AlgorithmVariant = keyof typeof ALGORITHM_VARIANTS;
const VARIANTS = Object.keys(ALGORITHM_VARIANTS) as AlgorithmVariant[];

export const algorithmDomain = (v: AlgorithmVariant): string => `bench_algo_${v}`;

/** The config file of one variant: the uniform workload's (`user`, any value), counted differently. */
export function algorithmConfigYaml(v: AlgorithmVariant): string {
  return `domain: ${algorithmDomain(v)}\ndescriptors:\n  - key: user\n    ${ALGORITHM_VARIANTS[v]}\n`;
}

export interface AlgorithmVariantResult {
  samples: Sample[];
  decisionsPerCoreSecond: Stat;
  /** Per round: this variant's decisions per core-second ÷ the fixed window's in the same round. */
  ratioToFixedWindow: Stat;
  /** What the service sent: EVALSHA + EVAL when the script ran, else every command (INCRBY + EXPIRE). */
  commandsSentPerDescriptor: Stat;
  /** What Redis executed, commands run inside the script included (INFO commandstats counts them). */
  commandsExecutedPerDescriptor: Stat;
  redisCpuUsPerDecision: Stat;
  serviceCpuUsPerDecision: Stat;
}

export interface AlgorithmsResult {
  node: string;
  variants: Record<AlgorithmVariant, AlgorithmVariantResult>;
}

function commandsSent(s: Sample): number {
  const scripted = (s.redisByCommand.evalsha ?? 0) + (s.redisByCommand.eval ?? 0);
  return scripted > 0 ? scripted : s.redisCommandsPerDecision;
}

/** Runs the phase on its own instance of our service (its own config directory), then stops it. */
export async function runAlgorithmsPhase(ctx: ArmsContext, node?: string): Promise<AlgorithmsResult> {
  const runtime = new RuntimeDir(join(ctx.tmpDir, 'algorithms-runtime'));
  for (const v of VARIANTS) runtime.write(`${algorithmDomain(v)}.yaml`, algorithmConfigYaml(v));
  const service = await BenchService.start({
    kind: 'ours',
    logName: 'ours-algorithms',
    runtime,
    redisUrl: ctx.redis.url,
    cpus: ctx.serviceCpus,
    logDir: ctx.logDir,
    localCacheBytes: ctx.localCacheBytes,
    node,
  });
  let byLabel: Map<string, Sample[]>;
  try {
    // Every variant must decide (OK, counted) before it is measured: a config refused at load would
    // answer every call OK without counting and look fast.
    for (const v of VARIANTS) {
      const r = await service.call({ domain: algorithmDomain(v), descriptors: [[['user', 'probe']]] });
      const st = r.statuses?.[0];
      if (r.overallCode !== 'OK' || !st?.currentLimit)
        throw new Error(`algorithms phase: ${v} is not limited by the service: ${JSON.stringify(r)}`);
    }
    byLabel = await interleavedRounds(
      ctx,
      VARIANTS.map((v) => ({ label: v, service, workload: 'uniform' as const, domain: algorithmDomain(v) })),
    );
  } finally {
    await service.stop();
  }
  const fixed = byLabel.get('fixed_window')!;
  const variants = {} as Record<AlgorithmVariant, AlgorithmVariantResult>;
  for (const v of VARIANTS) {
    const ss = byLabel.get(v)!;
    variants[v] = {
      samples: ss,
      decisionsPerCoreSecond: stat(ss.map((s) => s.decisionsPerCoreSecond)),
      ratioToFixedWindow: pairedRatios(ss, fixed, (s) => s.decisionsPerCoreSecond),
      commandsSentPerDescriptor: stat(ss.map(commandsSent)),
      commandsExecutedPerDescriptor: stat(ss.map((s) => s.redisCommandsPerDecision)),
      redisCpuUsPerDecision: stat(ss.map((s) => s.redisCpuUsPerDecision)),
      serviceCpuUsPerDecision: stat(ss.map((s) => s.serviceCpuUsPerDecision)),
    };
    const f = variants[v];
    ctx.log(
      `algorithms ${v}: ${Math.round(f.decisionsPerCoreSecond.median)}/core-s, ` +
        `${f.ratioToFixedWindow.median.toFixed(2)}x fixed window, ${f.commandsSentPerDescriptor.median} cmd sent/desc, ` +
        `redis ${f.redisCpuUsPerDecision.median.toFixed(1)} µs/dec`,
    );
  }
  return { node: node ?? process.execPath, variants };
}

/** The phase's rows of the report table (ours only: the reference column stays empty). */
export function algorithmFigures(r: AlgorithmsResult): Figure[] {
  const group = 'algorithms (ours, 10k uniform keys)';
  const out: Figure[] = [];
  for (const v of VARIANTS) {
    const f = r.variants[v];
    if (!f) continue;
    out.push({
      group,
      name: `${v}: decisions per core-second`,
      unit: 'calls / CPU-s',
      better: 'higher',
      ours: f.decisionsPerCoreSecond,
    });
    if (v !== 'fixed_window')
      out.push({
        group,
        name: `${v}: ÷ fixed_window decisions per core-second, same round`,
        unit: 'ratio',
        better: 'higher',
        ours: f.ratioToFixedWindow,
        target: {
          text: `≥ ${TARGET_RATIO}x fixed_window`,
          met: f.ratioToFixedWindow.n > 0 ? f.ratioToFixedWindow.median >= TARGET_RATIO : undefined,
        },
      });
    out.push({
      group,
      name: `${v}: Redis commands sent per descriptor`,
      unit: 'commands',
      better: 'lower',
      ours: f.commandsSentPerDescriptor,
      target:
        v === 'fixed_window'
          ? undefined
          : // Calls in flight at the window's edges are counted on one side only: ±2 % is counting noise.
            { text: '1', met: Math.abs(f.commandsSentPerDescriptor.median - 1) <= 0.02 },
    });
    out.push({
      group,
      name: `${v}: Redis commands executed per descriptor (inside the script included)`,
      unit: 'commands',
      better: 'lower',
      ours: f.commandsExecutedPerDescriptor,
    });
    out.push({
      group,
      name: `${v}: Redis CPU per decision`,
      unit: 'µs',
      better: 'lower',
      ours: f.redisCpuUsPerDecision,
    });
    out.push({
      group,
      name: `${v}: service CPU per decision`,
      unit: 'µs',
      better: 'lower',
      ours: f.serviceCpuUsPerDecision,
    });
  }
  return out;
}

/** Phase `algorithms` (ours only): fixed window, sliding window, token bucket and a rate_limits list. */
export const algorithmsPhase: Phase = {
  name: 'algorithms',
  run: async (ctx) => {
    ctx.results.extra.algorithms = await runAlgorithmsPhase(armsContext(ctx), ctx.o.node);
  },
  figures: (r) => {
    const a = r.extra.algorithms as AlgorithmsResult | undefined;
    return a ? algorithmFigures(a) : [];
  },
};
