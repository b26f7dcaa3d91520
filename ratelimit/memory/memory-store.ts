// In-process counters (BACKEND_TYPE=memory): single process only, for local runs and tests.
// Several ratelimit processes with this backend do not share counts.
//
// Keys are built from request values, so the table is bounded in bytes (maxBytes, MEMORY_MAX_BYTES: each
// entry costs its key's characters, keyBytes, plus ENTRY_OVERHEAD_BYTES). When a new key does not fit,
// expired entries are swept (at most once a second), then the oldest keys (by when they were created)
// are evicted until it does: an evicted key starts again from 0, so under that pressure the store may
// admit more than a limit, never less.
import { DEFAULT_MEMORY_MAX_BYTES } from '../settings/index.js';
import { evaluateLimitCheck, type NumberSlots } from '../counting/index.js';
import {
  keyBytes,
  type CounterOp,
  type CounterStore,
  type LimitCheck,
  type LimitVerdict,
} from '../counting/index.js';

/** A counter, or a token bucket's TAT (count + frac / den ms; frac and den stay 0 for counters). */
interface Slot {
  count: number;
  frac: number;
  den: number;
  expiresAtMs: number;
}

/** Heap bytes of one entry besides its key's characters: the Map entry and its share of the hash table, the Slot, the key's header (checked in memory-store.test.ts). */
const ENTRY_OVERHEAD_BYTES = 400;

export class MemoryCounterStore implements CounterStore {
  private readonly slots = new Map<string, Slot>();
  private readonly sweeper: NodeJS.Timeout;
  private bytes = 0;
  private lastSweepMs = 0;
  /** Keys evicted to stay within maxBytes (for tests and the log). */
  evicted = 0;

  constructor(
    private readonly nowMs: () => number = Date.now,
    sweepIntervalMs = 5000,
    private readonly maxBytes = DEFAULT_MEMORY_MAX_BYTES,
  ) {
    this.sweeper = setInterval(() => this.sweep(), sweepIntervalMs);
    this.sweeper.unref();
  }

  get size(): number {
    return this.slots.size;
  }

  /** Accounted bytes of the entries, at most maxBytes. */
  get accountedBytes(): number {
    return this.bytes;
  }

  /** The slot of a key, created (within the byte budget) when absent. */
  private slot(key: string, now: number): Slot {
    let s = this.slots.get(key);
    if (s) return s;
    const size = ENTRY_OVERHEAD_BYTES + keyBytes(key);
    if (this.bytes + size > this.maxBytes) this.makeRoom(size, now);
    s = { count: 0, frac: 0, den: 0, expiresAtMs: 0 };
    this.slots.set(key, s);
    this.bytes += size;
    return s;
  }

  private makeRoom(size: number, now: number): void {
    if (now - this.lastSweepMs >= 1000) {
      this.lastSweepMs = now;
      this.sweep();
    }
    // Oldest first: a Map iterates in insertion order.
    for (const k of this.slots.keys()) {
      if (this.bytes + size <= this.maxBytes) break;
      this.drop(k);
      this.evicted++;
    }
  }

  private drop(key: string): void {
    this.slots.delete(key);
    this.bytes -= ENTRY_OVERHEAD_BYTES + keyBytes(key);
  }

  async increment(ops: readonly CounterOp[]): Promise<number[]> {
    const now = this.nowMs();
    const out = new Array<number>(ops.length);
    for (let i = 0; i < ops.length; i++) {
      const op = ops[i];
      const s = this.slot(op.key, now);
      if (s.expiresAtMs <= now) s.count = 0;
      if (op.hits < 0) {
        // A refund: down to 0 at most, keeping the window's expiry (an absent key stays absent).
        s.count = Math.max(s.count + op.hits, 0);
        if (s.expiresAtMs <= now) this.drop(op.key);
      } else {
        s.count += op.hits;
        s.expiresAtMs = now + op.expireSeconds * 1000;
      }
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
      const s = this.slot(key, now);
      if (s.expiresAtMs <= now) {
        s.count = 0;
        s.frac = 0;
        s.den = 0;
      }
      s.count += by;
      s.expiresAtMs = now + ttlMs;
    },
    take: (key, by) => {
      const s = this.slots.get(key);
      if (s && s.expiresAtMs > this.nowMs()) s.count = Math.max(s.count - by, 0);
    },
    readBucket: (key) => {
      const s = this.slots.get(key);
      return s && s.expiresAtMs > this.nowMs() ? s : undefined;
    },
    writeBucket: (key, ms, frac, den, ttlMs) => {
      const now = this.nowMs();
      const s = this.slot(key, now);
      s.count = ms;
      s.frac = frac;
      s.den = den;
      s.expiresAtMs = now + ttlMs;
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
    for (const [k, s] of this.slots) if (s.expiresAtMs <= now) this.drop(k);
  }
}
