// Reads what loop-probe-preload.mjs (loaded into our service by the harness) wrote.
/** The longest main-thread stall (ms) the probe saw between two epoch times. */
export function longestStall(text: string, fromMs: number, toMs: number): number {
  let max = 0;
  for (const line of text.split('\n')) {
    const [t, v] = line.split(' ').map(Number);
    // A window's line is written at its end: it covers [t - 100, t].
    if (t >= fromMs && t - 100 <= toMs && v > max) max = v;
  }
  return max;
}
