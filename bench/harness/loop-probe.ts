// Reads what loop-probe-preload.mjs wrote: loaded into our service by the harness, and into idle probe
// processes (one per core) by the latency phase's tail attribution.
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ServerProcess } from '../../harness/net.js';
import { REPO_ROOT } from './services.js';

// A slot's line is written at its end: it covers [t - 100, t].
const inWindow = (t: number, fromMs: number, toMs: number) => t >= fromMs && t - 100 <= toMs;

/** The longest main-thread stall (ms) the probe saw between two epoch times. */
export function longestStall(text: string, fromMs: number, toMs: number): number {
  return windowJitter(parseProbe(text), fromMs, toMs).maxMs;
}

const PROBE = join(REPO_ROOT, 'bench', 'harness', 'loop-probe-preload.mjs');

/** Our service's event-loop probe file in a run's output directory (written by loop-probe-preload.mjs). */
export const OURS_LOOP_PROBE_FILE = 'ours-event-loop.txt';

/**
 * Our service's probe runs only in the phases that read it (latency, reload): its GC profiling records
 * the heap's statistics at every collection, which at saturation (hundreds of young collections a
 * second) blocked our event loop for ~55 ms in every 100 ms and cut decisions per core-second by up
 * to 4x. The probe pauses while `<file>.off` exists (loop-probe-preload.mjs); run.ts pauses it once our
 * service is up, and `whileProbed` resumes it for a phase's rounds.
 */
export function pauseOursProbe(outDir: string): void {
  writeFileSync(join(outDir, `${OURS_LOOP_PROBE_FILE}.off`), '');
}

export async function whileProbed<T>(outDir: string, on: boolean, fn: () => Promise<T>): Promise<T> {
  if (on) rmSync(join(outDir, `${OURS_LOOP_PROBE_FILE}.off`), { force: true });
  try {
    return await fn();
  } finally {
    pauseOursProbe(outDir);
  }
}

/** One line of a probe file: the end of a 100 ms slot (epoch ms) and the longest lateness in it (ms). */
export type ProbeSlot = readonly [atMs: number, maxMs: number];

export interface JitterProbes {
  files: Record<string, string>;
  stop(): Promise<void>;
}

/** Starts an idle probe process pinned to each of `cpus` (label → cpu list), writing into `dir`. */
export function startJitterProbes(dir: string, cpus: Record<string, string>): JitterProbes {
  const files: Record<string, string> = {};
  const procs: ServerProcess[] = [];
  for (const [label, cpu] of Object.entries(cpus)) {
    const file = join(dir, `jitter-${label}.txt`);
    files[label] = file;
    procs.push(
      new ServerProcess(
        `jitter-${label}`,
        'taskset',
        [
          '-c',
          cpu,
          process.execPath,
          '--import',
          PROBE,
          '-e',
          "setInterval(() => {}, 1 << 30); process.on('SIGTERM', () => process.exit(0))",
        ],
        {
          logPath: join(dir, `jitter-${label}.log`),
          cwd: REPO_ROOT,
          env: { ...process.env, BENCH_LOOP_PROBE: file },
        },
      ),
    );
  }
  return { files, stop: async () => void (await Promise.all(procs.map((p) => p.stop()))) };
}

export function readProbe(file: string): ProbeSlot[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return [];
  }
  return parseProbe(text);
}

export function parseProbe(text: string): ProbeSlot[] {
  const out: ProbeSlot[] = [];
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || line.startsWith('g ')) continue;
    const [a, b] = line.split(' ');
    if (a && b) out.push([Number(a), Number(b)]);
  }
  return out;
}

/** The probed process' start (epoch ms), from the probe file's header line, if written. */
export function probeTimeOrigin(text: string): number | undefined {
  const m = /^# timeOrigin ([\d.]+)$/m.exec(text);
  return m ? Number(m[1]) : undefined;
}

export interface WindowJitter {
  /** Longest lateness seen in the window (ms). */
  maxMs: number;
  /** 100 ms slots of the window with a lateness above 5 ms. */
  slotsOver5ms: number;
  slots: number;
}

/** The probe's slots that overlap [fromMs, toMs]. */
export function windowJitter(slots: readonly ProbeSlot[], fromMs: number, toMs: number): WindowJitter {
  let maxMs = 0;
  let over = 0;
  let n = 0;
  for (const [at, max] of slots) {
    if (!inWindow(at, fromMs, toMs)) continue;
    n++;
    if (max > maxMs) maxMs = max;
    if (max > 5) over++;
  }
  return { maxMs, slotsOver5ms: over, slots: n };
}

/** The V8 heap bytes allocated since the probe started, at the end of each slot (probes that write it). */
export function parseProbeAllocation(text: string): (readonly [atMs: number, bytes: number])[] {
  const out: (readonly [number, number])[] = [];
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || line.startsWith('g ')) continue;
    const [a, , c] = line.split(' ');
    if (a && c) out.push([Number(a), Number(c)]);
  }
  return out;
}

/** Each GC the probe saw: the end of its slot (epoch ms), its pause (ms) and its type. */
export function parseProbeGc(text: string): { atMs: number; ms: number; type: string }[] {
  const out: { atMs: number; ms: number; type: string }[] = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith('g ')) continue;
    const [, at, ms, type] = line.split(' ');
    out.push({ atMs: Number(at), ms: Number(ms), type: type ?? '' });
  }
  return out;
}

export interface WindowAllocation {
  /** Bytes allocated between the two slot ends that bracket the window, and the span they cover (ms). */
  bytes: number;
  spanMs: number;
  /** GC pauses in the window's slots (ms, sorted). */
  gcPausesMs: number[];
}

/** Allocation and GC pauses of [fromMs, toMs], from a probe file's text; undefined when it has no allocation column. */
export function windowAllocation(text: string, fromMs: number, toMs: number): WindowAllocation | undefined {
  const slots = parseProbeAllocation(text);
  let first: readonly [number, number] | undefined;
  let last: readonly [number, number] | undefined;
  for (const s of slots) {
    if (s[0] <= fromMs) first = s;
    if (s[0] <= toMs) last = s;
  }
  if (!first || !last || last[0] <= first[0]) return undefined;
  const gcPausesMs = parseProbeGc(text)
    .filter((g) => g.atMs > first[0] && g.atMs <= last[0])
    .map((g) => g.ms)
    .sort((a, b) => a - b);
  return { bytes: last[1] - first[1], spanMs: last[0] - first[0], gcPausesMs };
}
