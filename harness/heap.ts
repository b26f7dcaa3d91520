// For the tests that bound a table in bytes: how much the heap grows while filling it, and keys shaped as
// decoded request values are (flat strings; a concatenation would share its parts as a rope and hide
// their cost).
import v8 from 'node:v8';
import vm from 'node:vm';

/** A flat copy of `k`, as a value decoded from a request is. */
export function flatKey(k: string): string {
  return Buffer.from(k, 'latin1').toString('latin1');
}

/** Heap bytes still in use after `fill` (garbage collected before and after). */
export async function heapGrowth(fill: () => void | Promise<void>): Promise<number> {
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc') as () => void;
  gc();
  const before = process.memoryUsage().heapUsed;
  await fill();
  gc();
  return process.memoryUsage().heapUsed - before;
}
