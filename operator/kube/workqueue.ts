// A work queue of string keys, after client-go's: a key is queued at most once; a key added while it
// is being processed is queued again when done() is called (never processed twice at once); failed
// keys come back after a per-key exponential backoff that forget() resets.

export interface WorkQueueOptions {
  /** First retry delay (default 100 ms). */
  readonly baseDelayMs?: number;
  /** Largest retry delay (default 60 s). */
  readonly maxDelayMs?: number;
}

export class WorkQueue {
  private readonly queue: string[] = [];
  private readonly dirty = new Set<string>();
  private readonly processing = new Set<string>();
  private readonly failures = new Map<string, number>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private waiters: ((key: string | undefined) => void)[] = [];
  private shuttingDown = false;
  private readonly baseDelayMs: number;
  private readonly maxDelayMs: number;

  constructor(opts: WorkQueueOptions = {}) {
    this.baseDelayMs = opts.baseDelayMs ?? 100;
    this.maxDelayMs = opts.maxDelayMs ?? 60_000;
  }

  /** Keys waiting (not counting those being processed). */
  get length(): number {
    return this.queue.length;
  }

  add(key: string): void {
    if (this.shuttingDown || this.dirty.has(key)) return;
    this.dirty.add(key);
    if (this.processing.has(key)) return;
    const w = this.waiters.shift();
    if (w) {
      this.dirty.delete(key);
      this.processing.add(key);
      w(key);
    } else this.queue.push(key);
  }

  /** The next key; resolves undefined once the queue is shut down. */
  get(): Promise<string | undefined> {
    if (this.shuttingDown) return Promise.resolve(undefined);
    const key = this.queue.shift();
    if (key !== undefined) {
      this.dirty.delete(key);
      this.processing.add(key);
      return Promise.resolve(key);
    }
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  done(key: string): void {
    this.processing.delete(key);
    if (this.dirty.has(key)) {
      this.dirty.delete(key);
      this.add(key);
    }
  }

  /** Adds the key after its backoff: baseDelay * 2^failures, capped. */
  addRateLimited(key: string): number {
    const n = this.failures.get(key) ?? 0;
    this.failures.set(key, n + 1);
    const delay = Math.min(this.maxDelayMs, this.baseDelayMs * 2 ** Math.min(n, 30));
    this.addAfter(key, delay);
    return delay;
  }

  addAfter(key: string, delayMs: number): void {
    if (this.shuttingDown) return;
    const t = setTimeout(() => {
      this.timers.delete(t);
      this.add(key);
    }, delayMs);
    t.unref();
    this.timers.add(t);
  }

  /** Resets the key's backoff (after it was processed successfully). */
  forget(key: string): void {
    this.failures.delete(key);
  }

  failuresOf(key: string): number {
    return this.failures.get(key) ?? 0;
  }

  shutDown(): void {
    this.shuttingDown = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    for (const w of this.waiters) w(undefined);
    this.waiters = [];
  }
}
