// Phase `p99`: the highest open-loop rate with p99 under 5 ms, per load shape (our driver), in steps at
// fractions of the service's own saturation rate with that shape (measured by the throughput phase).
import { loadgenDriver } from '../harness/drivers.js';
import { stat } from '../harness/measure.js';
import type { Figure } from '../report/table.js';
import type { BenchResults } from '../report/results.js';
import { figureAdder } from '../report/figures.js';
import { WORKLOAD_TITLES } from '../load/workloads.js';
import { measureVariant, type Phase, type PhaseContext } from './phase.js';
import { closedSamples } from './throughput.js';

/** Key of a p99Under5ms record: workload and shape (runs before shapes: the workload alone). */
const recKey = (w: string, shape: string) => `${w}/${shape}`;

async function run(ctx: PhaseContext): Promise<void> {
  const { o, kinds, svcs, results, log } = ctx;
  for (const w of o.latencyWorkloads.filter((x) => o.workloads.includes(x))) {
    for (const shape of o.shapes) {
      const rec: Record<string, number> = (results.p99Under5ms[recKey(w, shape.label)] = {});
      for (const k of kinds) {
        const sat = stat(
          closedSamples(results, w, k, { shape: shape.label, driver: loadgenDriver.name }).map(
            (s) => s.callsPerSecond,
          ),
        ).median;
        if (!Number.isFinite(sat)) continue;
        let best = 0;
        for (const f of o.quick ? [0.25, 0.5] : [0.1, 0.25, 0.5, 0.75, 1.0]) {
          const rate = Math.max(100, Math.round(sat * f));
          const s = await measureVariant(
            ctx,
            svcs[k]!,
            0,
            { shape, driver: loadgenDriver },
            {
              warmupMs: o.warmupMs,
              durationMs: Math.min(o.durationMs, 5000),
              workload: w,
              seed: 7,
              mode: 'open',
              rate,
            },
          );
          const okRate = s.callsPerSecond >= rate * 0.95 && s.errors === 0;
          log(
            `p99 search ${w} ${k} ${shape.label} @${rate}/s: p99 ${(s.latency.p99Us / 1000).toFixed(2)} ms, got ${s.callsPerSecond}/s`,
          );
          if (okRate && s.latency.p99Us < 5000) best = Math.max(best, s.callsPerSecond);
          else break;
        }
        rec[k] = best;
      }
    }
  }
}

function figures(r: BenchResults): Figure[] {
  const out: Figure[] = [];
  const add = figureAdder(r, out);
  for (const [key, rec] of Object.entries(r.p99Under5ms)) {
    const [w, shape = '4x16'] = key.split('/');
    add(
      WORKLOAD_TITLES[w as keyof typeof WORKLOAD_TITLES] ?? w,
      `highest tested rate with p99 < 5 ms [${shape}, loadgen]`,
      'calls/s',
      'higher',
      (k) => (rec[k] !== undefined ? [rec[k]] : []),
      undefined,
      { workload: w, metric: 'rateWithP99Under5ms', shape, driver: 'loadgen' },
    );
  }
  return out;
}

export const p99Phase: Phase = { name: 'p99', run, figures };
