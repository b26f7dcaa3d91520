// The local over-limit cache (the reference's freecache, LOCAL_CACHE_SIZE_IN_BYTES): keys known to be
// over limit for the rest of their window are answered without a round trip to the store.
// Memory is bounded by an approximate byte budget; the oldest entries are evicted first.

const ENTRY_OVERHEAD = 64; // approximate bytes per entry beyond the key's own characters

export class LocalOverLimitCache {
  private readonly entries = new Map<string, number>(); // key -> expiry (ms since epoch)
  private bytes = 0;

  constructor(
    readonly maxBytes: number,
    private readonly nowMs: () => number = Date.now,
  ) {}

  get size(): number {
    return this.entries.size;
  }

  get approximateBytes(): number {
    return this.bytes;
  }

  has(key: string): boolean {
    const exp = this.entries.get(key);
    if (exp === undefined) return false;
    if (exp <= this.nowMs()) {
      this.delete(key);
      return false;
    }
    return true;
  }

  set(key: string, ttlSeconds: number): void {
    const cost = key.length * 2 + ENTRY_OVERHEAD;
    if (cost > this.maxBytes) return;
    if (this.entries.has(key)) this.delete(key);
    while (this.bytes + cost > this.maxBytes && this.entries.size > 0) {
      const oldest = this.entries.keys().next().value as string;
      this.delete(oldest);
    }
    this.entries.set(key, this.nowMs() + ttlSeconds * 1000);
    this.bytes += cost;
  }

  private delete(key: string): void {
    if (this.entries.delete(key)) this.bytes -= key.length * 2 + ENTRY_OVERHEAD;
  }
}
