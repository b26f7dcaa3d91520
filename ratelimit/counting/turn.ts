// When the batcher's turn flush goes (coalescing.ts, without a pipeline window): with none of its store
// calls in flight, at the end of the current callback (process.nextTick), so a lone call does not wait
// for the rest of the turn (a wait that shows in p99, docs/decisions/007-hot-path-shapes.md); with one in
// flight, at the end of the turn (setImmediate), so the turn's calls leave together, which is where
// batching pays.
export function scheduleTurnFlush(flush: () => void, inFlight: number): void {
  if (inFlight === 0) process.nextTick(flush);
  else setImmediate(flush);
}
