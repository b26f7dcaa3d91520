// Phase `xds-compare` (standalone): our control plane's fan-out side by side with a go-control-plane
// SnapshotCache server (load/go-xds/, built on demand), serving the same RateLimitConfig content to N
// simulated pods (one ADS stream each, each on its own connection, ACKing every version; both in
// xds-compare-process.ts). A third arm is our server with the pods speaking delta xDS (incremental:
// a change sends only the changed resource). The server is pinned to core 0 (the Go one with
// GOMAXPROCS=1), the pods to core 1. Rounds interleave the arms (ours, delta, go, then go, delta,
// ours, ...). Per push of one
// changed domain: the time from the change until the median pod, the 99th-percentile pod and the last
// pod received it; the server's CPU for the push (until its CPU stands still); and per round the
// server's RSS growth per connected pod.
//
//   npm run bench -- --no-reference --phases=xds-compare --xds-pods=100,1000 --xds-domains=10,1000
import { spawn, type ChildProcessByStdio } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import { ensureGoXdsServer } from '../harness/drivers.js';
import { stat } from '../harness/measure.js';
import { cpuSeconds, REPO_ROOT, rssMiB } from '../harness/services.js';
import type { BenchOptions } from '../options.js';
import type { BenchResults } from '../report/results.js';
import { evaluateTarget, type Figure } from '../report/table.js';
import { AUX_CPUS, SERVICE_CPUS, type Phase, type PhaseContext } from './phase.js';

/** `ours-delta`: our server, the pods speaking delta xDS; `ours-base`: another build (`--base`), SotW. */
export type XdsServerKind = 'ours' | 'ours-delta' | 'ours-base' | 'go';

export interface XdsPush {
  /** ms from the change until the median, 99th-percentile and last pod received the new version. */
  p50: number;
  p99: number;
  last: number;
  /** Server CPU (ms) for the push. */
  cpuMs: number;
  /** The simulated pods' CPU (ms, all pods together) for the push: receiving it is not free either. */
  podsCpuMs: number;
}

export interface XdsCompareRound {
  server: XdsServerKind;
  pods: number;
  domains: number;
  descriptors: number;
  round: number;
  /** Server RSS growth per connected pod (KiB) and the RSS with every pod on the first version (MiB). */
  rssPerPodKiB: number;
  rssMiB: number;
  /** ms until every pod had the first version, from the pods' start. */
  connectMs: number;
  pushes: XdsPush[];
}

const wallMs = () => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A child speaking a line protocol: write commands, wait for a line starting with a prefix. */
class LineChild {
  private readonly lines: string[] = [];
  private waiter: (() => void) | undefined;
  private exited = false;
  constructor(readonly proc: ChildProcessByStdio<Writable, Readable, null>) {
    createInterface({ input: proc.stdout }).on('line', (l) => {
      this.lines.push(l);
      this.waiter?.();
    });
    proc.on('exit', () => {
      this.exited = true;
      this.waiter?.();
    });
  }
  send(line: string): void {
    this.proc.stdin.write(`${line}\n`);
  }
  async expect(prefix: string, timeoutMs: number): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const i = this.lines.findIndex((l) => l.startsWith(prefix));
      if (i >= 0) return this.lines.splice(0, i + 1)[i];
      if (this.exited) throw new Error(`child exited before "${prefix}"`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no "${prefix}" within ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiter = () => {
          clearTimeout(t);
          this.waiter = undefined;
          resolve();
        };
      });
    }
  }
  async stop(): Promise<void> {
    if (this.exited) return;
    this.proc.stdin.end();
    const t = setTimeout(() => this.proc.kill('SIGKILL'), 5000);
    await new Promise((r) => this.proc.once('exit', r));
    clearTimeout(t);
  }
}

function start(argv: string[], cpus: string, env: NodeJS.ProcessEnv = {}): LineChild {
  return new LineChild(
    spawn('taskset', ['-c', cpus, ...argv], {
      cwd: REPO_ROOT,
      stdio: ['pipe', 'pipe', 'inherit'],
      env: { ...process.env, ...env },
    }),
  );
}

const nodeTs = (...args: string[]) => [
  process.execPath,
  '--import',
  'tsx',
  'bench/phases/xds-compare-process.ts',
  ...args,
];

/** Waits until the process' CPU stops growing (two 100 ms samples without a millisecond more), at most 20 s. */
async function cpuAtRest(pid: number): Promise<number> {
  let last = cpuSeconds(pid);
  let still = 0;
  const deadline = Date.now() + 20_000;
  while (still < 2 && Date.now() < deadline) {
    await sleep(100);
    const now = cpuSeconds(pid);
    still = now - last < 0.001 ? still + 1 : 0;
    last = now;
  }
  return last;
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

export async function measureXdsServer(
  server: XdsServerKind,
  goBin: string | undefined,
  pods: number,
  domains: number,
  descriptors: number,
  pushes: number,
  round: number,
  baseDist?: string,
): Promise<XdsCompareRound> {
  const srv =
    server === 'go'
      ? start([goBin!, String(domains), String(descriptors)], SERVICE_CPUS, { GOMAXPROCS: '1' })
      : start(
          nodeTs('server', String(domains), String(descriptors)),
          SERVICE_CPUS,
          server === 'ours-base' && baseDist ? { XDS_SERVER_DIST: baseDist } : {},
        );
  let podsProc: LineChild | undefined;
  try {
    const port = (await srv.expect('PORT ', 180_000)).slice(5);
    const pid = srv.proc.pid!;
    await cpuAtRest(pid);
    const rss0 = rssMiB(pid);
    const t0 = wallMs();
    podsProc = start(nodeTs(server === 'ours-delta' ? 'delta-pods' : 'pods', port, String(pods)), AUX_CPUS);
    await podsProc.expect('READY', 600_000);
    const connectMs = wallMs() - t0;
    await cpuAtRest(pid);
    const rss1 = rssMiB(pid);
    const out: XdsPush[] = [];
    for (let p = 0; p < pushes; p++) {
      await sleep(300);
      podsProc.send('mark');
      await podsProc.expect('MARKED', 60_000);
      const cpu0 = cpuSeconds(pid);
      const podsCpu0 = cpuSeconds(podsProc.proc.pid!);
      const at = wallMs();
      srv.send(`change ${p % domains}`);
      const done = await podsProc.expect('DONE ', 600_000);
      const arrived = (JSON.parse(done.slice(5)) as number[]).map((t) => t - at).sort((a, b) => a - b);
      const cpu1 = await cpuAtRest(pid);
      const podsCpu1 = await cpuAtRest(podsProc.proc.pid!);
      out.push({
        p50: percentile(arrived, 50),
        p99: percentile(arrived, 99),
        last: arrived[arrived.length - 1],
        cpuMs: (cpu1 - cpu0) * 1000,
        podsCpuMs: (podsCpu1 - podsCpu0) * 1000,
      });
    }
    return {
      server,
      pods,
      domains,
      descriptors,
      round,
      rssPerPodKiB: ((rss1 - rss0) * 1024) / pods,
      rssMiB: rss1,
      connectMs,
      pushes: out,
    };
  } finally {
    await podsProc?.stop();
    await srv.stop();
  }
}

const list = (v: string) => v.split(',').map(Number);

async function run({ o, results, log }: PhaseContext): Promise<void> {
  const goBin = ensureGoXdsServer(log);
  const available: XdsServerKind[] = ['ours', 'ours-delta'];
  if (o.base) available.push('ours-base');
  if (goBin) available.push('go');
  else log('xds-compare: no go-control-plane server; measuring ours only');
  const servers = available.filter((k) => !o.xdsArms || o.xdsArms.includes(k));
  const rounds: XdsCompareRound[] = [];
  results.extra['xds-compare'] = rounds;
  for (const pods of list(o.xdsPods)) {
    for (const domains of list(o.xdsDomains)) {
      for (let r = 0; r < o.xdsRounds; r++) {
        const order = r % 2 === 0 ? servers : [...servers].reverse();
        for (const server of order) {
          try {
            const m = await measureXdsServer(
              server,
              goBin,
              pods,
              domains,
              o.xdsDescriptors,
              o.xdsPushes,
              r,
              o.base ? join(o.base, 'dist') : undefined,
            );
            rounds.push(m);
            log(
              `xds-compare ${server} pods=${pods} domains=${domains} round ${r}: last pod ${m.pushes
                .map((p) => p.last.toFixed(0))
                .join('/')} ms, cpu ${m.pushes.map((p) => p.cpuMs.toFixed(0)).join('/')} ms, ` +
                `${m.rssPerPodKiB.toFixed(1)} KiB/pod, connect ${m.connectMs.toFixed(0)} ms`,
            );
          } catch (err) {
            log(`xds-compare ${server} pods=${pods} domains=${domains} failed: ${(err as Error).message}`);
          }
        }
      }
    }
  }
}

/** Per pods × domains: push latency (median / p99 / last pod), CPU per push, RSS per pod; ours (SotW and delta) and go. */
function figures(r: BenchResults, _o: BenchOptions): Figure[] {
  const rounds = (r.extra['xds-compare'] ?? []) as XdsCompareRound[];
  const out: Figure[] = [];
  const cells = new Map<string, XdsCompareRound[]>();
  for (const m of rounds) {
    const k = `${m.pods}x${m.domains}`;
    cells.set(k, [...(cells.get(k) ?? []), m]);
  }
  for (const ms of cells.values()) {
    const { pods, domains } = ms[0];
    for (const arm of ['ours', 'ours-delta', 'ours-base'] as const) {
      if (!ms.some((m) => m.server === arm)) continue;
      out.push(...armFigures(ms, arm, pods, domains));
    }
  }
  return out;
}

/** One arm of ours (SotW, delta, or another build with SotW) beside go-control-plane. */
function armFigures(
  ms: XdsCompareRound[],
  arm: 'ours' | 'ours-delta' | 'ours-base',
  pods: number,
  domains: number,
): Figure[] {
  const out: Figure[] = [];
  const protocol = arm === 'ours' ? 'SotW' : arm === 'ours-delta' ? 'delta' : 'SotW, the --base build';
  const group = `xDS fan-out vs go-control-plane (${pods} pods, ${domains} domains, one changed; ours ${protocol})`;
  const of = (kind: XdsServerKind, f: (m: XdsCompareRound) => number[]) =>
    stat(ms.filter((m) => m.server === kind).flatMap(f));
  const row = (name: string, unit: string, f: (m: XdsCompareRound) => number[]): Figure => {
    const reference = of('go', f);
    return {
      group,
      name,
      unit,
      better: 'lower',
      ours: of(arm, f),
      ...(reference.n ? { reference } : {}),
    };
  };
  out.push(row('push to the median pod', 'ms', (m) => m.pushes.map((p) => p.p50)));
  out.push(row('push to the p99 pod', 'ms', (m) => m.pushes.map((p) => p.p99)));
  const last = row('push to the last pod', 'ms', (m) => m.pushes.map((p) => p.last));
  if (pods >= 1000 && domains >= 1000)
    last.target = evaluateTarget({ oursMax: 1000, text: '< 1000 ms (ours)' }, last);
  else if (last.reference) last.target = evaluateTarget({ ratioMax: 1 }, last);
  out.push(last);
  // CPU is read in 10 ms ticks: the mean over a round's pushes, not each push, is the figure.
  out.push(
    row('server CPU per push (mean of a round)', 'ms', (m) => [
      m.pushes.reduce((a, p) => a + p.cpuMs, 0) / Math.max(1, m.pushes.length),
    ]),
  );
  out.push(
    row("the pods' CPU per push (all pods, mean of a round)", 'ms', (m) => [
      m.pushes.reduce((a, p) => a + p.podsCpuMs, 0) / Math.max(1, m.pushes.length),
    ]),
  );
  out.push(row('server RSS per connected pod', 'KiB', (m) => [m.rssPerPodKiB]));
  return out;
}

export const xdsComparePhase: Phase = { name: 'xds-compare', needs: 'standalone', run, figures };
