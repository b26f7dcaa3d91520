// Moves statistics from the in-memory store to the sinks every STATS_FLUSH_INTERVAL: counters
// as deltas (unchanged counters are not sent, like gostats), timers as the samples since the
// previous flush. The decision path never touches a sink.
import type { Logger } from '../../common/index.js';
import type { StatsSink } from './sink.js';
import type { StatsStore } from './store.js';

export interface StatsFlusherOptions {
  store: StatsStore;
  sinks: StatsSink[];
  intervalMs: number;
  logger?: Logger;
}

export class StatsFlusher {
  private timer?: NodeJS.Timeout;
  private closed = false;
  /** Completed flushes (for tests and /stats). */
  flushes = 0;

  constructor(private readonly opts: StatsFlusherOptions) {}

  get sinks(): readonly StatsSink[] {
    return this.opts.sinks;
  }

  start(): void {
    if (this.timer || this.opts.sinks.length === 0 || this.opts.intervalMs <= 0) return;
    this.timer = setInterval(() => this.flush(), this.opts.intervalMs);
    this.timer.unref();
  }

  /** One flush to every sink; a failing sink does not stop the others. */
  flush(): void {
    const sinks = this.opts.sinks;
    if (sinks.length === 0 || this.closed) return;
    for (const c of this.opts.store.allCounters()) {
      const d = c.latch();
      if (d === 0) continue;
      for (const s of sinks) this.guard(s, () => s.flushCounter(c.name, d));
    }
    for (const g of this.opts.store.allGauges()) {
      for (const s of sinks) if (s.flushGauge) this.guard(s, () => s.flushGauge!(g.name, g.value));
    }
    for (const t of this.opts.store.allTimers()) {
      const drained = t.drain();
      if (!drained) continue;
      for (const s of sinks) this.guard(s, () => s.flushTimer(t.name, drained));
    }
    for (const s of sinks) this.guard(s, () => s.flushed());
    this.flushes++;
  }

  private guard(sink: StatsSink, fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.opts.logger?.warn(`stats sink ${sink.constructor.name}: ${(err as Error).message}`);
    }
  }

  /** Final flush, then the sinks close (sockets, the metrics listener). */
  async close(): Promise<void> {
    if (this.closed) return;
    clearInterval(this.timer);
    this.timer = undefined;
    this.flush();
    this.closed = true;
    await Promise.all(this.opts.sinks.map((s) => s.close().catch(() => undefined)));
  }
}
