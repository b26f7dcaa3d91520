// The open streams of one connection, found by id. Not a Map: a connection's open streams come and go
// a few at a time, and a Map reallocates its table each time it shrinks and grows back, a table the
// long-lived Map holds across young-generation GCs (docs/decisions/007-hot-path-shapes.md). Here
// the slots only ever grow (to the most streams open at once, bounded by the stream limit), and a lookup
// scans them from the newest: a connection has a few open, at most SETTINGS_MAX_CONCURRENT_STREAMS.
import type { H2Stream } from './stream.js';

export class StreamTable {
  private slots: (H2Stream | undefined)[] = new Array<H2Stream | undefined>(8).fill(undefined);
  private count = 0;

  get size(): number {
    return this.count;
  }

  get(id: number): H2Stream | undefined {
    const slots = this.slots;
    for (let i = this.count - 1; i >= 0; i--) if (slots[i]!.id === id) return slots[i];
    return undefined;
  }

  add(s: H2Stream): void {
    if (this.count === this.slots.length) {
      const grown = new Array<H2Stream | undefined>(this.slots.length * 2).fill(undefined);
      for (let i = 0; i < this.count; i++) grown[i] = this.slots[i];
      this.slots = grown;
    }
    this.slots[this.count++] = s;
  }

  delete(s: H2Stream): void {
    const slots = this.slots;
    for (let i = this.count - 1; i >= 0; i--) {
      if (slots[i] !== s) continue;
      this.count--;
      slots[i] = slots[this.count];
      slots[this.count] = undefined;
      return;
    }
  }

  /** A copy of the open streams (callers close streams while they go through them). */
  list(): H2Stream[] {
    return this.slots.slice(0, this.count) as H2Stream[];
  }
}
