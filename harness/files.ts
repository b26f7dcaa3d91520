// Files that are not what their name says, for the tests of the file readers: FIFOs (Debian's mkfifo),
// sparse files of any size (no disk used), and a watch on this process's memory and event loop while a
// reader meets them.
import { execFileSync } from 'node:child_process';
import { truncateSync, writeFileSync } from 'node:fs';

/** Makes a FIFO at `path`. */
export function mkfifo(path: string): void {
  execFileSync('mkfifo', [path]);
}

/** A file of `bytes` bytes that uses no disk (a hole): its size is real to fstat, its data zeros. */
export function sparseFile(path: string, bytes: number): void {
  writeFileSync(path, '');
  truncateSync(path, bytes);
}

export interface ProcessWatch {
  /** Growth of the resident set since the watch started (bytes), at its highest sample. */
  readonly rssGrowth: number;
  /** The longest the event loop was held, in ms. */
  readonly maxLoopDelayMs: number;
}

/**
 * Samples RSS and the event loop every 5 ms while `fn` runs (and one tick after it, so a synchronous
 * stretch at its end is measured too). A loop held by a synchronous read shows as a long gap between
 * ticks; memory a reader takes shows in the highest sample.
 */
export async function watchProcess(fn: () => Promise<unknown>): Promise<ProcessWatch> {
  const base = process.memoryUsage.rss();
  let peak = base;
  let last = performance.now();
  let maxGap = 0;
  const tick = () => {
    const now = performance.now();
    maxGap = Math.max(maxGap, now - last);
    last = now;
    peak = Math.max(peak, process.memoryUsage.rss());
  };
  const sampler = setInterval(tick, 5);
  try {
    await fn();
    tick();
    await new Promise((r) => setTimeout(r, 20));
  } finally {
    clearInterval(sampler);
  }
  tick();
  return { rssGrowth: peak - base, maxLoopDelayMs: maxGap };
}
