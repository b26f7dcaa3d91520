// REDIS_TIMEOUT per request instead of per command: ioredis' `commandTimeout` arms and clears a timer for
// every command, 16 for a request with 8 descriptors, which measured as ~20% of the service's CPU on that
// workload. Here each request's promise is bounded by one sweep timer shared by every request in flight.
import { CacheError } from '../counting/index.js';

interface Entry {
  deadline: number;
  reject: (err: Error) => void;
}

export class RequestDeadlines {
  // Insertion order is deadline order (one timeout for all), so a sweep stops at the first live entry.
  private readonly pending = new Set<Entry>();
  private timer: NodeJS.Timeout | undefined;
  private readonly tickMs: number;

  constructor(
    private readonly timeoutMs: number,
    private readonly what: string,
  ) {
    // Precision: a tenth of the timeout, between 10 and 250 ms.
    this.tickMs = Math.max(10, Math.min(250, Math.floor(timeoutMs / 10)));
  }

  /** `p`, or a CacheError once the timeout has passed without it settling. Zero timeout: `p` as is. */
  bound<T>(p: Promise<T>): Promise<T> {
    if (this.timeoutMs <= 0) return p;
    return new Promise<T>((resolve, reject) => {
      const e: Entry = { deadline: performance.now() + this.timeoutMs, reject };
      this.pending.add(e);
      if (this.timer === undefined) {
        this.timer = setInterval(() => this.sweep(), this.tickMs);
        this.timer.unref();
      }
      p.then(
        (v) => {
          this.pending.delete(e);
          resolve(v);
        },
        (err: unknown) => {
          this.pending.delete(e);
          reject(err);
        },
      );
    });
  }

  get inFlight(): number {
    return this.pending.size;
  }

  private sweep(): void {
    const now = performance.now();
    for (const e of this.pending) {
      if (e.deadline > now) break;
      this.pending.delete(e);
      e.reject(new CacheError(`${this.what} timed out after ${this.timeoutMs} ms`));
    }
    if (this.pending.size === 0) this.stop();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }
}
