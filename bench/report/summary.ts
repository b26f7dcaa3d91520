// Two views of figures beyond the full table: the compact summary (one row per workload, load shape and
// driver — the layout of the README's performance table) and the combination of several whole runs
// (`--runs=N`: each figure is the median of the per-run medians, with the runs' min–max beside it).
import { stat } from '../harness/measure.js';
import { cell, evaluateTarget, ratio, type Figure } from './table.js';
import type { BenchResults } from './results.js';
import { WORKLOAD_TITLES, type WorkloadName } from '../load/workloads.js';

/** One figure per group and name: the median over runs of each run's median (min–max of the runs). */
export function combineRuns(runs: BenchResults[]): Figure[] {
  const order: string[] = [];
  const byId = new Map<string, Figure[]>();
  for (const r of runs)
    for (const f of r.figures) {
      const id = `${f.group}\u0000${f.name}`;
      if (!byId.has(id)) {
        byId.set(id, []);
        order.push(id);
      }
      byId.get(id)!.push(f);
    }
  return order.map((id) => {
    const fs = byId.get(id)!;
    const { group, name, unit, better, key } = fs[0];
    const f: Figure = { group, name, unit, better, ours: stat(fs.map((x) => x.ours.median)) };
    if (key) f.key = key;
    if (fs.some((x) => x.reference)) f.reference = stat(fs.map((x) => x.reference?.median ?? NaN));
    f.ratioRuns = stat(fs.map(ratio));
    const rule = fs.find((x) => x.target?.rule)?.target?.rule;
    if (rule) f.target = evaluateTarget(rule, f);
    return f;
  });
}

const fmtRatio = (f: Figure | undefined): string => {
  if (!f) return '–';
  const r = ratio(f);
  if (!Number.isFinite(r)) return '–';
  const spread =
    f.ratioRuns && f.ratioRuns.n > 1 ? ` (${f.ratioRuns.min.toFixed(2)}–${f.ratioRuns.max.toFixed(2)})` : '';
  const met = f.target ? (f.target.met === undefined ? '' : f.target.met ? ' ✅' : ' ❌') : '';
  return `${r.toFixed(2)}x${spread}${met}`;
};
const pair = (f: Figure | undefined): string =>
  f ? `${cell(f.ours)} / ${f.reference ? cell(f.reference) : '–'}` : '–';

/**
 * The summary: per workload, load shape and driver, decisions per core-second (ours, reference, ratio and
 * its target), p99 and p99.9 ratios at 1k/s and 2k/s, Redis commands and Redis CPU per decision.
 */
export function summaryTable(figures: Figure[]): string {
  const keyed = figures.filter((f) => f.key?.shape);
  const rows = new Map<string, { workload: string; shape: string; driver: string }>();
  for (const f of keyed) {
    const k = f.key!;
    rows.set(`${k.workload} ${k.shape} ${k.driver}`, {
      workload: k.workload,
      shape: k.shape!,
      driver: k.driver ?? 'loadgen',
    });
  }
  const find = (row: { workload: string; shape: string; driver: string }, metric: string, rate?: number) =>
    keyed.find(
      (f) =>
        f.key!.workload === row.workload &&
        f.key!.shape === row.shape &&
        (f.key!.driver ?? 'loadgen') === row.driver &&
        f.key!.metric === metric &&
        f.key!.rate === rate,
    );
  const lines = [
    '| Workload | Load shape | Driver | Decisions per core-second: ours | reference | ours/ref | p99 at 1k/s ours/ref | p99.9 at 1k/s | p99 at 2k/s | p99.9 at 2k/s | Redis commands per decision: ours / ref | Redis CPU per decision (µs): ours / ref |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|',
  ];
  for (const row of rows.values()) {
    const tp = find(row, 'decisionsPerCoreSecond');
    lines.push(
      `| ${WORKLOAD_TITLES[row.workload as WorkloadName] ?? row.workload} | ${row.shape} | ${row.driver} | ${tp ? cell(tp.ours) : '–'} | ${tp?.reference ? cell(tp.reference) : '–'} | ${fmtRatio(tp)} | ` +
        `${fmtRatio(find(row, 'p99Us', 1000))} | ${fmtRatio(find(row, 'p99.9Us', 1000))} | ${fmtRatio(find(row, 'p99Us', 2000))} | ${fmtRatio(find(row, 'p99.9Us', 2000))} | ` +
        `${pair(find(row, 'redisCommandsPerDecision'))} | ${pair(find(row, 'redisCpuUsPerDecision'))} |`,
    );
  }
  return lines.join('\n') + '\n';
}
