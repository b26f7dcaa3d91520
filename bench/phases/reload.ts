// Phase `reload`: the 10k-descriptor config file replaced under 1000 calls/s of hot-key load (open loop);
// time until the new config serves (polled with a probe descriptor only the new version limits), the
// longest call latency in the window and, inside our service, the longest event-loop stall.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { longestStall, OURS_LOOP_PROBE_FILE, whileProbed } from '../harness/loop-probe.js';
import { measure } from '../harness/measure.js';
import type { Figure } from '../report/table.js';
import type { BenchResults } from '../report/results.js';
import { figureAdder, pickRec } from '../report/figures.js';
import { cfg10kYaml } from '../../harness/fixtures.js';
import { AUX_CPUS, type Phase, type PhaseContext } from './phase.js';

async function run(ctx: PhaseContext): Promise<void> {
  const { o, redis, results, log } = ctx;
  let version = 0;
  await ctx.each(async (svc, round) => {
    version++;
    const v = version;
    const probe = { domain: 'bench_cfg10k', descriptors: [[['probe', `v${v}`]]] as [string, string][][] };
    let reloadMs = NaN;
    let polling: Promise<void> = Promise.resolve();
    // Made before the window, so the harness is not busy building it while latencies are measured.
    const yaml = cfg10kYaml(v);
    let writtenAt = 0;
    let servedAt = 0;
    const s = await measure({
      service: svc,
      redis,
      round,
      loadgenCpus: AUX_CPUS,
      spec: {
        connections: 4,
        warmupMs: 500,
        durationMs: 4000,
        workload: 'hot',
        seed: 3,
        mode: 'open',
        rate: 1000,
      },
      onWindowStart: () => {
        polling = (async () => {
          await new Promise((r) => setTimeout(r, 1000));
          const t0 = performance.now();
          writtenAt = Date.now();
          // Into this service's own directory: the other service does not parse it meanwhile.
          svc.runtime.write('bench_cfg10k.yaml', yaml);
          while (performance.now() - t0 < 10_000) {
            const r = await svc.call(probe).catch(() => undefined);
            if (r?.overallCode === 'OVER_LIMIT') {
              reloadMs = performance.now() - t0;
              servedAt = Date.now();
              break;
            }
            await new Promise((res) => setTimeout(res, 10));
          }
        })();
      },
    });
    await polling;
    const r = (results.reload[svc.kind] ??= { reloadMs: [], maxLatencyUs: [], p999Us: [] });
    r.reloadMs.push(reloadMs);
    r.maxLatencyUs.push(s.latency.maxUs);
    r.p999Us.push(s.latency.p999Us);
    let stall = '';
    if (svc.kind === 'ours' && writtenAt > 0) {
      // Our main thread's own stalls: from the write until the new config serves (+200 ms for the
      // old config's garbage), and, as the control, in the second before the write.
      await new Promise((res) => setTimeout(res, 1200)); // the probe flushes every second
      const text = readFileSync(join(o.outDir, OURS_LOOP_PROBE_FILE), 'utf8');
      const during = longestStall(text, writtenAt, (servedAt || writtenAt + 10_000) + 200);
      const before = longestStall(text, writtenAt - 1000, writtenAt - 100);
      (r.stallMs ??= []).push(during);
      (r.idleStallMs ??= []).push(before);
      stall = `, event-loop stall ${during.toFixed(1)} ms (${before.toFixed(1)} ms in the second before)`;
    }
    log(
      `reload ${svc.kind} r${round}: new config serves after ${reloadMs.toFixed(0)} ms, max call latency ${(s.latency.maxUs / 1000).toFixed(1)} ms${stall}`,
    );
  }, o.reloads);
}

function figures(r: BenchResults): Figure[] {
  const out: Figure[] = [];
  if (!Object.keys(r.reload).length) return out;
  const add = figureAdder(r, out);
  const g = 'config reload (10k descriptors)';
  add(
    g,
    'time until the new config serves',
    'ms',
    'lower',
    pickRec(r.reload, (v) => v.reloadMs),
  );
  add(
    g,
    'longest call latency during the reload (1000 calls/s)',
    'ms',
    'lower',
    pickRec(r.reload, (v) => v.maxLatencyUs.map((x) => x / 1000)),
  );
  add(
    g,
    'longest event-loop stall in the service during the reload (ours)',
    'ms',
    'lower',
    pickRec(r.reload, (v) => v.stallMs ?? []),
    { oursMax: 10, text: 'stall ≤ 10 ms (ours)' },
  );
  add(
    g,
    'longest event-loop stall in the second before the reload (control)',
    'ms',
    'lower',
    pickRec(r.reload, (v) => v.idleStallMs ?? []),
  );
  return out;
}

export const reloadPhase: Phase = {
  name: 'reload',
  // Our service's probe gives the event-loop stalls around each reload.
  run: (ctx) => whileProbed(ctx.o.outDir, true, () => run(ctx)),
  figures,
};
