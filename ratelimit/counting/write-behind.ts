// Write-behind counting (CACHE_WRITE_BEHIND_ENABLED, off by default): a fixed-window key this pod has
// already counted once in Redis is decided locally, from the last global count Redis returned plus the
// hits this pod added since; those hits are sent as one INCRBY + EXPIRE per key per interval, and the
// reply is the key's new global count. A key hit k times per interval by this pod then costs 2 commands
// instead of 2k, at the price of a bounded over-admission across pods (README, "Write-behind counting").
//
// The rules, each chosen so that the accuracy bound holds without assumptions on traffic:
// - A key's first hit in this pod (or after its entry was dropped) is counted synchronously in the
//   inner store, exactly as without this mode: local decisions only ever start from a real count.
// - Entries are dropped when idle (idleMs: so windows that ended disappear) and never exceed maxKeys
//   nor maxBytes (keys are built from request values; new keys beyond either bound are counted
//   synchronously, exactly as without this mode).
// - SECOND-unit keys and scripted algorithms (evaluate) always go to the inner store: a one-second window
//   is no longer than the interval, and sliding windows / token buckets admit per hit atomically.
// - A refund of a key decided here (a fixed-window refund check, or an op with negative hits) first takes
//   back this pod's hits not yet sent, exactly; only the rest goes to the inner store, and the key's known
//   count is lowered to what the store answers. So a refund is never lost against hits still waiting
//   here, and the local estimate never drops below the store's count plus the hits not yet sent.
// - A flush that fails, or that is still unanswered when the next one is due, switches the whole store to
//   synchronous counting until the inner store answers again, so the circuit breaker and the failure
//   modes decide exactly as without this mode. The failed keys' unsent hits are dropped (counted).
//
// Hand-written: no library batches counters with per-key read-back; the logic is this file.
import type { Counter, StatsStore } from '../stats/index.js';
import { keyBytes } from './key-bytes.js';
import type { CounterOp, CounterStore, LimitCheck, LimitVerdict } from './store.js';

export interface WriteBehindSettings {
  /** CACHE_WRITE_BEHIND_INTERVAL: how long a key's hits may wait before they are sent. */
  intervalMs: number;
  /** CACHE_WRITE_BEHIND_MAX_KEYS: keys decided locally at once; more are counted synchronously. */
  maxKeys: number;
  /** CACHE_WRITE_BEHIND_MAX_BYTES: accounted memory of those keys (entryBytes); beyond it, likewise. */
  maxBytes: number;
}

/**
 * Heap bytes of one entry besides its key's characters: the Map's entry and hash table share, the Entry
 * object, the key string's header, a slot in the flush list. Checked in write-behind.test.ts.
 */
const ENTRY_OVERHEAD_BYTES = 400;

/** Accounted bytes of one entry: its key's characters (keyBytes) plus ENTRY_OVERHEAD_BYTES. */
export function writeBehindEntryBytes(key: string): number {
  return ENTRY_OVERHEAD_BYTES + keyBytes(key);
}

/**
 * How long an entry outlives its last hit: at least two intervals, and 10 s, so that a key hit about once
 * per interval is not re-counted synchronously each time (that would cost 2 more commands), while the
 * entries of windows that ended go away soon.
 */
export function idleMs(intervalMs: number): number {
  return Math.max(2 * intervalMs, 10_000);
}

export const DEFAULT_WRITE_BEHIND: WriteBehindSettings = Object.freeze({
  intervalMs: 1000,
  maxKeys: 100_000,
  maxBytes: 64 * 1024 * 1024,
});

class Entry {
  /** The key's global count in the last answer of the store (includes this pod's hits sent so far). */
  known: number;
  /** Hits decided here and not yet sent. */
  pending = 0;
  /** Hits in the flush on its way. */
  inflight = 0;
  /** Time of the last hit (ms): entries idle for IDLE_MS are dropped. */
  lastHitMs: number;
  /** In the list of keys to send at the next flush. */
  queued = false;
  /** Accounted bytes (writeBehindEntryBytes). */
  readonly bytes: number;
  constructor(
    readonly key: string,
    public expireSeconds: number,
    known: number,
    nowMs: number,
  ) {
    this.known = known;
    this.lastHitMs = nowMs;
    this.bytes = writeBehindEntryBytes(key);
  }
}

export interface WriteBehindCounters {
  /** Ops decided from the local estimate. */
  local: number;
  /** Ops counted synchronously in the inner store (first sight, second unit, fallback). */
  synchronous: number;
  flushes: number;
  flushedKeys: number;
  flushedHits: number;
  /** Hits lost because their flush failed (the decisions were already made). */
  droppedHits: number;
  /** Times the store fell back to synchronous counting (a flush failed or was too slow). */
  fallbacks: number;
}

export class WriteBehindCounterStore implements CounterStore {
  private readonly entries = new Map<string, Entry>();
  private dirty: Entry[] = [];
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> | undefined;
  /** Counting synchronously until the inner store answers again (a flush failed or hung). */
  private synchronous = false;
  private closed = false;
  private readonly flushTick = (): void => this.tick();
  private readonly idleMs: number;
  private lastSweepMs = 0;
  /** Accounted bytes of the entries (writeBehindEntryBytes), at most settings.maxBytes. */
  private bytes = 0;
  readonly counters: WriteBehindCounters = {
    local: 0,
    synchronous: 0,
    flushes: 0,
    flushedKeys: 0,
    flushedHits: 0,
    droppedHits: 0,
    fallbacks: 0,
  };
  private readonly stats?: { flushedKeys: Counter; droppedHits: Counter; fallbacks: Counter };

  /** Scripted algorithms bypass write-behind: forwarded only when the inner store has it. */
  readonly evaluate?: (checks: readonly LimitCheck[]) => Promise<LimitVerdict[]>;

  constructor(
    private readonly inner: CounterStore,
    private readonly settings: WriteBehindSettings = DEFAULT_WRITE_BEHIND,
    stats?: StatsStore,
    /** The clock of the idle drop (injectable for tests). */
    private readonly nowMs: () => number = Date.now,
  ) {
    if (inner.evaluate) this.evaluate = (checks) => this.evaluateWithRefunds(checks);
    this.idleMs = idleMs(settings.intervalMs);
    if (stats) {
      this.stats = {
        flushedKeys: stats.counter('ratelimit.write_behind.flushed_keys'),
        droppedHits: stats.counter('ratelimit.write_behind.dropped_hits'),
        fallbacks: stats.counter('ratelimit.write_behind.fallbacks'),
      };
    }
  }

  /** Keys currently decided locally. */
  get size(): number {
    return this.entries.size;
  }

  /** Accounted bytes of the keys decided locally (bounded by CACHE_WRITE_BEHIND_MAX_BYTES). */
  get accountedBytes(): number {
    return this.bytes;
  }

  /** True while every op is counted synchronously (after a failed or slow flush). */
  get isSynchronous(): boolean {
    return this.synchronous;
  }

  increment(ops: readonly CounterOp[]): Promise<number[]> {
    return this.incrementEach(ops).then((results) => {
      for (let i = 0; i < results.length; i++) if (results[i] instanceof Error) throw results[i];
      return results as number[];
    });
  }

  incrementEach(ops: readonly CounterOp[]): Promise<(number | Error)[]> {
    const n = ops.length;
    const out = new Array<number | Error>(n);
    let syncIdx: number[] | undefined;
    const bypass = this.synchronous || this.closed;
    const now = this.nowMs();
    for (let i = 0; i < n; i++) {
      const op = ops[i];
      const e = bypass || op.perSecond ? undefined : this.entries.get(op.key);
      if (e === undefined || op.hits < 0) {
        (syncIdx ??= []).push(i);
        continue;
      }
      if (op.hits > 0) {
        e.pending += op.hits;
        if (!e.queued) this.enqueue(e);
      }
      if (op.expireSeconds > e.expireSeconds) e.expireSeconds = op.expireSeconds;
      e.lastHitMs = now;
      out[i] = e.known + e.inflight + e.pending;
    }
    if (syncIdx === undefined) {
      this.counters.local += n;
      return Promise.resolve(out);
    }
    this.counters.local += n - syncIdx.length;
    this.counters.synchronous += syncIdx.length;
    return this.countSynchronously(ops, syncIdx, out);
  }

  /** Counts ops[idx] in the inner store; each successful count becomes (or refreshes) the key's entry. */
  private async countSynchronously(
    ops: readonly CounterOp[],
    idx: readonly number[],
    out: (number | Error)[],
  ): Promise<(number | Error)[]> {
    let sent = idx.length === ops.length ? ops : idx.map((i) => ops[i]);
    // Refunds take back this pod's unsent hits of their key first; a refund fully taken is answered here.
    let local: number[] | undefined;
    for (let j = 0; j < sent.length; j++) {
      const op = sent[j];
      if (op.hits >= 0) continue;
      const e = this.entries.get(op.key);
      if (e === undefined || e.pending === 0) continue;
      const taken = Math.min(e.pending, -op.hits);
      e.pending -= taken;
      if (sent === ops) sent = ops.slice();
      (sent as CounterOp[])[j] = { ...op, hits: op.hits + taken };
      if (op.hits + taken === 0) (local ??= []).push(j);
    }
    const results = await this.innerEach(sent);
    if (local !== undefined)
      for (const j of local) if (results[j] instanceof Error) results[j] = this.estimate(sent[j]);
    let answered = false;
    for (let j = 0; j < idx.length; j++) {
      const r = results[j];
      const op = sent[j];
      if (r instanceof Error) {
        out[idx[j]] = r;
        continue;
      }
      answered = true;
      out[idx[j]] = this.learn(op, r);
    }
    if (answered && this.synchronous && this.flushing === undefined) this.synchronous = false;
    return out;
  }

  /**
   * evaluate, forwarded, with the refunds of fixed-window keys decided here (buildFixedWindowRefund's
   * one-limit checks) netted against their unsent hits first; the remaining they report then counts
   * those hits still waiting here.
   */
  private async evaluateWithRefunds(checks: readonly LimitCheck[]): Promise<LimitVerdict[]> {
    let sent = checks;
    let touched: (Entry | undefined)[] | undefined;
    for (let j = 0; j < checks.length; j++) {
      const c = checks[j]!;
      const a = c.args;
      if (a.length !== 6 || a[1]! >= 0 || a[2] !== 0 || c.keys.length !== 1) continue;
      const e = this.entries.get(c.keys[0]!);
      if (e === undefined) continue;
      (touched ??= new Array<Entry | undefined>(checks.length))[j] = e;
      const taken = Math.min(e.pending, -a[1]!);
      if (taken === 0) continue;
      e.pending -= taken;
      if (sent === checks) sent = checks.slice();
      const args = a.slice();
      args[1] = a[1]! + taken;
      (sent as LimitCheck[])[j] = { keys: c.keys, args, perSecond: c.perSecond };
    }
    const verdicts = await this.inner.evaluate!(sent);
    if (touched === undefined) return verdicts;
    for (let j = 0; j < checks.length; j++) {
      const e = touched[j];
      if (e === undefined) continue;
      const v = verdicts[j]!;
      const remaining = v[1]!;
      // Below the limit the store's count is exact: the newest known count of the key.
      if (remaining > 0) e.known = checks[j]!.args[3]! - remaining;
      v[1] = Math.max(remaining - e.inflight - e.pending, 0);
    }
    return verdicts;
  }

  /** The local estimate of an op's key (0 when it has no entry). */
  private estimate(op: CounterOp): number {
    const e = this.entries.get(op.key);
    return e === undefined ? 0 : e.known + e.inflight + e.pending;
  }

  /** Records a count the store returned; returns the count to decide with (plus hits not yet sent). */
  private learn(op: CounterOp, count: number): number {
    const e = this.entries.get(op.key);
    if (e !== undefined) {
      // After a refund the store's count is the newest known; otherwise counts only grow.
      if (count > e.known || op.hits < 0) e.known = count;
      e.lastHitMs = this.nowMs();
      // Our unsent hits are not in the store's count yet: deciding without them would under-count.
      return count + e.pending + e.inflight;
    }
    if (op.perSecond || this.closed) return count;
    const now = this.nowMs();
    // Full: sweep here too (at most once per interval), or a map full of ended windows would keep every
    // new key synchronous when no key is waiting to be flushed (the flush is the other place that sweeps).
    const size = writeBehindEntryBytes(op.key);
    if (!this.fits(size) && now - this.lastSweepMs >= this.settings.intervalMs) this.sweep();
    if (this.fits(size)) {
      this.entries.set(op.key, new Entry(op.key, op.expireSeconds, count, now));
      this.bytes += size;
    }
    return count;
  }

  private enqueue(e: Entry): void {
    e.queued = true;
    this.dirty.push(e);
    // Also while a flush is on its way: if it is still unanswered then, tick() falls back.
    if (this.timer === undefined && !this.closed) {
      this.timer = setTimeout(this.flushTick, this.settings.intervalMs);
      this.timer.unref();
    }
  }

  private tick(): void {
    this.timer = undefined;
    if (this.flushing !== undefined) {
      // The last flush has not answered in a whole interval: stop deciding on counts that old.
      this.fallBack();
      return;
    }
    void this.flush();
  }

  /** Sends every pending hit now (one INCRBY + EXPIRE per key) and waits for the answers. */
  async flush(): Promise<void> {
    if (this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    while (this.flushing !== undefined) await this.flushing;
    this.sweep();
    const batch = this.dirty;
    if (batch.length === 0) return;
    this.dirty = [];
    const ops: CounterOp[] = [];
    const sentEntries: Entry[] = [];
    for (let j = 0; j < batch.length; j++) {
      const e = batch[j];
      e.queued = false;
      if (e.pending === 0) continue;
      e.inflight = e.pending;
      e.pending = 0;
      ops.push({ key: e.key, hits: e.inflight, expireSeconds: e.expireSeconds, perSecond: false });
      sentEntries.push(e);
    }
    if (ops.length === 0) return;
    this.counters.flushes++;
    this.counters.flushedKeys += ops.length;
    this.stats?.flushedKeys.inc(ops.length);
    const done = this.innerEach(ops).then((results) => this.settle(sentEntries, results));
    this.flushing = done;
    try {
      await done;
    } finally {
      this.flushing = undefined;
      if (this.dirty.length > 0 && this.timer === undefined && !this.closed) {
        this.timer = setTimeout(this.flushTick, this.settings.intervalMs);
        this.timer.unref();
      }
    }
  }

  private settle(sent: readonly Entry[], results: readonly (number | Error)[]): void {
    let failed = false;
    for (let j = 0; j < sent.length; j++) {
      const e = sent[j];
      const r = results[j];
      if (typeof r === 'number') {
        this.counters.flushedHits += e.inflight;
        if (r > e.known) e.known = r;
        e.inflight = 0;
        continue;
      }
      failed = true;
      // Its hits since the last good answer are lost; its next hit is counted synchronously.
      const lost = e.inflight + e.pending;
      this.counters.droppedHits += lost;
      this.stats?.droppedHits.inc(lost);
      e.inflight = 0;
      e.pending = 0;
      if (this.entries.get(e.key) === e) this.drop(e);
    }
    if (failed) this.fallBack();
    else if (this.synchronous) this.synchronous = false;
  }

  private fallBack(): void {
    if (!this.synchronous) {
      this.counters.fallbacks++;
      this.stats?.fallbacks.inc();
    }
    this.synchronous = true;
  }

  /** Drops the entries idle for idleMs: their windows may have ended, and memory stays bounded. */
  private sweep(): void {
    this.lastSweepMs = this.nowMs();
    const before = this.lastSweepMs - this.idleMs;
    for (const e of this.entries.values()) {
      if (e.lastHitMs < before && e.pending === 0 && e.inflight === 0) this.drop(e);
    }
  }

  private fits(bytes: number): boolean {
    return this.entries.size < this.settings.maxKeys && this.bytes + bytes <= this.settings.maxBytes;
  }

  private drop(e: Entry): void {
    this.entries.delete(e.key);
    this.bytes -= e.bytes;
  }

  /** Never rejects: a call that fails as a whole fails each of its ops. */
  private async innerEach(ops: readonly CounterOp[]): Promise<(number | Error)[]> {
    try {
      if (this.inner.incrementEach) return await this.inner.incrementEach(ops);
      return await this.inner.increment(ops);
    } catch (err) {
      const e = err instanceof Error ? err : new Error(String(err));
      return ops.map(() => e);
    }
  }

  /** Current counts: the local estimate for keys decided here, the store's count plus unsent hits otherwise. */
  async get(ops: readonly CounterOp[]): Promise<number[]> {
    if (!this.synchronous) {
      const local = new Array<number>(ops.length);
      let all = true;
      for (let i = 0; i < ops.length; i++) {
        const e = ops[i].perSecond ? undefined : this.entries.get(ops[i].key);
        if (e === undefined) {
          all = false;
          break;
        }
        local[i] = e.known + e.inflight + e.pending;
      }
      if (all) return local;
    }
    const counts = await this.inner.get(ops);
    for (let i = 0; i < ops.length; i++) {
      const e = this.entries.get(ops[i].key);
      if (e !== undefined) counts[i] += e.pending + e.inflight;
    }
    return counts;
  }

  start(): Promise<void> {
    return this.inner.start?.() ?? Promise.resolve();
  }

  isHealthy(): boolean {
    return this.inner.isHealthy();
  }

  /** Sends the hits still pending, then closes the inner store. */
  async close(): Promise<void> {
    this.closed = true;
    try {
      await this.flush();
    } finally {
      await this.inner.close();
    }
  }
}
