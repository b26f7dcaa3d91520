// The outputs of a run: figures from every phase's records, results.json, report.md, chart.svg (and a copy
// to bench-results/latest/); `--render` rebuilds them from an earlier results.json.
import { cpSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { stat } from './harness/measure.js';
import type { BenchOptions } from './options.js';
import { PHASES } from './phases/index.js';
import { markdownTable, svgChart, type ChartWorkload, type Figure } from './report/table.js';
import type { BenchResults } from './report/results.js';
import { REPO_ROOT } from './harness/services.js';
import { summaryTable } from './report/summary.js';
import { driverOf, shapeOf } from './report/figures.js';
import type { WorkloadName } from './load/workloads.js';

/** Every phase's figures, grouped (a workload's rows together) in the order groups first appear. */
export function computeFigures(r: BenchResults, o: BenchOptions): Figure[] {
  const all = PHASES.flatMap((p) => p.figures?.(r, o) ?? []);
  const order = new Map<string, number>();
  for (const f of all) if (!order.has(f.group)) order.set(f.group, order.size);
  return all
    .map((f, i) => ({ f, i }))
    .sort((a, b) => order.get(a.f.group)! - order.get(b.f.group)! || a.i - b.i)
    .map((x) => x.f);
}

/** The chart shows the first load shape with our driver (the full table has every shape and driver). */
function chartRows(r: BenchResults, o: BenchOptions): ChartWorkload[] {
  const first = r.samples.find((s) => s.round >= 0);
  const shape0 = first ? shapeOf(first) : undefined;
  const samples = r.samples.filter((s) => shapeOf(s) === shape0 && driverOf(s) === 'loadgen');
  const lat = (w: WorkloadName, k: string) =>
    o.rates
      .map((rate) => {
        const ss = samples.filter(
          (s) => s.workload === w && s.service === k && s.mode === 'open' && s.targetRate === rate,
        );
        if (ss.length === 0) return undefined;
        return {
          rate,
          v: [
            stat(ss.map((s) => s.latency.p50Us)).median,
            stat(ss.map((s) => s.latency.p99Us)).median,
            stat(ss.map((s) => s.latency.p999Us)).median,
          ],
        };
      })
      .filter((x) => x !== undefined);
  return o.workloads
    .filter((w) => samples.some((s) => s.workload === w))
    .map((w) => {
      const tp = (k: string) =>
        stat(
          samples
            .filter((s) => s.workload === w && s.service === k && s.mode === 'closed' && s.round >= 0)
            .map((s) => s.decisionsPerCoreSecond),
        );
      const ours = lat(w, 'ours');
      const ref = lat(w, 'reference');
      return {
        workload: w,
        throughput: {
          ours: tp('ours'),
          reference: samples.some((s) => s.service === 'reference') ? tp('reference') : undefined,
        },
        latency: ours.map((l) => ({
          rate: l.rate,
          ours: l.v,
          reference: ref.find((x) => x.rate === l.rate)?.v,
        })),
      };
    });
}

export function writeOutputs(r: BenchResults, o: BenchOptions, copyLatest = true): void {
  writeFileSync(join(o.outDir, 'results.json'), JSON.stringify(r, null, 2) + '\n');
  writeFileSync(
    join(o.outDir, 'chart.svg'),
    svgChart(chartRows(r, o), `ratelimit benchmark ${String(r.meta.date).slice(0, 16)} — ours vs reference`),
  );
  writeFileSync(join(o.outDir, 'summary.md'), summaryTable(r.figures));
  const check = r.check
    ? `Decision check: ${r.check.requests} requests, identical: ${r.check.identical ?? 'n/a (no reference)'}${r.check.mismatches.length ? `, first mismatch ${JSON.stringify(r.check.mismatches[0])}` : ''}\n\n`
    : '';
  writeFileSync(
    join(o.outDir, 'report.md'),
    `# Benchmark ${r.meta.date}\n\nload average at start ${JSON.stringify(r.meta.loadavgAtStart)}, at end ${JSON.stringify(r.meta.loadavgAtEnd)}\n\n${check}${markdownTable(r.figures)}`,
  );
  if (copyLatest) copyToLatest(o.outDir);
}

/** Only runs written under bench-results/ become `latest` (not tests writing to a temp dir). */
export function copyToLatest(outDir: string): void {
  const latest = join(REPO_ROOT, 'bench-results', 'latest');
  if (outDir !== latest && outDir.startsWith(join(REPO_ROOT, 'bench-results') + '/')) {
    rmSync(latest, { recursive: true, force: true });
    cpSync(outDir, latest, { recursive: true });
  }
}

/** Recomputes figures, report and chart of an earlier run from its results.json (`--render=<path>`). */
export function renderFrom(path: string): BenchResults {
  const r = JSON.parse(readFileSync(path, 'utf8')) as BenchResults;
  r.extra ??= {};
  const saved = r.meta.options as Omit<BenchOptions, 'phases' | 'log'> & { phases: string[] };
  const o: BenchOptions = { ...saved, phases: new Set(saved.phases), outDir: dirname(path), log: () => {} };
  r.figures = computeFigures(r, o);
  writeOutputs(r, o, false);
  return r;
}
