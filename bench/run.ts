// The benchmark harness: `npm run bench [-- --quick] [--no-reference] [--workloads=hot,uniform]`.
// Starts Redis, our service and (when built) the reference Go service, pins them (services on core 0,
// Redis, the load generator and this process on core 1), then runs the selected phases (phases/index.ts:
// decision check, saturation, latency, memory, reload, ...) with rounds interleaved (ours, reference, ours,
// reference, ...) and writes bench-results/<stamp>/{results.json, report.md, chart.svg} (and
// bench-results/latest/). Options: options.ts; what each figure means: docs/performance.md.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { makeTempDir, removeTempDir } from '../harness/net.js';
import { parseArgs as parseOptions, type BenchOptions } from './options.js';
import { DRIVER_NAMES, ensureGoDriver, goDriver, loadgenDriver, type LoadDriver } from './harness/drivers.js';
import { computeFigures, copyToLatest, renderFrom, writeOutputs } from './outputs.js';
import { AUX_CPUS, PHASE_NAMES, PHASES, SERVICE_CPUS, type PhaseContext } from './phases/index.js';
import { markdownTable, type Figure } from './report/table.js';
import type { BenchResults } from './report/results.js';
import { BenchRedis, BenchService, pin, RuntimeDir, type ServiceKind } from './harness/services.js';
import { combineRuns, summaryTable } from './report/summary.js';
import { OURS_LOOP_PROBE_FILE, pauseOursProbe } from './harness/loop-probe.js';
import { configFiles, WORKLOADS } from './load/workloads.js';

export type { BenchOptions } from './options.js';
export type { BenchResults, CheckResult } from './report/results.js';
export { PHASE_NAMES as ALL_PHASES } from './phases/index.js';

/** The options of a command line, with the phases of this registry as the ones `--phases=` may name. */
export function parseArgs(argv: string[]): BenchOptions {
  return parseOptions(argv, PHASE_NAMES);
}

/** `--help`: what can be chosen, without starting anything; every option is described in bench/README.md. */
export function helpText(): string {
  return (
    'usage: npm run bench -- [--quick] [--no-reference] [--runs=N] [--phases=a,b] [--workloads=a,b]\n' +
    '                        [--shapes=CxN,...] [--drivers=a,b] [--out=DIR] [--render=results.json] ...\n' +
    `phases:    ${PHASE_NAMES.join(',')}\n` +
    `workloads: ${WORKLOADS.join(',')}\n` +
    `drivers:   ${DRIVER_NAMES.join(',')}\n` +
    'Every option, its default and what a run costs: bench/README.md.\n'
  );
}

/** The drivers of `o.drivers` that can run here (ours always; go when Go is present to build it). */
function resolveDrivers(o: BenchOptions, tmp: string): LoadDriver[] {
  const drivers: LoadDriver[] = [];
  if (o.drivers.includes('loadgen')) drivers.push(loadgenDriver);
  if (o.drivers.includes('go')) {
    const bin = ensureGoDriver(o.log);
    if (bin) drivers.push(goDriver(bin, tmp));
  }
  return drivers.length ? drivers : [loadgenDriver];
}

/** One whole run: services up, every selected phase, outputs in o.outDir. */
export async function runBench(o: BenchOptions, copyLatest = true): Promise<BenchResults> {
  const log = o.log;
  pin(process.pid, AUX_CPUS);
  mkdirSync(o.outDir, { recursive: true });
  const tmp = makeTempDir('ratelimit-bench');
  // One config directory per service, the same files in each: a file written for one service's
  // measurement is not also parsed by the other (both are pinned to the same core).
  const runtime = new RuntimeDir(join(tmp, 'runtime'));
  const referenceRuntime = new RuntimeDir(join(tmp, 'runtime-reference'));
  for (const [name, text] of Object.entries(configFiles(0))) {
    runtime.write(name, text);
    referenceRuntime.write(name, text);
  }

  const results: BenchResults = {
    meta: {
      date: new Date().toISOString(),
      node: process.version,
      serviceNode: o.node ?? process.execPath,
      cpus: cpus().map((c) => c.model)[0],
      cores: cpus().length,
      loadavgAtStart: loadavg(),
      options: { ...o, phases: [...o.phases], log: undefined },
      pinning: { services: SERVICE_CPUS, redisLoadgenHarness: AUX_CPUS },
    },
    samples: [],
    p99Under5ms: {},
    rss: {},
    reload: {},
    json: {},
    h2load: {},
    extra: {},
    figures: [],
  };
  const selected = PHASES.filter((p) => o.phases.has(p.name));
  const redis = await BenchRedis.start(AUX_CPUS);
  const svcs: PhaseContext['svcs'] = {};
  const kinds: ServiceKind[] = ['ours'];
  let keyBase = 0;
  const drivers = resolveDrivers(o, tmp);
  results.meta.drivers = drivers.map((d) => d.name);
  results.meta.shapes = o.shapes.map((x) => x.label);
  const ctx: PhaseContext = {
    o,
    kinds,
    drivers,
    svcs,
    redis,
    runtime,
    tmp,
    results,
    log,
    each: async (fn, rounds = o.rounds) => {
      for (let round = 0; round < rounds; round++) for (const k of kinds) await fn(svcs[k]!, round);
    },
    eachVariant: async (fn, rounds = o.rounds) => {
      for (let round = 0; round < rounds; round++)
        for (const shape of o.shapes)
          for (const driver of drivers) for (const k of kinds) await fn(svcs[k]!, round, { shape, driver });
    },
    nextKeyBase: (step = 10_000_000) => (keyBase += step),
    record: (s, label) => {
      results.samples.push(s);
      log(
        `${label}: ${s.callsPerSecond}/s, ${Math.round(s.decisionsPerCoreSecond)}/core-s, ` +
          `p50 ${(s.latency.p50Us / 1000).toFixed(2)} p99 ${(s.latency.p99Us / 1000).toFixed(2)} ` +
          `p99.9 ${(s.latency.p999Us / 1000).toFixed(2)} ms, redis ${s.redisCommandsPerDecision.toFixed(2)} cmd/dec, ` +
          `svc ${s.serviceCores.toFixed(2)} cores, loadgen ${s.loadgenCores.toFixed(2)}, errors ${s.errors}`,
      );
    },
  };
  try {
    const common = {
      redisUrl: redis.url,
      cpus: SERVICE_CPUS,
      logDir: o.outDir,
      localCacheBytes: 256 << 20,
    };
    svcs.ours = await BenchService.start({
      kind: 'ours',
      runtime,
      ...common,
      node: o.node,
      nodeArgs: [
        ...(o.profile ? ['--cpu-prof', `--cpu-prof-dir=${o.outDir}`] : []),
        ...(o.traceGc ? ['--trace-gc'] : []),
        ...o.oursNodeFlags,
      ],
      loopProbeFile: join(o.outDir, OURS_LOOP_PROBE_FILE),
    });
    // Off until a phase that reads it asks (loop-probe.ts `whileProbed`).
    pauseOursProbe(o.outDir);
    if (o.reference && BenchService.referenceBinary()) {
      svcs.reference = await BenchService.start({ kind: 'reference', runtime: referenceRuntime, ...common });
      kinds.push('reference');
    } else if (o.reference) {
      log('reference service not available: measuring ours only (build it with scripts/build-go-tools.sh)');
    } else log('reference skipped (--no-reference)');
    results.meta.reference = svcs.reference ? BenchService.referenceBinary() : null;
    log(`services up: ${kinds.join(', ')}; redis ${redis.url}; results in ${o.outDir}`);
    for (const p of selected) if (p.needs !== 'standalone') await p.run(ctx);
  } finally {
    for (const k of kinds) await svcs[k]?.stop();
    await redis.stop();
  }
  try {
    for (const p of selected) if (p.needs === 'standalone') await p.run(ctx);
  } finally {
    removeTempDir(tmp);
  }
  results.meta.loadavgAtEnd = loadavg();
  results.figures = computeFigures(results, o);
  writeOutputs(results, o, copyLatest);
  return results;
}

export interface RepeatedResults {
  meta: Record<string, unknown>;
  /** Output directories of the runs (run-1, run-2, ...). */
  runs: string[];
  /** Every run's decision check identical (undefined without the reference). */
  identical: boolean | undefined;
  figures: Figure[];
}

/**
 * `--runs=N`: N whole runs one after another into o.outDir/run-<i>/, then results.json, report.md and
 * summary.md of the combination (median of the per-run medians, min–max of the runs) in o.outDir.
 */
export async function runRepeated(o: BenchOptions): Promise<RepeatedResults> {
  const t0 = Date.now();
  const runs: BenchResults[] = [];
  const dirs: string[] = [];
  for (let i = 1; i <= o.runs; i++) {
    const dir = join(o.outDir, `run-${i}`);
    o.log(`=== run ${i} of ${o.runs} (${dir}) ===`);
    runs.push(await runBench({ ...o, outDir: dir }, false));
    dirs.push(dir);
  }
  const meta = {
    date: new Date(t0).toISOString(),
    minutes: Math.round((Date.now() - t0) / 6000) / 10,
    runs: o.runs,
    node: process.version,
    options: { ...o, phases: [...o.phases], log: undefined },
    loadavgAtEnd: loadavg(),
  };
  const out = writeCombined(meta, runs, dirs, o.outDir);
  copyToLatest(o.outDir);
  return out;
}

/** results.json, report.md and summary.md of several runs in `outDir`. */
function writeCombined(
  meta: Record<string, unknown>,
  runs: BenchResults[],
  dirs: string[],
  outDir: string,
): RepeatedResults {
  const checks = runs.map((r) => r.check?.identical);
  const out: RepeatedResults = {
    meta,
    runs: dirs,
    identical: checks.includes(false) ? false : checks.includes(true) ? true : undefined,
    figures: combineRuns(runs),
  };
  const n = runs.length;
  writeFileSync(join(outDir, 'results.json'), JSON.stringify(out, null, 2) + '\n');
  const head =
    `# Benchmark ${String(meta.date)}: ${n} runs (${String(meta.minutes)} min)\n\n` +
    `Each cell: the median of the ${n} runs' medians (min–max of the runs); ours/ref: the ratio of ` +
    `those medians (min–max of the runs' own ratios). Decision check identical in every run: ` +
    `${out.identical ?? 'n/a (no reference)'}. The runs: ${dirs.map((d) => d.split('/').pop()).join(', ')}.\n\n`;
  writeFileSync(join(outDir, 'report.md'), head + markdownTable(out.figures));
  writeFileSync(join(outDir, 'summary.md'), head + summaryTable(out.figures));
  return out;
}

/** `--render=<results.json>` of a single run, or of several (each run re-rendered, then combined). */
function render(path: string): Figure[] {
  const r = JSON.parse(readFileSync(path, 'utf8')) as Partial<RepeatedResults>;
  if (!Array.isArray(r.runs)) return renderFrom(path).figures;
  const runs = r.runs.map((d) => renderFrom(join(d, 'results.json')));
  return writeCombined(r.meta ?? {}, runs, r.runs, dirname(path)).figures;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  if (process.argv.includes('--help') || process.argv.includes('-h')) {
    process.stdout.write(helpText());
    process.exit(0);
  }
  const renderArg = process.argv.find((a) => a.startsWith('--render='));
  if (renderArg) {
    process.stdout.write(markdownTable(render(renderArg.slice('--render='.length))));
    process.exit(0);
  }
  const o = parseArgs(process.argv.slice(2));
  const done =
    o.runs > 1
      ? runRepeated(o).then((r) => ({ figures: r.figures, identical: r.identical }))
      : runBench(o).then((r) => ({ figures: r.figures, identical: r.check?.identical }));
  done.then(
    (r) => {
      process.stdout.write(markdownTable(r.figures));
      process.stdout.write('\n' + summaryTable(r.figures));
      process.stdout.write(`\nresults: ${o.outDir}/results.json, report.md, summary.md\n`);
      process.exit(r.identical === false ? 1 : 0);
    },
    (err) => {
      process.stderr.write(`bench failed: ${(err as Error).stack ?? String(err)}\n`);
      process.exit(1);
    },
  );
}
