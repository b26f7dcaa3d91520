// Phase `json`: POST /json over HTTP/1.1 with h2load --h1 (closed loop, 16 connections, one JSON body).
import { join } from 'node:path';
import { writeFileSync } from 'node:fs';
import type { Figure } from '../report/table.js';
import type { BenchResults } from '../report/results.js';
import { figureAdder, pickRec } from '../report/figures.js';
import { cpuSeconds } from '../harness/services.js';
import { h2load, h2loadInstalled, type Phase, type PhaseContext } from './phase.js';

async function run(ctx: PhaseContext): Promise<void> {
  if (!h2loadInstalled()) {
    ctx.log('json phase skipped: h2load not installed (Debian nghttp2-client)');
    return;
  }
  const { o, tmp, results, log } = ctx;
  const body = join(tmp, 'json-body');
  writeFileSync(
    body,
    JSON.stringify({ domain: 'bench_hot', descriptors: [{ entries: [{ key: 'hot', value: 'k' }] }] }),
  );
  await ctx.each(async (svc) => {
    const cpu0 = cpuSeconds(svc.pid);
    const secs = Math.round(o.durationMs / 1000);
    const rps = await h2load([
      '--h1',
      '-c',
      '16',
      '-m',
      '1',
      '-D',
      String(secs),
      '--warm-up-time=1',
      '-H',
      'content-type: application/json',
      '-d',
      body,
      `http://127.0.0.1:${svc.httpPort}/json`,
    ]);
    const cpu = cpuSeconds(svc.pid) - cpu0;
    const j = (results.json[svc.kind] ??= { requestsPerSecond: [], cpuUsPerRequest: [] });
    if (rps !== null) {
      j.requestsPerSecond.push(rps);
      j.cpuUsPerRequest.push((cpu * 1e6) / (rps * (secs + 1)));
    }
    log(`/json ${svc.kind}: ${rps ?? 'h2load failed'} req/s`);
  });
}

function figures(r: BenchResults): Figure[] {
  const out: Figure[] = [];
  if (!Object.keys(r.json).length) return out;
  const add = figureAdder(r, out);
  const g = 'POST /json (HTTP/1.1, h2load)';
  add(
    g,
    'requests per second',
    'req/s',
    'higher',
    pickRec(r.json, (v) => v.requestsPerSecond),
  );
  add(
    g,
    'service CPU per request',
    'µs',
    'lower',
    pickRec(r.json, (v) => v.cpuUsPerRequest),
  );
  return out;
}

export const jsonPhase: Phase = { name: 'json', run, figures };
