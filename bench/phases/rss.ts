// Phase `rss`: RSS with many keys in the local over-limit cache — a count-bound highcard run of `rssKeys`
// distinct keys (all over limit, so all cached), VmRSS before and after.
import { measure } from '../harness/measure.js';
import type { BenchOptions } from '../options.js';
import type { Figure } from '../report/table.js';
import type { BenchResults } from '../report/results.js';
import { figureAdder, pickRec } from '../report/figures.js';
import { rssMiB } from '../harness/services.js';
import { AUX_CPUS, type Phase, type PhaseContext } from './phase.js';

async function run(ctx: PhaseContext): Promise<void> {
  const { o, kinds, svcs, redis, results, log } = ctx;
  for (const k of kinds) {
    const svc = svcs[k]!;
    await redis.flushAll();
    const before = rssMiB(svc.pid);
    await measure({
      service: svc,
      redis,
      round: 0,
      loadgenCpus: AUX_CPUS,
      spec: {
        connections: 4,
        warmupMs: 0,
        durationMs: 3_600_000,
        maxRequests: o.rssKeys,
        workload: 'highcard',
        seed: 1,
        keyBase: ctx.nextKeyBase(100_000_000),
        mode: 'closed',
        concurrency: 64,
      },
    });
    await new Promise((r) => setTimeout(r, 1000));
    const after = rssMiB(svc.pid);
    results.rss[k] = {
      keys: o.rssKeys,
      beforeMiB: before,
      afterMiB: after,
      deltaMiB: after - before,
      bytesPerKey: ((after - before) * 1048576) / o.rssKeys,
    };
    log(`rss ${k}: ${before.toFixed(0)} -> ${after.toFixed(0)} MiB with ${o.rssKeys} over-limit keys`);
  }
  await redis.flushAll();
}

function figures(r: BenchResults, o: BenchOptions): Figure[] {
  const out: Figure[] = [];
  if (!Object.keys(r.rss).length) return out;
  const add = figureAdder(r, out);
  add(
    'memory',
    `service RSS after ${o.rssKeys.toLocaleString('en-US')} over-limit keys in the local cache`,
    'MiB',
    'lower',
    pickRec(r.rss, (v) => [v.afterMiB]),
  );
  add(
    'memory',
    'RSS growth per local-cache key',
    'bytes',
    'lower',
    pickRec(r.rss, (v) => [v.bytesPerKey]),
  );
  return out;
}

export const rssPhase: Phase = { name: 'rss', run, figures };
