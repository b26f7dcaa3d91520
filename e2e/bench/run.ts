// The benchmark harness: `npm run bench [-- --quick] [--no-reference] [--workloads=hot,uniform]`.
// Starts Redis, our service and (when built) the reference Go service, pins them (services on core 0,
// Redis, the load generator and this process on core 1), checks that both give identical decisions, then
// measures every figure with rounds interleaved (ours, reference, ours, reference, ...) and writes
// bench-results/<stamp>/{results.json, report.md, chart.svg} (and bench-results/latest/).
import { execFile, spawn } from 'node:child_process';
import { cpSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { makeTempDir, removeTempDir } from '../harness/net.js';
import { longestStall } from './loop-probe.js';
import { measure, stat, type Sample } from './measure.js';
import { encodeRequest, grpcFrame } from './proto.js';
import { markdownTable, ratio, svgChart, type ChartWorkload, type Figure } from './report.js';
import {
  BenchRedis,
  BenchService,
  cpuSeconds,
  pin,
  REPO_ROOT,
  rssMiB,
  RuntimeDir,
  type ServiceKind,
} from './services.js';
import {
  cfg10kYaml,
  checkSequence,
  configFiles,
  WORKLOADS,
  WORKLOAD_TITLES,
  type WorkloadName,
} from './workloads.js';
import type { XdsResult } from './xds-bench.js';

const execFileP = promisify(execFile);
const SERVICE_CPUS = '0';
/** Commands in flight at the edges of a window are counted on one side only: ±2 % is counting noise. */
const COUNT_TOLERANCE = 0.02;
const AUX_CPUS = '1';

export interface BenchOptions {
  quick: boolean;
  reference: boolean;
  workloads: WorkloadName[];
  rounds: number;
  durationMs: number;
  warmupMs: number;
  /** Fixed open-loop rates for the latency figures. */
  rates: number[];
  latencyRounds: number;
  latencyDurationMs: number;
  /** Unrecorded load per service and workload before the first round (JIT warm-up). */
  warmupPassMs: number;
  latencyWorkloads: WorkloadName[];
  /** Distinct keys sent for the RSS figure. */
  rssKeys: number;
  reloads: number;
  xdsClients: number;
  xdsChanges: number;
  /** Phases to run (all by default). */
  phases: Set<string>;
  outDir: string;
  /** Write a V8 CPU profile of our service to outDir (--profile). */
  profile: boolean;
  log: (msg: string) => void;
}

export const ALL_PHASES = ['check', 'throughput', 'p99', 'latency', 'rss', 'reload', 'json', 'h2load', 'xds'];

export function parseArgs(argv: string[]): BenchOptions {
  const get = (name: string) => argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
  const quick = argv.includes('--quick');
  const list = (v: string | undefined) => v?.split(',').filter(Boolean);
  const workloads = (list(get('workloads')) as WorkloadName[] | undefined) ?? [...WORKLOADS];
  for (const w of workloads) if (!WORKLOADS.includes(w)) throw new Error(`unknown workload ${w}`);
  const stamp = new Date().toISOString().replace(/[:.]/g, '-').slice(0, 19);
  return {
    quick,
    reference: !argv.includes('--no-reference'),
    workloads,
    rounds: Number(get('rounds') ?? (quick ? 2 : 3)),
    durationMs: Number(get('duration') ?? (quick ? 3 : 8)) * 1000,
    warmupMs: quick ? 1000 : 2000,
    rates: (list(get('rates')) ?? ['1000', '2000', '5000']).map(Number),
    latencyRounds: Number(get('latency-rounds') ?? (quick ? 1 : 2)),
    latencyDurationMs: Number(get('latency-duration') ?? (quick ? 3 : 5)) * 1000,
    warmupPassMs: quick ? 1000 : 3000,
    latencyWorkloads: (list(get('latency-workloads')) as WorkloadName[] | undefined) ?? ['hot', 'uniform'],
    rssKeys: Number(get('rss-keys') ?? (quick ? 50_000 : 1_000_000)),
    reloads: Number(get('reloads') ?? (quick ? 2 : 3)),
    xdsClients: Number(get('xds-clients') ?? 500),
    xdsChanges: Number(get('xds-changes') ?? (quick ? 2 : 5)),
    phases: new Set(list(get('phases')) ?? ALL_PHASES),
    outDir: get('out') ?? join(REPO_ROOT, 'bench-results', stamp),
    profile: argv.includes('--profile'),
    log: (m) => process.stderr.write(`[bench] ${m}\n`),
  };
}

export interface CheckResult {
  requests: number;
  identical: boolean | undefined;
  mismatches: { index: number; ours: unknown; reference: unknown }[];
  oursOverLimit: number;
}

export interface BenchResults {
  meta: Record<string, unknown>;
  check?: CheckResult;
  samples: Sample[];
  p99Under5ms: Record<string, Record<string, number>>;
  rss: Record<
    string,
    { keys: number; beforeMiB: number; afterMiB: number; deltaMiB: number; bytesPerKey: number }
  >;
  reload: Record<
    string,
    {
      reloadMs: number[];
      maxLatencyUs: number[];
      p999Us: number[];
      stallMs?: number[];
      idleStallMs?: number[];
    }
  >;
  json: Record<string, { requestsPerSecond: number[]; cpuUsPerRequest: number[] }>;
  h2load: Record<string, { callsPerSecond: number; loadgenCallsPerSecond: number }>;
  xds?: XdsResult;
  figures: Figure[];
}

type Services = Partial<Record<ServiceKind, BenchService>>;

/**
 * Decision summary of a response: overall code and, per descriptor, code / remaining / limit. Proto3 reads an
 * absent scalar as 0, so a limit sent as an explicit 0 (protobufjs) and one left out (Go) compare equal.
 */
function decisionOf(r: {
  overallCode?: string;
  statuses?: { code?: string; limitRemaining?: number; currentLimit?: { requestsPerUnit?: number } | null }[];
}): string {
  const st = (r.statuses ?? []).map(
    (s) =>
      `${s.code ?? 'UNKNOWN'}/${s.limitRemaining ?? 0}/${s.currentLimit ? (s.currentLimit.requestsPerUnit ?? 0) : '-'}`,
  );
  return `${r.overallCode ?? 'UNKNOWN'} [${st.join(' ')}]`;
}

async function decisionCheck(
  svcs: Services,
  redis: BenchRedis,
  log: BenchOptions['log'],
): Promise<CheckResult> {
  // The check uses hour windows: stay clear of an hour boundary so both services count in the same window.
  const intoHour = (Date.now() / 1000) % 3600;
  if (intoHour > 3590) await new Promise((r) => setTimeout(r, (3601 - intoHour) * 1000));
  const seq = checkSequence();
  const got: Partial<Record<ServiceKind, string[]>> = {};
  for (const kind of ['ours', 'reference'] as const) {
    const svc = svcs[kind];
    if (!svc) continue;
    await redis.flushAll();
    const out: string[] = [];
    for (const r of seq) out.push(decisionOf(await svc.call(r)));
    got[kind] = out;
  }
  const mismatches: CheckResult['mismatches'] = [];
  if (got.ours && got.reference) {
    for (let i = 0; i < seq.length; i++)
      if (got.ours[i] !== got.reference[i])
        mismatches.push({ index: i, ours: got.ours[i], reference: got.reference[i] });
  }
  const res: CheckResult = {
    requests: seq.length,
    identical: got.reference ? mismatches.length === 0 : undefined,
    mismatches,
    oursOverLimit: (got.ours ?? []).filter((d) => d.startsWith('OVER_LIMIT')).length,
  };
  log(
    `decision check: ${seq.length} requests, ${res.oursOverLimit} over limit, identical=${res.identical ?? 'n/a (no reference)'}`,
  );
  return res;
}

/** Runs `h2load` and returns its requests/s (null when h2load is missing or fails). */
async function h2load(args: string[]): Promise<number | null> {
  try {
    const { stdout } = await execFileP('taskset', ['-c', AUX_CPUS, 'h2load', ...args], { timeout: 120_000 });
    const m = /finished in [\d.]+m?s, ([\d.]+) req\/s/.exec(stdout);
    const done = /requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded/.exec(stdout);
    if (!m) return null;
    if (done && Number(done[2]) < Number(done[1]) * 0.99) return null;
    return Number(m[1]);
  } catch {
    return null;
  }
}

function spawnLines(args: string[], cpusList: string): { lines: AsyncIterable<string>; kill: () => void } {
  const child = spawn('taskset', ['-c', cpusList, process.execPath, '--import', 'tsx', ...args], {
    cwd: REPO_ROOT,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  async function* lines(): AsyncIterable<string> {
    let buf = '';
    for await (const chunk of child.stdout.setEncoding('utf8')) {
      buf += chunk as string;
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        yield buf.slice(0, nl);
        buf = buf.slice(nl + 1);
      }
    }
  }
  return { lines: lines(), kill: () => child.kill('SIGTERM') };
}

async function xdsBench(o: BenchOptions): Promise<XdsResult> {
  const server = spawnLines(
    ['e2e/bench/xds-bench.ts', 'server', String(o.xdsClients), String(o.xdsChanges), '100'],
    SERVICE_CPUS,
  );
  let clients: ReturnType<typeof spawnLines> | undefined;
  try {
    for await (const line of server.lines) {
      if (line.startsWith('PORT ')) {
        clients = spawnLines(
          ['e2e/bench/xds-bench.ts', 'clients', line.slice(5), String(o.xdsClients)],
          AUX_CPUS,
        );
        void (async () => {
          for await (const _ of clients.lines); // drain
        })();
      } else if (line.startsWith('{')) return JSON.parse(line) as XdsResult;
    }
    throw new Error('xds bench server ended without a result');
  } finally {
    clients?.kill();
    server.kill();
  }
}

export async function runBench(o: BenchOptions): Promise<BenchResults> {
  const log = o.log;
  pin(process.pid, AUX_CPUS);
  mkdirSync(o.outDir, { recursive: true });
  const tmp = makeTempDir('ratelimit-bench');
  const runtime = new RuntimeDir(join(tmp, 'runtime'));
  for (const [name, text] of Object.entries(configFiles(0))) runtime.write(name, text);

  const results: BenchResults = {
    meta: {
      date: new Date().toISOString(),
      node: process.version,
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
    figures: [],
  };
  const redis = await BenchRedis.start(AUX_CPUS);
  const svcs: Services = {};
  const kinds: ServiceKind[] = ['ours'];
  try {
    const common = {
      runtime,
      redisUrl: redis.url,
      cpus: SERVICE_CPUS,
      logDir: o.outDir,
      localCacheBytes: 256 << 20,
    };
    svcs.ours = await BenchService.start({
      kind: 'ours',
      ...common,
      nodeArgs: o.profile ? ['--cpu-prof', `--cpu-prof-dir=${o.outDir}`] : [],
      loopProbeFile: join(o.outDir, 'ours-event-loop.txt'),
    });
    if (o.reference && BenchService.referenceBinary()) {
      svcs.reference = await BenchService.start({ kind: 'reference', ...common });
      kinds.push('reference');
    } else if (o.reference) {
      log('reference service not available: measuring ours only (build it with scripts/build-go-tools.sh)');
    } else log('reference skipped (--no-reference)');
    results.meta.reference = svcs.reference ? BenchService.referenceBinary() : null;
    log(`services up: ${kinds.join(', ')}; redis ${redis.url}; results in ${o.outDir}`);

    if (o.phases.has('check')) results.check = await decisionCheck(svcs, redis, log);

    const each = async (fn: (svc: BenchService, round: number) => Promise<void>, rounds = o.rounds) => {
      for (let round = 0; round < rounds; round++) for (const k of kinds) await fn(svcs[k]!, round);
    };
    let keyBase = 0;
    const base = { connections: 4, warmupMs: o.warmupMs, durationMs: o.durationMs };

    // Saturation throughput, closed loop, after one unrecorded pass per service and workload (JIT warm-up).
    if (o.phases.has('throughput')) {
      for (const w of o.workloads) {
        for (const k of kinds) {
          keyBase += 10_000_000;
          await measure({
            service: svcs[k]!,
            redis,
            round: -1,
            loadgenCpus: AUX_CPUS,
            spec: {
              ...base,
              warmupMs: 0,
              durationMs: o.warmupPassMs,
              workload: w,
              seed: 1,
              keyBase,
              mode: 'closed',
              concurrency: 64,
            },
          });
        }
      }
      log('warm-up pass done');
      for (const w of o.workloads) {
        await each(async (svc, round) => {
          await redis.flushAll();
          keyBase += 10_000_000;
          const s = await measure({
            service: svc,
            redis,
            round,
            loadgenCpus: AUX_CPUS,
            spec: { ...base, workload: w, seed: 1000 + round, keyBase, mode: 'closed', concurrency: 64 },
          });
          results.samples.push(s);
          log(
            `${w} ${svc.kind} r${round}: ${s.callsPerSecond}/s, ${Math.round(s.decisionsPerCoreSecond)}/core-s, ` +
              `p99 ${(s.latency.p99Us / 1000).toFixed(1)} ms, redis ${s.redisCommandsPerDecision.toFixed(2)} cmd/dec, ` +
              `svc ${s.serviceCores.toFixed(2)} cores, loadgen ${s.loadgenCores.toFixed(2)}, errors ${s.errors}`,
          );
        });
      }
    }

    const satMedian = (w: string, k: string) =>
      stat(
        results.samples
          .filter((s) => s.workload === w && s.service === k && s.mode === 'closed')
          .map((s) => s.callsPerSecond),
      ).median;

    // Highest open-loop rate with p99 under 5 ms: steps at fractions of the measured saturation.
    if (o.phases.has('p99')) {
      for (const w of o.latencyWorkloads.filter((x) => o.workloads.includes(x))) {
        results.p99Under5ms[w] = {};
        for (const k of kinds) {
          const sat = satMedian(w, k);
          if (!Number.isFinite(sat)) continue;
          let best = 0;
          for (const f of o.quick ? [0.25, 0.5] : [0.1, 0.25, 0.5, 0.75, 1.0]) {
            const rate = Math.max(100, Math.round(sat * f));
            await redis.flushAll();
            const s = await measure({
              service: svcs[k]!,
              redis,
              round: 0,
              loadgenCpus: AUX_CPUS,
              spec: {
                ...base,
                durationMs: Math.min(o.durationMs, 5000),
                workload: w,
                seed: 7,
                mode: 'open',
                rate,
              },
            });
            const okRate = s.callsPerSecond >= rate * 0.95 && s.errors === 0;
            log(
              `p99 search ${w} ${k} @${rate}/s: p99 ${(s.latency.p99Us / 1000).toFixed(2)} ms, got ${s.callsPerSecond}/s`,
            );
            if (okRate && s.latency.p99Us < 5000) best = Math.max(best, s.callsPerSecond);
            else break;
          }
          results.p99Under5ms[w][k] = best;
        }
      }
    }

    // Latency at fixed open-loop rates.
    if (o.phases.has('latency')) {
      for (const w of o.latencyWorkloads.filter((x) => o.workloads.includes(x))) {
        for (const rate of o.rates) {
          await each(async (svc, round) => {
            await redis.flushAll();
            const s = await measure({
              service: svc,
              redis,
              round,
              loadgenCpus: AUX_CPUS,
              spec: {
                ...base,
                durationMs: o.latencyDurationMs,
                workload: w,
                seed: 2000 + round,
                mode: 'open',
                rate,
              },
            });
            results.samples.push(s);
            log(
              `${w} ${svc.kind} @${rate}/s r${round}: p50 ${s.latency.p50Us} µs, p99 ${s.latency.p99Us} µs, p99.9 ${s.latency.p999Us} µs`,
            );
          }, o.latencyRounds);
        }
      }
    }

    // RSS with many keys in the local over-limit cache: count-bound highcard run of rssKeys distinct keys.
    if (o.phases.has('rss')) {
      for (const k of kinds) {
        const svc = svcs[k]!;
        await redis.flushAll();
        const before = rssMiB(svc.pid);
        keyBase += 100_000_000;
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
            keyBase,
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

    // Config reload of the 10k-descriptor domain under 1000 calls/s of background load.
    if (o.phases.has('reload')) {
      let version = 0;
      await each(async (svc, round) => {
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
              runtime.write('bench_cfg10k.yaml', yaml);
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
          const text = readFileSync(join(o.outDir, 'ours-event-loop.txt'), 'utf8');
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

    // POST /json over HTTP/1.1 with h2load --h1 (closed loop, 16 connections).
    if (o.phases.has('json')) {
      const body = join(tmp, 'json-body');
      writeFileSync(
        body,
        JSON.stringify({ domain: 'bench_hot', descriptors: [{ entries: [{ key: 'hot', value: 'k' }] }] }),
      );
      await each(async (svc) => {
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

    // Cross-check of the load generator: our generator and h2load replaying the hot-key frame, back to back
    // on the same service with the same concurrency (4 connections x 16 streams).
    if (o.phases.has('h2load') && o.workloads.includes('hot')) {
      const frameFile = join(tmp, 'hot.grpc');
      writeFileSync(
        frameFile,
        grpcFrame(encodeRequest({ domain: 'bench_hot', descriptors: [[['hot', 'k']]] })),
      );
      for (const k of kinds) {
        const svc = svcs[k]!;
        const secs = Math.round(Math.min(o.durationMs, 5000) / 1000);
        const ours = await measure({
          service: svc,
          redis,
          round: 0,
          loadgenCpus: AUX_CPUS,
          spec: {
            ...base,
            durationMs: secs * 1000,
            workload: 'hot',
            seed: 1,
            mode: 'closed',
            concurrency: 64,
          },
        });
        const rps = await h2load([
          '-c',
          '4',
          '-m',
          '16',
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
        results.h2load[k] = { callsPerSecond: rps ?? NaN, loadgenCallsPerSecond: ours.callsPerSecond };
        log(
          `h2load hot ${k}: ${rps ?? 'failed'} calls/s; our load generator just before: ${ours.callsPerSecond} calls/s`,
        );
      }
    }
  } finally {
    for (const k of kinds) await svcs[k]?.stop();
    await redis.stop();
    removeTempDir(tmp);
  }

  if (o.phases.has('xds')) {
    try {
      results.xds = await xdsBench(o);
      log(`xds: ${JSON.stringify(results.xds.changes.map((c) => c.ms))}`);
    } catch (err) {
      log(`xds bench failed: ${(err as Error).message}`);
    }
  }
  results.meta.loadavgAtEnd = loadavg();
  results.figures = figures(results, o);
  writeOutputs(results, o);
  return results;
}

function figures(r: BenchResults, o: BenchOptions): Figure[] {
  const out: Figure[] = [];
  const by = (w: string, k: string, mode: 'closed' | 'open', rate?: number) =>
    r.samples.filter(
      (s) =>
        s.workload === w &&
        s.service === k &&
        s.mode === mode &&
        (rate === undefined || s.targetRate === rate),
    );
  const hasRef = r.meta.reference != null;
  const add = (
    group: string,
    name: string,
    unit: string,
    better: Figure['better'],
    pick: (k: string) => number[],
    target?: (ratio: number, ours: number) => { text: string; met: boolean | undefined },
  ) => {
    const f: Figure = { group, name, unit, better, ours: stat(pick('ours')) };
    if (hasRef) f.reference = stat(pick('reference'));
    if (target) f.target = target(ratio(f), f.ours.median);
    if (f.ours.n > 0 || (f.reference?.n ?? 0) > 0) out.push(f);
  };
  const ratioTarget = (min: number | undefined, max: number | undefined) => (rt: number) => ({
    text: min !== undefined ? `≥ ${min}x` : `≤ ${max}x`,
    met: Number.isFinite(rt) ? (min !== undefined ? rt >= min : rt <= max! + COUNT_TOLERANCE) : undefined,
  });
  for (const w of o.workloads) {
    const g = WORKLOAD_TITLES[w];
    const tpTarget =
      w === 'hot' ? ratioTarget(1.5, undefined) : w === 'uniform' ? ratioTarget(1.0, undefined) : undefined;
    add(
      g,
      'decisions per core-second at saturation',
      'calls / CPU-s',
      'higher',
      (k) => by(w, k, 'closed').map((s) => s.decisionsPerCoreSecond),
      tpTarget,
    );
    add(
      g,
      'calls per second at saturation (wall clock, 1 pinned core, shared machine)',
      'calls/s',
      'higher',
      (k) => by(w, k, 'closed').map((s) => s.callsPerSecond),
    );
    add(g, 'p99 at saturation (64 in flight)', 'ms', 'lower', (k) =>
      by(w, k, 'closed').map((s) => s.latency.p99Us / 1000),
    );
    add(
      g,
      'Redis commands per decision',
      'commands',
      'lower',
      (k) => by(w, k, 'closed').map((s) => s.redisCommandsPerDecision),
      w === 'hot' ? ratioTarget(undefined, 0.5) : ratioTarget(undefined, 1.0),
    );
    add(g, 'Redis CPU per decision', 'µs', 'lower', (k) =>
      by(w, k, 'closed').map((s) => s.redisCpuUsPerDecision),
    );
    add(g, 'service CPU per decision', 'µs', 'lower', (k) =>
      by(w, k, 'closed').map((s) => s.serviceCpuUsPerDecision),
    );
    if (r.p99Under5ms[w]) {
      add(g, 'highest tested rate with p99 < 5 ms', 'calls/s', 'higher', (k) =>
        r.p99Under5ms[w][k] !== undefined ? [r.p99Under5ms[w][k]] : [],
      );
    }
    for (const rate of o.rates) {
      if (by(w, 'ours', 'open', rate).length === 0) continue;
      for (const [q, key] of [
        ['p50', 'p50Us'],
        ['p99', 'p99Us'],
        ['p99.9', 'p999Us'],
      ] as const) {
        add(
          g,
          `${q} at ${rate}/s (open loop)`,
          'µs',
          'lower',
          (k) => by(w, k, 'open', rate).map((s) => s.latency[key]),
          q === 'p99' && rate === 2000
            ? (rt) => ({ text: '≤ 1.0x', met: Number.isFinite(rt) ? rt <= 1.0 : undefined })
            : undefined,
        );
      }
    }
  }
  const pickRec =
    <T>(rec: Record<string, T>, f: (v: T) => number[]) =>
    (k: string) =>
      rec[k] ? f(rec[k]) : [];
  if (Object.keys(r.rss).length) {
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
  }
  if (Object.keys(r.reload).length) {
    add(
      'config reload (10k descriptors)',
      'time until the new config serves',
      'ms',
      'lower',
      pickRec(r.reload, (v) => v.reloadMs),
    );
    add(
      'config reload (10k descriptors)',
      'longest call latency during the reload (1000 calls/s)',
      'ms',
      'lower',
      pickRec(r.reload, (v) => v.maxLatencyUs.map((x) => x / 1000)),
    );
    add(
      'config reload (10k descriptors)',
      'longest event-loop stall in the service during the reload (ours)',
      'ms',
      'lower',
      pickRec(r.reload, (v) => v.stallMs ?? []),
      (_rt, ours) => ({ text: 'stall ≤ 10 ms (ours)', met: Number.isFinite(ours) ? ours <= 10 : undefined }),
    );
    add(
      'config reload (10k descriptors)',
      'longest event-loop stall in the second before the reload (control)',
      'ms',
      'lower',
      pickRec(r.reload, (v) => v.idleStallMs ?? []),
    );
  }
  if (Object.keys(r.json).length) {
    add(
      'POST /json (HTTP/1.1, h2load)',
      'requests per second',
      'req/s',
      'higher',
      pickRec(r.json, (v) => v.requestsPerSecond),
    );
    add(
      'POST /json (HTTP/1.1, h2load)',
      'service CPU per request',
      'µs',
      'lower',
      pickRec(r.json, (v) => v.cpuUsPerRequest),
    );
  }
  if (Object.keys(r.h2load).length) {
    add(
      'load generator cross-check (hot key)',
      'h2load closed loop',
      'calls/s',
      'higher',
      pickRec(r.h2load, (v) => [v.callsPerSecond]),
    );
    add(
      'load generator cross-check (hot key)',
      'our load generator, run just before h2load',
      'calls/s',
      'higher',
      pickRec(r.h2load, (v) => [v.loadgenCallsPerSecond]),
    );
  }
  if (r.xds) {
    for (const m of r.xds.milestones) {
      const vals = r.xds.changes.map((c) => c.ms[String(m)]).filter((x) => x !== undefined);
      const f: Figure = {
        group: `xDS fan-out (ours, ${r.xds.clients} clients)`,
        name: `time until ${m} clients ACKed a change`,
        unit: 'ms',
        better: 'lower',
        ours: stat(vals),
      };
      if (m === r.xds.clients && m >= 500)
        f.target = { text: '≤ 2000 ms', met: f.ours.median <= 2000 && f.ours.max <= 2000 };
      out.push(f);
    }
  }
  return out;
}

function writeOutputs(r: BenchResults, o: BenchOptions, copyLatest = true): void {
  const lat = (w: WorkloadName, k: string) =>
    o.rates
      .map((rate) => {
        const ss = r.samples.filter(
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
  const rows: ChartWorkload[] = o.workloads
    .filter((w) => r.samples.some((s) => s.workload === w))
    .map((w) => {
      const tp = (k: string) =>
        stat(
          r.samples
            .filter((s) => s.workload === w && s.service === k && s.mode === 'closed')
            .map((s) => s.decisionsPerCoreSecond),
        );
      const ours = lat(w, 'ours');
      const ref = lat(w, 'reference');
      return {
        workload: w,
        throughput: {
          ours: tp('ours'),
          reference: r.samples.some((s) => s.service === 'reference') ? tp('reference') : undefined,
        },
        latency: ours.map((l) => ({
          rate: l.rate,
          ours: l.v,
          reference: ref.find((x) => x.rate === l.rate)?.v,
        })),
      };
    });
  writeFileSync(join(o.outDir, 'results.json'), JSON.stringify(r, null, 2) + '\n');
  writeFileSync(
    join(o.outDir, 'chart.svg'),
    svgChart(rows, `ratelimit benchmark ${String(r.meta.date).slice(0, 16)} — ours vs reference`),
  );
  const check = r.check
    ? `Decision check: ${r.check.requests} requests, identical: ${r.check.identical ?? 'n/a (no reference)'}${r.check.mismatches.length ? `, first mismatch ${JSON.stringify(r.check.mismatches[0])}` : ''}\n\n`
    : '';
  writeFileSync(
    join(o.outDir, 'report.md'),
    `# Benchmark ${r.meta.date}\n\nload average at start ${JSON.stringify(r.meta.loadavgAtStart)}, at end ${JSON.stringify(r.meta.loadavgAtEnd)}\n\n${check}${markdownTable(r.figures)}`,
  );
  const latest = join(REPO_ROOT, 'bench-results', 'latest');
  // Only runs written under bench-results/ become `latest` (not tests writing to a temp dir).
  if (copyLatest && o.outDir !== latest && o.outDir.startsWith(join(REPO_ROOT, 'bench-results') + '/')) {
    rmSync(latest, { recursive: true, force: true });
    cpSync(o.outDir, latest, { recursive: true });
  }
}

/** Recomputes figures, report and chart of an earlier run from its results.json (`--render=<path>`). */
export function renderFrom(path: string): BenchResults {
  const r = JSON.parse(readFileSync(path, 'utf8')) as BenchResults;
  const saved = r.meta.options as Omit<BenchOptions, 'phases' | 'log'> & { phases: string[] };
  const o: BenchOptions = { ...saved, phases: new Set(saved.phases), outDir: dirname(path), log: () => {} };
  r.figures = figures(r, o);
  writeOutputs(r, o, false);
  return r;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const render = process.argv.find((a) => a.startsWith('--render='));
  if (render) {
    const r = renderFrom(render.slice('--render='.length));
    process.stdout.write(markdownTable(r.figures));
    process.exit(0);
  }
  const o = parseArgs(process.argv.slice(2));
  runBench(o).then(
    (r) => {
      process.stdout.write(markdownTable(r.figures));
      process.stdout.write(`\nresults: ${o.outDir}/results.json, chart: ${o.outDir}/chart.svg\n`);
      process.exit(r.check?.identical === false ? 1 : 0);
    },
    (err) => {
      process.stderr.write(`bench failed: ${(err as Error).stack ?? String(err)}\n`);
      process.exit(1);
    },
  );
}
