// Loaded into our service by the harness (`--import`), never by the product. Plain JavaScript, so the
// built service runs without tsx: the main thread's
// event-loop delay, as the longest delay in each 100 ms window, appended as `<epoch ms> <max ms>` lines
// to the file named by BENCH_LOOP_PROBE. The reload phase reads the longest stall around a reload from
// it, measured inside the service rather than through the load generator's latencies.
import { appendFileSync } from 'node:fs';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { isMainThread } from 'node:worker_threads';

const file = process.env.BENCH_LOOP_PROBE;
if (file && isMainThread) {
  const h = monitorEventLoopDelay({ resolution: 1 });
  h.enable();
  // The process' start (epoch ms): V8's --trace-gc lines count milliseconds from about then.
  let lines = [`# timeOrigin ${performance.timeOrigin.toFixed(1)}`];
  const flush = () => {
    if (lines.length) appendFileSync(file, lines.join('\n') + '\n');
    lines = [];
  };
  setInterval(() => {
    lines.push(`${Date.now()} ${(h.max / 1e6).toFixed(2)}`);
    h.reset();
    if (lines.length >= 10) flush();
  }, 100).unref();
  process.on('exit', flush);
}
