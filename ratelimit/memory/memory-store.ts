// In-process counters (BACKEND_TYPE=memory): single process only, for local runs and tests.
// Several ratelimit processes with this backend do not share counts.
import { evaluateLimitCheck, type NumberSlots } from '../limiter/index.js';
import { type CounterOp, type CounterStore, type LimitCheck, type LimitVerdict } from '../counting/index.js';

/** A counter, or a token bucket's TAT (count + frac / den ms; frac and den stay 0 for counters). */
interface Slot {
  count: number;
  frac: number;
  den: number;
  expiresAtMs: number;
}

export class MemoryCounterStore implements CounterStore {
  private readonly slots = new Map<string, Slot>();
  private readonly sweeper: NodeJS.Timeout;

  constructor(
    private readonly nowMs: () => number = Date.now,
    sweepIntervalMs = 5000,
  ) {
    this.sweeper = setInterval(() => this.sweep(), sweepIntervalMs);
    this.sweeper.unref();
  }

  get size(): number {
    return this.slots.size;
  }

  async increment(ops: readonly CounterOp[]): Promise<number[]> {
    const now = this.nowMs();
    const out = new Array<number>(ops.length);
    for (let i = 0; i < ops.length; i++) {
      const op = ops[i];
      let s = this.slots.get(op.key);
      if (!s || s.expiresAtMs <= now) {
        s = { count: 0, frac: 0, den: 0, expiresAtMs: 0 };
        this.slots.set(op.key, s);
      }
      s.count += op.hits;
      s.expiresAtMs = now + op.expireSeconds * 1000;
      out[i] = s.count;
    }
    return out;
  }

  /** The limit script's computation (algorithms.ts), atomic because it runs without awaiting. */
  async evaluate(checks: readonly LimitCheck[]): Promise<LimitVerdict[]> {
    const out = new Array<LimitVerdict>(checks.length);
    for (let i = 0; i < checks.length; i++) out[i] = evaluateLimitCheck(checks[i]!, this.numberSlots);
    return out;
  }

  private readonly numberSlots: NumberSlots = {
    read: (key) => {
      const s = this.slots.get(key);
      return s && s.expiresAtMs > this.nowMs() ? s.count : 0;
    },
    add: (key, by, ttlMs) => {
      const now = this.nowMs();
      let s = this.slots.get(key);
      if (!s || s.expiresAtMs <= now) {
        s = { count: 0, frac: 0, den: 0, expiresAtMs: 0 };
        this.slots.set(key, s);
      }
      s.count += by;
      s.expiresAtMs = now + ttlMs;
    },
    readBucket: (key) => {
      const s = this.slots.get(key);
      return s && s.expiresAtMs > this.nowMs() ? s : undefined;
    },
    writeBucket: (key, ms, frac, den, ttlMs) => {
      this.slots.set(key, { count: ms, frac, den, expiresAtMs: this.nowMs() + ttlMs });
    },
  };

  async get(ops: readonly CounterOp[]): Promise<number[]> {
    const now = this.nowMs();
    return ops.map((op) => {
      const s = this.slots.get(op.key);
      return s && s.expiresAtMs > now ? s.count : 0;
    });
  }

  isHealthy(): boolean {
    return true;
  }

  async close(): Promise<void> {
    clearInterval(this.sweeper);
  }

  private sweep(): void {
    const now = this.nowMs();
    for (const [k, s] of this.slots) if (s.expiresAtMs <= now) this.slots.delete(k);
  }
}
