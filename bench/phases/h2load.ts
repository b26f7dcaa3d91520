// Phase `h2load`: cross-check of our load generator — it and h2load replay the hot-key frame back to back on
// the same service with the same shape (h2load -c <connections> -m <in flight per connection>), per shape.
// h2load sends one body only, hence the hot key; the go driver is the independent driver of every workload.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadgenDriver } from '../harness/drivers.js';
import { encodeRequest, grpcFrame } from '../load/frames.js';
import type { Figure } from '../report/table.js';
import type { BenchResults } from '../report/results.js';
import { figureAdder, pickRec } from '../report/figures.js';
import { h2load, h2loadInstalled, measureVariant, type Phase, type PhaseContext } from './phase.js';

async function run(ctx: PhaseContext): Promise<void> {
  if (!h2loadInstalled()) {
    ctx.log('h2load phase skipped: h2load not installed (Debian nghttp2-client)');
    return;
  }
  const { o, kinds, svcs, tmp, results, log } = ctx;
  if (!o.workloads.includes('hot')) return;
  const frameFile = join(tmp, 'hot.grpc');
  writeFileSync(frameFile, grpcFrame(encodeRequest({ domain: 'bench_hot', descriptors: [[['hot', 'k']]] })));
  for (const shape of o.shapes)
    for (const k of kinds) {
      const svc = svcs[k]!;
      const secs = Math.round(Math.min(o.durationMs, 5000) / 1000);
      const ours = await measureVariant(
        ctx,
        svc,
        0,
        { shape, driver: loadgenDriver },
        {
          inFlight: shape.inFlight,
          warmupMs: o.warmupMs,
          durationMs: secs * 1000,
          workload: 'hot',
          seed: 1,
          mode: 'closed',
        },
      );
      const rps = await h2load([
        '-c',
        String(shape.connections),
        '-m',
        String(shape.inFlight),
        '-D',
        String(secs),
        '--warm-up-time=1',
        '-H',
        'content-type: application/grpc',
        '-H',
        'te: trailers',
        '-d',
        frameFile,
        `http://127.0.0.1:${svc.grpcPort}/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`,
      ]);
      results.h2load[`${k}@${shape.label}`] = {
        callsPerSecond: rps ?? NaN,
        loadgenCallsPerSecond: ours.callsPerSecond,
      };
      log(
        `h2load hot ${k} ${shape.label}: ${rps ?? 'failed'} calls/s; our load generator just before: ${ours.callsPerSecond} calls/s`,
      );
    }
}

function figures(r: BenchResults): Figure[] {
  const out: Figure[] = [];
  if (!Object.keys(r.h2load).length) return out;
  const add = figureAdder(r, out);
  const g = 'load generator cross-check (hot key)';
  add(
    g,
    'h2load closed loop',
    'calls/s',
    'higher',
    pickRec(r.h2load, (v) => [v.callsPerSecond]),
  );
  add(
    g,
    'our load generator, run just before h2load',
    'calls/s',
    'higher',
    pickRec(r.h2load, (v) => [v.loadgenCallsPerSecond]),
  );
  return out;
}

export const h2loadPhase: Phase = { name: 'h2load', run, figures };
