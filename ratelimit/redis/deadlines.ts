// REDIS_TIMEOUT per request instead of per command: ioredis' `commandTimeout` arms and clears a timer for
// every command, 16 for a request with 8 descriptors, a large share of the service's CPU
// (docs/decisions/007-hot-path-shapes.md). Here each request's promise is bounded by one sweep timer shared by every request in flight.
import { CacheError } from '../counting/index.js';

interface Entry {
  deadline: number;
  reject: (err: Error) => void;
  /** Its index in the ring, -1 once it settled or timed out. */
  slot: number;
}

export class RequestDeadlines {
  // The requests in flight in a ring, in deadline order (one timeout for all, so insertion order), so a
  // sweep stops at the first live entry. Not a Set: a Set that every request enters and leaves
  // reallocates its table as it churns, a table the long-lived Set keeps across young-generation GCs
  // and so promotes bytes on every call. The ring only grows, to the most requests in flight
  // within one timeout; a settled request empties its slot at once, so nothing it holds outlives it.
  private ring: (Entry | undefined)[] = new Array<Entry | undefined>(64).fill(undefined);
  private head = 0;
  private length = 0;
  private live = 0;
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
      const e: Entry = { deadline: performance.now() + this.timeoutMs, reject, slot: -1 };
      this.push(e);
      if (this.timer === undefined) {
        this.timer = setInterval(() => this.sweep(), this.tickMs);
        this.timer.unref();
      }
      p.then(
        (v) => {
          this.settle(e);
          resolve(v);
        },
        (err: unknown) => {
          this.settle(e);
          reject(err);
        },
      );
    });
  }

  get inFlight(): number {
    return this.live;
  }

  private push(e: Entry): void {
    if (this.length === this.ring.length) {
      const grown = new Array<Entry | undefined>(this.ring.length * 2).fill(undefined);
      for (let i = 0; i < this.length; i++) {
        const x = this.ring[(this.head + i) % this.ring.length];
        grown[i] = x;
        if (x !== undefined) x.slot = i;
      }
      this.ring = grown;
      this.head = 0;
    }
    const slot = (this.head + this.length) % this.ring.length;
    this.ring[slot] = e;
    e.slot = slot;
    this.length++;
    this.live++;
  }

  private settle(e: Entry): void {
    if (e.slot < 0) return;
    this.ring[e.slot] = undefined;
    e.slot = -1;
    this.live--;
  }

  private sweep(): void {
    const now = performance.now();
    while (this.length > 0) {
      const e = this.ring[this.head];
      if (e !== undefined) {
        if (e.deadline > now) break;
        this.settle(e);
        e.reject(new CacheError(`${this.what} timed out after ${this.timeoutMs} ms`));
      }
      this.head = (this.head + 1) % this.ring.length;
      this.length--;
    }
    if (this.length === 0) this.stop();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }
}
