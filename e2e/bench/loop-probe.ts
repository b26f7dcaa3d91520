// Loaded into our service by the harness (`--import`), never by the product: the main thread's
// event-loop delay, as the longest delay in each 100 ms window, appended as `<epoch ms> <max ms>` lines
// to the file named by BENCH_LOOP_PROBE. The reload phase reads the longest stall around a reload from
// it, measured inside the service rather than through the load generator's latencies.
import { appendFileSync } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { isMainThread } from 'node:worker_threads';

const file = process.env.BENCH_LOOP_PROBE;
if (file && isMainThread) {
  const h = monitorEventLoopDelay({ resolution: 1 });
  h.enable();
  let lines: string[] = [];
  setInterval(() => {
    lines.push(`${Date.now()} ${(h.max / 1e6).toFixed(2)}`);
    h.reset();
    if (lines.length >= 10) {
      appendFileSync(file, lines.join('\n') + '\n');
      lines = [];
    }
  }, 100).unref();
}

/** The longest main-thread stall (ms) the probe saw between two epoch times. */
export function longestStall(text: string, fromMs: number, toMs: number): number {
  let max = 0;
  for (const line of text.split('\n')) {
    const [t, v] = line.split(' ').map(Number);
    // A window's line is written at its end: it covers [t - 100, t].
    if (t >= fromMs && t - 100 <= toMs && v > max) max = v;
  }
  return max;
}
