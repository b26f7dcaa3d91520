// The longest stretch of work on this thread's event loop, measured as CPU time rather than lateness: a
// 1 ms timer notes the thread's CPU time (process.threadCpuUsage) at each tick, and the CPU spent between
// two ticks is the longest run of work that held the timer back (a task, a microtask chain, a garbage
// collection pause on this thread). Time the thread spent waiting for a core is not counted, so a
// loaded machine does not inflate it the way it inflates the lateness of the same tick.
export interface LoopBusyMeter {
  /** The longest CPU time (ms) between two ticks that ended in [fromMs, toMs] (performance.now()). */
  longest(fromMs: number, toMs: number): number;
  stop(): void;
}

export function startLoopBusyMeter(): LoopBusyMeter {
  const at: number[] = [];
  const busy: number[] = [];
  let last = process.threadCpuUsage();
  const timer = setInterval(() => {
    const now = process.threadCpuUsage();
    at.push(performance.now());
    busy.push((now.user - last.user + now.system - last.system) / 1000);
    last = now;
  }, 1);
  return {
    longest(fromMs, toMs) {
      let max = 0;
      for (let i = 0; i < at.length; i++)
        if (at[i]! >= fromMs && at[i]! <= toMs) max = Math.max(max, busy[i]!);
      return max;
    },
    stop: () => clearInterval(timer),
  };
}
