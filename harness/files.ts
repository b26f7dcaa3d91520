// Files that are not what their name says, for the tests of the file readers: FIFOs (Debian's mkfifo),
// sparse files of any size (no disk used), and a watch on this process's memory and event loop while a
// reader meets them.
import { execFileSync } from 'node:child_process';
import { truncateSync, writeFileSync } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';

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
 * Samples RSS every 10 ms and the event loop's delay while `fn` runs. A loop held by a synchronous read
 * shows as a long delay; memory a reader takes (and frees before the end) shows in the highest sample.
 */
export async function watchProcess(fn: () => Promise<unknown>): Promise<ProcessWatch> {
  const base = process.memoryUsage.rss();
  let peak = base;
  const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage.rss())), 10);
  const loop = monitorEventLoopDelay({ resolution: 10 });
  loop.enable();
  try {
    await fn();
  } finally {
    loop.disable();
    clearInterval(sampler);
  }
  peak = Math.max(peak, process.memoryUsage.rss());
  return { rssGrowth: peak - base, maxLoopDelayMs: loop.max / 1e6 };
}
