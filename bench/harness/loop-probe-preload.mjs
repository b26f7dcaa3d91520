// Loaded into our service by the harness (`--import`), never by the product. Plain JavaScript, so the
// built service runs without tsx: the main thread's
// event-loop delay, as the longest delay in each 100 ms window, appended as `<epoch ms> <max ms>` lines
// to the file named by BENCH_LOOP_PROBE. The reload phase reads the longest stall around a reload from
// it, measured inside the service rather than through the load generator's latencies.
//
// Each line also carries a third column: the V8 heap bytes allocated since the probe started (heap in
// use now, plus everything each GC freed, from v8.GCProfiler), so a window's allocation divided by its
// calls is the garbage per decision; and each GC in the slot is a line `g <epoch ms> <pause ms> <type>`
// (the latency phase's GC pause percentiles).
//
// While a file named like the probe's with `.off` appended exists, the probe pauses (checked every
// 100 ms): no 1 ms timer, no GC profiling, no lines; the latency phase's `--latency-probe=off`.
import { appendFileSync, existsSync } from 'node:fs';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { getHeapStatistics, GCProfiler } from 'node:v8';
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
  const usedAtStart = getHeapStatistics().used_heap_size;
  let freed = 0;
  let gc = new GCProfiler();
  gc.start();
  let paused = false;
  setInterval(() => {
    if (existsSync(`${file}.off`) !== paused) {
      paused = !paused;
      if (paused) {
        h.disable();
        gc.stop();
      } else {
        h.reset();
        h.enable();
        gc = new GCProfiler();
        gc.start();
      }
    }
    if (paused) return;
    const now = Date.now();
    const stats = gc.stop()?.statistics ?? [];
    gc = new GCProfiler();
    gc.start();
    for (const e of stats) {
      freed += e.beforeGC.heapStatistics.usedHeapSize - e.afterGC.heapStatistics.usedHeapSize;
      lines.push(`g ${now} ${(e.cost / 1000).toFixed(3)} ${e.gcType}`);
    }
    const allocated = getHeapStatistics().used_heap_size - usedAtStart + freed;
    lines.push(`${now} ${(h.max / 1e6).toFixed(2)} ${allocated}`);
    h.reset();
    if (lines.length >= 10) flush();
  }, 100).unref();
  process.on('exit', flush);
}
