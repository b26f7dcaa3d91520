// Phase `config-memory`: what a pod costs as its config grows. For each size N (`--config-sizes`), each
// service is started on a fresh Redis with one file of one domain and N descriptors, each with a limit
// (harness/fixtures.ts flatConfigYaml), and measured: the time from spawning it to its first answer that
// applies a limit, its RSS two seconds after that answer and its peak RSS (VmHWM) so far, then its RSS
// once every descriptor has been asked for (64 per call). Ours runs with the V8 flags the chart gives
// it (or --ours-node-flags). Bytes per descriptor are (RSS at N - RSS at the smallest N) / (N - smallest).
import { join } from 'node:path';
import { readFileSync } from 'node:fs';
import { flatConfigYaml } from '../../harness/fixtures.js';
import {
  BenchRedis,
  BenchService,
  referenceAvailable,
  RuntimeDir,
  type ServiceKind,
} from '../harness/services.js';
import { stat } from '../harness/measure.js';
import type { Figure } from '../report/table.js';
import type { BenchResults } from '../report/results.js';
import { AUX_CPUS, SERVICE_CPUS, type Phase, type PhaseContext } from './phase.js';

/** The V8 flags of the chart's service container (charts/ratelimit/values.yaml nodeOptions, nodeFlags). */
export const CHART_NODE_FLAGS = ['--max-semi-space-size=4', '--single-threaded-gc'];
/** Descriptors per call when every descriptor is asked for (the default REQUEST_MAX_DESCRIPTORS). */
const PER_CALL = 64;
const SETTLE_MS = 2000;

export interface ConfigMemoryRecord {
  descriptors: number;
  fileBytes: number;
  /** Per round. */
  startMs: number[];
  rssMiB: number[];
  peakMiB: number[];
  allAskedMiB: number[];
}
/** kind → one record per size. */
export type ConfigMemoryResult = Partial<Record<ServiceKind, ConfigMemoryRecord[]>>;

function procStatusKiB(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : NaN;
}
const mib = (kib: number) => kib / 1024;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A call asking for descriptors `from`..`to-1` of the generated domain. */
function request(from: number, to: number) {
  const descriptors: [string, string][][] = [];
  for (let i = from; i < to; i++) descriptors.push([['k', `v${i}`]]);
  return { domain: 'mem', descriptors, hitsAddend: 1 };
}

async function measureOne(
  ctx: PhaseContext,
  redis: BenchRedis,
  kind: ServiceKind,
  n: number,
  yaml: string,
  round: number,
): Promise<{ startMs: number; rssMiB: number; peakMiB: number; allAskedMiB: number }> {
  const runtime = new RuntimeDir(join(ctx.tmp, `config-memory-${kind}-${n}-${round}`));
  runtime.write('mem.yaml', yaml);
  await redis.flushAll();
  const t0 = performance.now();
  const svc = await BenchService.start({
    kind,
    runtime,
    redisUrl: redis.url,
    cpus: SERVICE_CPUS,
    logDir: ctx.o.outDir,
    logName: `config-memory-${kind}-${n}`,
    localCacheBytes: 0,
    node: ctx.o.node,
    nodeArgs: ctx.o.oursNodeFlags.length ? ctx.o.oursNodeFlags : CHART_NODE_FLAGS,
    pollMs: 5,
    // A shared machine can take longer than the default 30 s to parse the largest file at the worker's
    // low priority; the reference has no such deadline.
    env: { CONFIG_PARSE_TIMEOUT: '600s' },
    startDeadlineMs: 900_000,
  });
  try {
    const first = request(n - 1, n);
    let startMs = NaN;
    const deadline = t0 + 900_000;
    while (performance.now() < deadline) {
      const r = await svc.call(first).catch(() => undefined);
      if (r?.statuses?.[0]?.currentLimit) {
        startMs = performance.now() - t0;
        break;
      }
      await sleep(5);
    }
    if (Number.isNaN(startMs))
      throw new Error(`config-memory: ${kind} never applied the ${n}-descriptor config`);
    await sleep(SETTLE_MS);
    const rssMiB = mib(procStatusKiB(svc.pid, 'VmRSS'));
    const peakMiB = mib(procStatusKiB(svc.pid, 'VmHWM'));
    ctx.log(
      `config-memory ${kind} ${n}: RSS ${rssMiB.toFixed(1)} MiB (peak ${peakMiB.toFixed(1)}) after the first answer`,
    );
    // Each call's first lookups compile its descriptors: a generous deadline, and a failed call recorded.
    let failed = 0;
    const calls: Promise<unknown>[] = [];
    for (let i = 0; i < n; i += PER_CALL) {
      calls.push(svc.call(request(i, Math.min(n, i + PER_CALL)), 60_000).catch(() => failed++));
      if (calls.length >= 8) await calls.shift();
    }
    await Promise.all(calls);
    await sleep(SETTLE_MS);
    const allAskedMiB = failed === 0 ? mib(procStatusKiB(svc.pid, 'VmRSS')) : NaN;
    if (failed > 0)
      ctx.log(`config-memory ${kind} ${n}: ${failed} calls failed while asking for every descriptor`);
    return { startMs, rssMiB, peakMiB, allAskedMiB };
  } finally {
    await svc.stop();
  }
}

async function run(ctx: PhaseContext): Promise<void> {
  const { o, log } = ctx;
  const kinds: ServiceKind[] = ['ours'];
  if (o.reference && referenceAvailable()) kinds.push('reference');
  const redis = await BenchRedis.start(AUX_CPUS);
  const result: ConfigMemoryResult = {};
  try {
    for (const n of o.configSizes) {
      const yaml = flatConfigYaml(n);
      for (const k of kinds) {
        (result[k] ??= []).push({
          descriptors: n,
          fileBytes: Buffer.byteLength(yaml),
          startMs: [],
          rssMiB: [],
          peakMiB: [],
          allAskedMiB: [],
        });
      }
      for (let round = 0; round < o.configMemoryRounds; round++) {
        for (const k of kinds) {
          const m = await measureOne(ctx, redis, k, n, yaml, round);
          const rec = result[k]!.at(-1)!;
          rec.startMs.push(m.startMs);
          rec.rssMiB.push(m.rssMiB);
          rec.peakMiB.push(m.peakMiB);
          rec.allAskedMiB.push(m.allAskedMiB);
          log(
            `config-memory ${k} ${n} descriptors r${round}: first answer after ${m.startMs.toFixed(0)} ms, ` +
              `RSS ${m.rssMiB.toFixed(1)} MiB (peak ${m.peakMiB.toFixed(1)}), ` +
              `${m.allAskedMiB.toFixed(1)} MiB once every descriptor was asked for`,
          );
        }
      }
    }
  } finally {
    await redis.stop();
  }
  ctx.results.extra['config-memory'] = result;
}

const median = (xs: number[]) => stat(xs).median;

function figures(r: BenchResults): Figure[] {
  const res = r.extra['config-memory'] as ConfigMemoryResult | undefined;
  if (!res?.ours) return [];
  const out: Figure[] = [];
  const group = 'config memory (one domain, N descriptors)';
  const perDescriptor = (
    recs: ConfigMemoryRecord[] | undefined,
    i: number,
    pick: (x: ConfigMemoryRecord) => number[],
  ) => {
    if (!recs || i === 0) return [];
    const base = recs[0]!;
    const x = recs[i]!;
    return [((median(pick(x)) - median(pick(base))) * 1048576) / (x.descriptors - base.descriptors)];
  };
  res.ours.forEach((ours, i) => {
    const ref = res.reference?.[i];
    const n = ours.descriptors.toLocaleString('en-US');
    const row = (name: string, unit: string, pick: (x: ConfigMemoryRecord) => number[]) => {
      const f: Figure = { group, name, unit, better: 'lower', ours: stat(pick(ours)) };
      if (ref) f.reference = stat(pick(ref));
      out.push(f);
    };
    row(`${n}: start to first answer`, 'ms', (x) => x.startMs);
    row(`${n}: RSS after the first answer`, 'MiB', (x) => x.rssMiB);
    row(`${n}: peak RSS until then`, 'MiB', (x) => x.peakMiB);
    row(`${n}: RSS once every descriptor was asked for`, 'MiB', (x) => x.allAskedMiB);
    const per = (name: string, pick: (x: ConfigMemoryRecord) => number[]) => {
      if (i === 0) return;
      const f: Figure = {
        group,
        name,
        unit: 'bytes',
        better: 'lower',
        ours: stat(perDescriptor(res.ours, i, pick)),
      };
      if (res.reference) f.reference = stat(perDescriptor(res.reference, i, pick));
      out.push(f);
    };
    per(`${n}: RSS per descriptor above the smallest config, after the first answer`, (x) => x.rssMiB);
    per(`${n}: RSS per descriptor above the smallest config, every descriptor asked`, (x) => x.allAskedMiB);
  });
  return out;
}

export const configMemoryPhase: Phase = { name: 'config-memory', needs: 'standalone', run, figures };
