// The local over-limit cache (the reference's freecache, LOCAL_CACHE_SIZE_IN_BYTES): keys known to be
// over limit for the rest of their window are answered without a round trip to the store.
//
// Hand-written because no npm cache keeps string keys outside the JS heap: a Map<string, number>
// costs ~100 heap bytes per key (entry, string, heap-number expiry) plus the garbage collector's
// headroom on top, and its byte budget can only be estimated. Here the whole budget is two typed
// arrays allocated once, so memory is bounded by construction and the GC never traces the keys:
//   - an index: open addressing (linear probing, backward-shift deletion) over 32-bit key hashes,
//     8 bytes per slot (entry word offset + 1, hash), at most 3/4 full;
//   - an arena: a ring buffer of entries in insertion order, each a 12-byte header (key length and
//     flags, hash, expiry in Unix seconds) and the key's UTF-8 bytes, padded to 4 bytes. A new entry
//     evicts the oldest ones until it fits (FIFO, as the Map version did).
// A hit compares the full key, so two keys with the same hash never answer for each other: a false
// hit would deny a request wrongly. Expiry is kept in whole seconds, rounded down, so an entry can
// only end early (one more store round trip), never outlive the TTL it was given.

/** Index bytes per slot: [entry word offset + 1 (0 = empty), hash]. */
const SLOT_BYTES = 8;
/** Budget bytes per index slot: the index takes 1/20 to 1/10 of the budget (power-of-two slots). */
const BYTES_PER_SLOT = 80;
const HEADER_BYTES = 12;
/** Header word 0: key byte length in the low 24 bits, flags above. */
const LEN_MASK = 0x00ff_ffff;
const LIVE = 1 << 31;
const ASCII = 1 << 30;
const PAD = 1 << 29; // the rest of the arena up to its end is unused (the next entry did not fit)
const MAX_KEY_BYTES = LEN_MASK;
const MAX_EXPIRY_SECONDS = 0xffff_ffff;
/** Largest arena: entry word offsets stay below 2^29 (int32 arithmetic); a larger budget is capped. */
const MAX_ARENA_BYTES = 2 ** 31 - 4;
const MAX_SLOTS = 2 ** 25;

const utf8 = new TextEncoder();
const utf8Decoder = new TextDecoder();

export class LocalOverLimitCache {
  /** Budget actually allocated (index + arena), never above maxBytes. */
  readonly allocatedBytes: number;
  private readonly slots: Int32Array;
  private readonly mask: number;
  private readonly maxEntries: number;
  private readonly arenaBytes: number;
  private readonly bytes: Uint8Array;
  private readonly words: Uint32Array;
  private head = 0; // byte offset where the next entry goes
  private tail = 0; // byte offset of the oldest entry (or padding)
  private used = 0; // arena bytes between tail and head, padding and dead entries included
  private count = 0; // live entries

  constructor(
    readonly maxBytes: number,
    private readonly nowMs: () => number = Date.now,
  ) {
    let slotCount = 4;
    while (slotCount < MAX_SLOTS && slotCount * 2 * BYTES_PER_SLOT <= maxBytes) slotCount *= 2;
    const arena = Math.min(Math.floor((maxBytes - slotCount * SLOT_BYTES) / 4) * 4, MAX_ARENA_BYTES);
    if (arena < HEADER_BYTES + 4) {
      // Too small to hold anything: a cache that never remembers (every key goes to the store).
      slotCount = 0;
    }
    this.mask = slotCount - 1;
    this.maxEntries = Math.floor((slotCount * 3) / 4);
    this.arenaBytes = slotCount === 0 ? 0 : arena;
    // Zero-filled on allocation; pages become resident only when written.
    this.slots = new Int32Array(slotCount * 2);
    const buffer = new ArrayBuffer(this.arenaBytes);
    this.bytes = new Uint8Array(buffer);
    this.words = new Uint32Array(buffer);
    this.allocatedBytes = this.slots.byteLength + this.arenaBytes;
  }

  /** Live entries (an expired entry counts until a lookup or an eviction meets it). */
  get size(): number {
    return this.count;
  }

  /** Budget bytes in use: the index and the arena bytes between the oldest and newest entry. */
  get approximateBytes(): number {
    return this.slots.byteLength + this.used;
  }

  has(key: string): boolean {
    if (this.count === 0) return false;
    const h = overLimitKeyHash(key);
    const slots = this.slots;
    const mask = this.mask;
    for (let i = h & mask; ; i = (i + 1) & mask) {
      const ref = slots[i * 2];
      if (ref === 0) return false;
      if (slots[i * 2 + 1] === h && this.keyEquals(ref - 1, key)) {
        if (this.words[ref + 1] * 1000 > this.nowMs()) return true;
        this.removeSlot(i);
        this.words[ref - 1] &= ~LIVE;
        this.count--;
        return false;
      }
    }
  }

  /** Forgets `key` (a refund brought it back under its limit); nothing when it is not cached. */
  delete(key: string): void {
    const i = this.findSlot(key, overLimitKeyHash(key));
    if (i >= 0) this.removeEntry(i);
  }

  /** Remembers `key` as over limit for `ttlSeconds` (as the newest entry; an existing one is replaced). */
  set(key: string, ttlSeconds: number): void {
    if (this.arenaBytes === 0) return;
    const h = overLimitKeyHash(key);
    const existing = this.findSlot(key, h);
    if (existing >= 0) this.removeEntry(existing);
    const ascii = isAscii(key);
    // A lone surrogate has no UTF-8 form that decodes back to the same key: such keys are not cached.
    if (!ascii && !isWellFormed(key)) return;
    const keyBytes = ascii ? key.length : utf8.encode(key).length;
    const size = HEADER_BYTES + ((keyBytes + 3) & ~3);
    if (keyBytes > MAX_KEY_BYTES || size > this.arenaBytes) return; // can never fit: not cached
    while (this.count >= this.maxEntries) this.evictOldest();
    const at = this.reserve(size);
    const w = at >>> 2;
    const words = this.words;
    words[w] = keyBytes | LIVE | (ascii ? ASCII : 0);
    words[w + 1] = h;
    words[w + 2] = Math.min(Math.floor((this.nowMs() + ttlSeconds * 1000) / 1000), MAX_EXPIRY_SECONDS);
    const bytes = this.bytes;
    const start = at + HEADER_BYTES;
    if (ascii) {
      for (let i = 0; i < keyBytes; i++) bytes[start + i] = key.charCodeAt(i);
    } else {
      utf8.encodeInto(key, bytes.subarray(start, start + keyBytes));
    }
    this.insertSlot(h, w + 1);
    this.count++;
  }

  private keyEquals(w: number, key: string): boolean {
    const header = this.words[w];
    const len = header & LEN_MASK;
    const start = w * 4 + HEADER_BYTES;
    if ((header & ASCII) === 0) {
      return len >= key.length && utf8Decoder.decode(this.bytes.subarray(start, start + len)) === key;
    }
    if (len !== key.length) return false;
    const bytes = this.bytes;
    for (let i = 0; i < len; i++) if (bytes[start + i] !== key.charCodeAt(i)) return false;
    return true;
  }

  /** The slot of `key`'s entry, or -1. */
  private findSlot(key: string, h: number): number {
    if (this.count === 0) return -1;
    const slots = this.slots;
    for (let i = h & this.mask; ; i = (i + 1) & this.mask) {
      const ref = slots[i * 2];
      if (ref === 0) return -1;
      if (slots[i * 2 + 1] === h && this.keyEquals(ref - 1, key)) return i;
    }
  }

  private insertSlot(h: number, ref: number): void {
    const slots = this.slots;
    let i = h & this.mask;
    while (slots[i * 2] !== 0) i = (i + 1) & this.mask;
    slots[i * 2] = ref;
    slots[i * 2 + 1] = h;
  }

  /** Drops the entry of slot i from the index and marks it dead in the arena. */
  private removeEntry(i: number): void {
    this.words[this.slots[i * 2] - 1] &= ~LIVE;
    this.removeSlot(i);
    this.count--;
  }

  /** Backward-shift deletion: later slots of the same probe run move up, so no tombstones. */
  private removeSlot(i: number): void {
    const slots = this.slots;
    const mask = this.mask;
    let hole = i;
    for (let j = (i + 1) & mask; slots[j * 2] !== 0; j = (j + 1) & mask) {
      const home = slots[j * 2 + 1] & mask;
      // j's entry may move into the hole when its home is not in the cyclic range (hole, j].
      const inRange = hole <= j ? home > hole && home <= j : home > hole || home <= j;
      if (!inRange) {
        slots[hole * 2] = slots[j * 2];
        slots[hole * 2 + 1] = slots[j * 2 + 1];
        hole = j;
      }
    }
    slots[hole * 2] = 0;
    slots[hole * 2 + 1] = 0;
  }

  /** A contiguous run of `size` free arena bytes at head (evicting the oldest entries), its offset. */
  private reserve(size: number): number {
    const end = this.arenaBytes;
    for (;;) {
      if (this.used === 0) this.head = this.tail = 0;
      if (this.head > this.tail || this.used === 0) {
        // Free: [head, end) and [0, tail).
        if (this.head + size <= end) break;
        this.words[this.head >>> 2] = PAD;
        this.used += end - this.head;
        this.head = 0;
      } else if (this.head + size <= this.tail) {
        break; // free: [head, tail)
      } else {
        this.evictOldest();
      }
    }
    const at = this.head;
    this.head += size;
    this.used += size;
    if (this.head === end) this.head = 0;
    return at;
  }

  /** Drops the oldest arena entry (or padding), reclaiming its bytes. */
  private evictOldest(): void {
    const w = this.tail >>> 2;
    const header = this.words[w];
    if ((header & PAD) !== 0) {
      this.used -= this.arenaBytes - this.tail;
      this.tail = 0;
      return;
    }
    if ((header & LIVE) !== 0) {
      const slots = this.slots;
      const ref = w + 1;
      let i = this.words[w + 1] & this.mask;
      while (slots[i * 2] !== ref) i = (i + 1) & this.mask;
      this.removeSlot(i);
      this.count--;
    }
    const size = HEADER_BYTES + (((header & LEN_MASK) + 3) & ~3);
    this.used -= size;
    this.tail += size;
    if (this.tail === this.arenaBytes) this.tail = 0;
  }
}

/**
 * FNV-1a over the UTF-16 code units, then murmur3's finaliser (the index masks the low bits).
 * Exported for the tests, which look for two keys with the same hash.
 */
export function overLimitKeyHash(key: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return h ^ (h >>> 16);
}

function isWellFormed(key: string): boolean {
  for (let i = 0; i < key.length; i++) {
    const c = key.charCodeAt(i);
    if (c < 0xd800 || c > 0xdfff) continue;
    if (c > 0xdbff || i + 1 >= key.length) return false;
    const d = key.charCodeAt(++i);
    if (d < 0xdc00 || d > 0xdfff) return false;
  }
  return true;
}

function isAscii(key: string): boolean {
  for (let i = 0; i < key.length; i++) if (key.charCodeAt(i) > 0x7f) return false;
  return true;
}
