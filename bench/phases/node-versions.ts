// The "nodes" phase (ours only): the same built service run by two Node.js binaries side by side — the
// harness' own (or --node) and --compare-node — on the same Redis and config, each workload measured in
// interleaved rounds (A, B, A, B, ...). Reports decisions per core-second per Node version and the
// per-round ratio compare/base. Install another Node with `scripts/install-node.sh --version=X.Y.Z`.
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { stat, type Sample, type Stat } from '../harness/measure.js';
import type { Figure } from '../report/table.js';
import { BenchService, RuntimeDir } from '../harness/services.js';
import { configFiles, WORKLOAD_TITLES, type WorkloadName } from '../load/workloads.js';
import { armsContext, interleavedRounds, pairedRatios, type ArmsContext } from './interleave.js';
import type { Phase } from './phase.js';

export const NODE_PHASE_WORKLOADS: readonly WorkloadName[] = ['hot', 'uniform', 'desc3'];

export interface NodeVersionsResult {
  base: { node: string; version: string };
  compare: { node: string; version: string };
  workloads: Partial<
    Record<
      WorkloadName,
      { base: Sample[]; compare: Sample[]; baseDps: Stat; compareDps: Stat; compareOverBase: Stat }
    >
  >;
}

function versionOf(node: string): string {
  return execFileSync(node, ['--version'], { encoding: 'utf8' }).trim();
}

export async function runNodeVersionsPhase(
  ctx: ArmsContext,
  nodes: { base?: string; compare: string },
  workloads: readonly WorkloadName[] = NODE_PHASE_WORKLOADS,
): Promise<NodeVersionsResult> {
  const baseNode = nodes.base ?? process.execPath;
  const base = { node: baseNode, version: versionOf(baseNode) };
  const compare = { node: nodes.compare, version: versionOf(nodes.compare) };
  if (base.version === compare.version) ctx.log(`nodes phase: both binaries are ${base.version}`);
  const runtime = new RuntimeDir(join(ctx.tmpDir, 'nodes-runtime'));
  for (const [name, text] of Object.entries(configFiles(0))) runtime.write(name, text);
  const common = {
    kind: 'ours' as const,
    runtime,
    redisUrl: ctx.redis.url,
    cpus: ctx.serviceCpus,
    logDir: ctx.logDir,
    localCacheBytes: ctx.localCacheBytes,
  };
  const services: BenchService[] = [];
  const result: NodeVersionsResult = { base, compare, workloads: {} };
  try {
    const a = await BenchService.start({ ...common, node: base.node, logName: `ours-node-${base.version}` });
    services.push(a);
    const b = await BenchService.start({
      ...common,
      node: compare.node,
      logName: `ours-node-${compare.version}`,
    });
    services.push(b);
    for (const w of workloads) {
      const labels = [`${w} node ${base.version}`, `${w} node ${compare.version} (compare)`];
      const byLabel = await interleavedRounds(ctx, [
        { label: labels[0], service: a, workload: w },
        { label: labels[1], service: b, workload: w },
      ]);
      const sa = byLabel.get(labels[0])!;
      const sb = byLabel.get(labels[1])!;
      const r = {
        base: sa,
        compare: sb,
        baseDps: stat(sa.map((s) => s.decisionsPerCoreSecond)),
        compareDps: stat(sb.map((s) => s.decisionsPerCoreSecond)),
        compareOverBase: pairedRatios(sb, sa, (s) => s.decisionsPerCoreSecond),
      };
      result.workloads[w] = r;
      ctx.log(
        `nodes ${w}: ${base.version} ${Math.round(r.baseDps.median)}/core-s, ${compare.version} ` +
          `${Math.round(r.compareDps.median)}/core-s, ratio ${r.compareOverBase.median.toFixed(2)}`,
      );
    }
  } finally {
    for (const s of services) await s.stop();
  }
  return result;
}

export function nodeVersionFigures(r: NodeVersionsResult): Figure[] {
  const out: Figure[] = [];
  for (const [w, f] of Object.entries(r.workloads) as [
    WorkloadName,
    NonNullable<NodeVersionsResult['workloads'][WorkloadName]>,
  ][]) {
    const group = `Node versions (ours): ${WORKLOAD_TITLES[w]}`;
    out.push(
      {
        group,
        name: `decisions per core-second on ${r.base.version}`,
        unit: 'calls / CPU-s',
        better: 'higher',
        ours: f.baseDps,
      },
      {
        group,
        name: `decisions per core-second on ${r.compare.version}`,
        unit: 'calls / CPU-s',
        better: 'higher',
        ours: f.compareDps,
      },
      {
        group,
        name: `${r.compare.version} ÷ ${r.base.version}, same round`,
        unit: 'ratio',
        better: 'higher',
        ours: f.compareOverBase,
      },
    );
  }
  return out;
}

/** Phase `nodes` (ours only, with --compare-node): the same dist/ on two Node binaries, interleaved. */
export const nodesPhase: Phase = {
  name: 'nodes',
  run: async (ctx) => {
    if (!ctx.o.compareNode) return ctx.log('nodes phase skipped: no --compare-node');
    ctx.results.extra.nodes = await runNodeVersionsPhase(armsContext(ctx), {
      base: ctx.o.node,
      compare: ctx.o.compareNode,
    });
  },
  figures: (r) => {
    const n = r.extra.nodes as NodeVersionsResult | undefined;
    return n ? nodeVersionFigures(n) : [];
  },
};
