// Tail attribution for the latency phase: the likely cause of each tail spike. While the open-loop
// rounds run, an idle Node process on each core (the services' core and the aux core with Redis and the
// load generator) records its own timer lateness per 100 ms, and /proc/stat gives each core's steal time
// (services.ts `stealMsPerCpu`, read by measure.ts).
// Each latency sample's window is then set beside them and beside our service's own event-loop probe:
// a stall every process on a core saw is the machine's; one only our event loop saw is ours.
import { windowJitter, type ProbeSlot } from './loop-probe.js';
import type { Sample } from './measure.js';

export interface TailRow {
  label: string;
  service: string;
  p99Ms: number;
  p999Ms: number;
  /** The idle probes' longest lateness in the window, per probe label (ms). */
  probeMaxMs: Record<string, number>;
  probeSlotsOver5ms: Record<string, number>;
  /** Our service's own event-loop probe (ours only). */
  loopMaxMs?: number;
  /** Our service's GC pauses in the window (ours, with --trace-gc): the longest and their sum (ms). */
  gcMaxMs?: number;
  gcTotalMs?: number;
  /** The load driver's own longest event-loop lateness in the window (our driver only). */
  driverLoopMaxMs?: number;
  stealMs?: number[];
  /** What the window's p99.9 is put down to (see `attribute`). */
  cause: 'machine' | 'driver' | 'service: GC' | 'service' | 'unexplained' | 'none';
}

/**
 * A sample's p99.9 above 2 ms is put down to the machine when an idle probe saw a stall of at least half
 * of it in the window (every process there waited), to the driver when its own event loop was that late
 * (it measures each call from its intended start, so its stalls count as latency), to our GC when one of
 * its pauses was that long (with --trace-gc), to the service when only our event loop was that late, and
 * is unexplained otherwise (Redis or the network path; none of the probes saw it).
 */
export function attribute(
  p999Ms: number,
  probeMax: number,
  loopMax: number | undefined,
  gcMax?: number,
  driverLoopMax?: number,
): TailRow['cause'] {
  if (p999Ms <= 2) return 'none';
  if (probeMax >= p999Ms / 2) return 'machine';
  if (driverLoopMax !== undefined && driverLoopMax >= p999Ms / 2) return 'driver';
  if (gcMax !== undefined && gcMax >= p999Ms / 2) return 'service: GC';
  if (loopMax !== undefined && loopMax >= p999Ms / 2) return 'service';
  return 'unexplained';
}

export interface GcPause {
  /** Epoch ms (the process' start plus V8's milliseconds since it). */
  atMs: number;
  pauseMs: number;
  kind: string;
}

/**
 * `node --trace-gc` lines: `[pid:isolate]   <ms since start> ms: <Kind> <sizes> MB, [pooled: x MB,]
 * <pause> / <external> ms ...`.
 */
export function parseTraceGc(text: string, timeOriginMs: number): GcPause[] {
  const re = /^\[\d+:0x[0-9a-f]+\]\s+(\d+) ms: (\S+).*? MB, (?:pooled: [\d.]+ MB, )?([\d.]+) \/ [\d.]+ ms/gm;
  const out: GcPause[] = [];
  for (let m = re.exec(text); m; m = re.exec(text)) {
    out.push({ atMs: timeOriginMs + Number(m[1]), pauseMs: Number(m[3]), kind: m[2]! });
  }
  return out;
}

function gcInWindow(gc: readonly GcPause[], fromMs: number, toMs: number): { max: number; total: number } {
  let max = 0;
  let total = 0;
  for (const g of gc) {
    if (g.atMs < fromMs || g.atMs > toMs) continue;
    total += g.pauseMs;
    if (g.pauseMs > max) max = g.pauseMs;
  }
  return { max, total };
}

export function tailRows(
  samples: readonly Sample[],
  probes: Record<string, readonly ProbeSlot[]>,
  oursLoop: readonly ProbeSlot[],
  labelOf: (s: Sample) => string,
  oursGc?: readonly GcPause[],
): TailRow[] {
  const rows: TailRow[] = [];
  for (const s of samples) {
    if (s.mode !== 'open' || s.windowStartMs === undefined || s.windowEndMs === undefined) continue;
    const probeMaxMs: Record<string, number> = {};
    const probeSlotsOver5ms: Record<string, number> = {};
    for (const [label, slots] of Object.entries(probes)) {
      const j = windowJitter(slots, s.windowStartMs, s.windowEndMs);
      probeMaxMs[label] = j.maxMs;
      probeSlotsOver5ms[label] = j.slotsOver5ms;
    }
    const loopMaxMs =
      s.service === 'ours' ? windowJitter(oursLoop, s.windowStartMs, s.windowEndMs).maxMs : undefined;
    const p999Ms = s.latency.p999Us / 1000;
    const gc =
      s.service === 'ours' && oursGc ? gcInWindow(oursGc, s.windowStartMs, s.windowEndMs) : undefined;
    rows.push({
      label: labelOf(s),
      service: s.service,
      p99Ms: s.latency.p99Us / 1000,
      p999Ms,
      probeMaxMs,
      probeSlotsOver5ms,
      loopMaxMs,
      gcMaxMs: gc?.max,
      gcTotalMs: gc?.total,
      driverLoopMaxMs: s.driverLoopMaxMs,
      stealMs: s.stealMs,
      cause: attribute(
        p999Ms,
        Math.max(0, ...Object.values(probeMaxMs)),
        loopMaxMs,
        gc?.max,
        s.driverLoopMaxMs,
      ),
    });
  }
  return rows;
}

export function tailsMarkdown(rows: readonly TailRow[]): string {
  const labels = [...new Set(rows.flatMap((r) => Object.keys(r.probeMaxMs)))];
  const withGc = rows.some((r) => r.gcMaxMs !== undefined);
  const f = (x: number | undefined) => (x === undefined ? '' : x.toFixed(1));
  const head =
    `| sample | service | p99 ms | p99.9 ms | ${labels.map((l) => `idle probe ${l}: max ms (slots > 5 ms)`).join(' | ')} | driver's event loop max ms | our event loop max ms |${withGc ? ' our GC pauses: max (sum) ms |' : ''} steal ms | p99.9 put down to |\n` +
    `|---|---|---:|---:|${labels.map(() => '---:|').join('')}---:|---:|${withGc ? '---:|' : ''}---:|---|\n`;
  const body = rows
    .map(
      (r) =>
        `| ${r.label} | ${r.service} | ${f(r.p99Ms)} | ${f(r.p999Ms)} | ${labels
          .map((l) => `${f(r.probeMaxMs[l])} (${r.probeSlotsOver5ms[l] ?? 0})`)
          .join(' | ')} | ${f(r.driverLoopMaxMs)} | ${f(r.loopMaxMs)} |${
          withGc ? ` ${r.gcMaxMs === undefined ? '' : `${f(r.gcMaxMs)} (${f(r.gcTotalMs)})`} |` : ''
        } ${r.stealMs ? r.stealMs.join('/') : ''} | ${r.cause} |`,
    )
    .join('\n');
  const count = (svc: string) => {
    const c: Record<string, number> = {};
    for (const r of rows) if (r.service === svc) c[r.cause] = (c[r.cause] ?? 0) + 1;
    return Object.entries(c)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ');
  };
  const services = [...new Set(rows.map((r) => r.service))];
  return (
    `# Tail attribution\n\n` +
    `A sample's p99.9 (above 2 ms) is put down to the machine when an idle probe process on either core ` +
    `was late by at least half of it in the window, to the driver when its own event loop was (our ` +
    `driver reports it), to our GC when one of its pauses was that long ` +
    `(runs with --trace-gc), to the service when only our event loop was, and is unexplained otherwise.\n\n` +
    services.map((s) => `- ${s}: ${count(s)}`).join('\n') +
    `\n\n` +
    head +
    body +
    '\n'
  );
}
