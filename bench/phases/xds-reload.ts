// Phase `xds-reload` (standalone, ours only): a 10k-descriptor config pushed over xDS to our service
// (xds-reload.ts): time until the new version answers, and the service's longest event-loop stall during
// the push against the second before it.
import { stat } from '../harness/measure.js';
import type { Figure } from '../report/table.js';
import type { BenchResults } from '../report/results.js';
import { measureXdsReload, type XdsReloadResult } from './xds-reload-process.js';
import { SERVICE_CPUS, type Phase } from './phase.js';

function figures(r: BenchResults): Figure[] {
  const x = r.extra['xds-reload'] as XdsReloadResult | undefined;
  if (!x || x.rounds.length === 0) return [];
  const group = `xDS push of ${x.descriptors.toLocaleString('en-US')} descriptors (ours)`;
  const row = (name: string, pick: (v: XdsReloadResult['rounds'][number]) => number): Figure => ({
    group,
    name,
    unit: 'ms',
    better: 'lower',
    ours: stat(x.rounds.map(pick)),
  });
  return [
    row('time until the pushed config serves', (v) => v.appliedMs),
    row('longest event-loop stall in the service during the push', (v) => v.stallMs),
    row('longest event-loop stall in the second before the push (control)', (v) => v.controlStallMs),
  ];
}

export const xdsReloadPhase: Phase = {
  name: 'xds-reload',
  needs: 'standalone',
  run: async (ctx) => {
    try {
      ctx.results.extra['xds-reload'] = await measureXdsReload({
        outDir: ctx.o.outDir,
        rounds: ctx.o.reloads,
        cpus: SERVICE_CPUS,
        // The same flags as the main service: the shipped GC setting is what a push is measured with.
        nodeFlags: [...(ctx.o.traceGc ? ['--trace-gc'] : []), ...ctx.o.oursNodeFlags],
      });
    } catch (err) {
      ctx.log(`xds-reload failed: ${(err as Error).message}`);
    }
  },
  figures,
};
