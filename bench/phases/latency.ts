// Phase `latency`: p50 / p99 / p99.9 at fixed open-loop rates (latency counted from each call's intended
// start; p50 / p99 also from each call's actual send), for every load shape (its connection count) and
// driver, after one unrecorded pass per service and workload (JIT warm-up); rounds interleaved.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  OURS_LOOP_PROBE_FILE,
  probeTimeOrigin,
  readProbe,
  startJitterProbes,
  whileProbed,
  windowAllocation,
} from '../harness/loop-probe.js';
import type { Sample } from '../harness/measure.js';
import type { BenchOptions } from '../options.js';
import type { Figure } from '../report/table.js';
import type { BenchResults } from '../report/results.js';
import { driverOf, figureAdder, shapeOf, variantLabel, variantsOf } from '../report/figures.js';
import { WORKLOAD_TITLES, type WorkloadName } from '../load/workloads.js';
import { parseTraceGc, tailRows, tailsMarkdown, type GcPause } from '../harness/tails.js';
import {
  AUX_CPUS,
  measureVariant,
  SERVICE_CPUS,
  warmUpPass,
  type Phase,
  type PhaseContext,
} from './phase.js';

/** The rates whose p99 and p99.9 have a target: no worse than the reference's, on every workload. */
const TARGET_RATES = new Set([1000, 2000]);

async function run(ctx: PhaseContext): Promise<void> {
  const { o } = ctx;
  await warmUpPass(ctx, latencyWorkloads(o));
  // Tail attribution: an idle probe process on each core while the rounds run (tails.ts).
  const probes = startJitterProbes(o.outDir, { services: SERVICE_CPUS, aux: AUX_CPUS });
  const labels = new Map<object, string>();
  // Our service's probe runs for the rounds, unless `--latency-probe=off`: then our service carries no
  // observer the reference does not.
  try {
    await whileProbed(o.outDir, o.latencyProbe, () => rounds(ctx, labels));
  } finally {
    await probes.stop();
  }
  // The probes flush every second: read them after they stopped.
  allocationPerDecision(
    ctx.results.samples.filter((s) => labels.has(s) && s.service === 'ours'),
    o.outDir,
  );
  const rows = tailRows(
    ctx.results.samples.filter((s) => labels.has(s)),
    Object.fromEntries(Object.entries(probes.files).map(([k, f]) => [k, readProbe(f)])),
    readProbe(join(o.outDir, OURS_LOOP_PROBE_FILE)),
    (s) => labels.get(s)!,
    o.traceGc ? oursGcPauses(o.outDir) : undefined,
  );
  ctx.results.extra.tails = rows;
  writeFileSync(join(o.outDir, 'tails.md'), tailsMarkdown(rows));
}

/** Garbage per decision and GC pauses of each of our samples, from our service's loop probe. */
function allocationPerDecision(samples: Sample[], dir: string): void {
  let text: string;
  try {
    text = readFileSync(join(dir, OURS_LOOP_PROBE_FILE), 'utf8');
  } catch {
    return;
  }
  const pct = (v: number[], p: number) =>
    v.length === 0 ? 0 : v[Math.min(v.length - 1, Math.ceil((p / 100) * v.length) - 1)];
  for (const s of samples) {
    if (s.windowStartMs === undefined || s.windowEndMs === undefined) continue;
    const a = windowAllocation(text, s.windowStartMs, s.windowEndMs);
    if (!a || s.callsPerSecond <= 0) continue;
    s.heapBytesPerDecision = a.bytes / ((s.callsPerSecond * a.spanMs) / 1000);
    s.gcPauses = a.gcPausesMs.length;
    s.gcPauseP50Ms = pct(a.gcPausesMs, 50);
    s.gcPauseP99Ms = pct(a.gcPausesMs, 99);
    s.gcPauseMaxMs = pct(a.gcPausesMs, 100);
  }
}

/** Our service's GC pauses (--trace-gc lines in its log), on the epoch clock of its loop probe. */
function oursGcPauses(dir: string): GcPause[] | undefined {
  try {
    const origin = probeTimeOrigin(readFileSync(join(dir, OURS_LOOP_PROBE_FILE), 'utf8'));
    if (origin === undefined) return undefined;
    return parseTraceGc(readFileSync(join(dir, 'ours.log'), 'utf8'), origin);
  } catch {
    return undefined;
  }
}

/** The latency workloads this run measures (those of `--latency-workloads` also in `--workloads`). */
function latencyWorkloads(o: BenchOptions): WorkloadName[] {
  return o.latencyWorkloads.filter((x) => o.workloads.includes(x));
}

async function rounds(ctx: PhaseContext, labels: Map<object, string>): Promise<void> {
  const { o } = ctx;
  for (const w of latencyWorkloads(o)) {
    for (const rate of o.rates) {
      await ctx.eachVariant(async (svc, round, v) => {
        const s = await measureVariant(ctx, svc, round, v, {
          warmupMs: o.warmupMs,
          durationMs: o.latencyDurationMs,
          workload: w,
          seed: 2000 + round,
          mode: 'open',
          rate,
        });
        const label = `${w} ${v.shape.label} ${v.driver.name} @${rate}/s r${round}`;
        labels.set(s, label);
        ctx.record(s, `${w} ${svc.kind} ${v.shape.label} ${v.driver.name} @${rate}/s r${round}`);
      }, o.latencyRounds);
    }
  }
}

function figures(r: BenchResults, o: BenchOptions): Figure[] {
  const out: Figure[] = [];
  const add = figureAdder(r, out);
  for (const w of o.workloads) {
    for (const rate of o.rates) {
      const at = (s: BenchResults['samples'][number]) =>
        s.workload === w && s.mode === 'open' && s.targetRate === rate;
      for (const v of variantsOf(r.samples, at)) {
        const by = (k: string) =>
          r.samples.filter(
            (s) => at(s) && s.service === k && shapeOf(s) === v.shape && driverOf(s) === v.driver,
          );
        for (const [q, field] of [
          ['p50', 'p50Us'],
          ['p99', 'p99Us'],
          ['p99.9', 'p999Us'],
        ] as const) {
          add(
            WORKLOAD_TITLES[w],
            `${q} at ${rate}/s (open loop) ${variantLabel(v)}`,
            'µs',
            'lower',
            (k) => by(k).map((s) => s.latency[field]),
            q !== 'p50' && TARGET_RATES.has(rate) ? { ratioMax: 1.0 } : undefined,
            { workload: w, metric: `${q}Us`, shape: v.shape, driver: v.driver, rate },
          );
        }
        // The same calls timed from their actual send: the driver's lateness in starting them left out
        // (at 1k/s most of the median above is the driver's own 1 ms timer).
        for (const [q, field] of [
          ['p50', 'p50Us'],
          ['p99', 'p99Us'],
        ] as const) {
          add(WORKLOAD_TITLES[w], `${q} from send at ${rate}/s ${variantLabel(v)}`, 'µs', 'lower', (k) =>
            by(k)
              .map((s) => s.sentLatency?.[field])
              .filter((x): x is number => x !== undefined),
          );
        }
        // Beside the latencies: our garbage per decision and GC pauses in the same windows (loop probe).
        const oursOnly = (f: (s: Sample) => number | undefined) => (k: string) =>
          k === 'ours'
            ? by(k)
                .map(f)
                .filter((x): x is number => x !== undefined)
            : [];
        add(
          WORKLOAD_TITLES[w],
          `V8 heap allocated per decision at ${rate}/s ${variantLabel(v)}`,
          'B',
          'lower',
          oursOnly((s) => s.heapBytesPerDecision),
        );
        for (const [q, pick] of [
          ['p50', (s: Sample) => s.gcPauseP50Ms],
          ['p99', (s: Sample) => s.gcPauseP99Ms],
          ['longest', (s: Sample) => s.gcPauseMaxMs],
        ] as const)
          add(
            WORKLOAD_TITLES[w],
            `GC pause ${q} at ${rate}/s ${variantLabel(v)}`,
            'ms',
            'lower',
            oursOnly(pick),
          );
      }
    }
  }
  return out;
}

export const latencyPhase: Phase = { name: 'latency', run, figures };
