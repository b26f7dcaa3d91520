// When the calls gathered in one event-loop turn go out, for every layer that batches them (the
// coalescing store, the check batcher, the Redis script turn): with none of that layer's calls in
// flight, at the end of the current callback (process.nextTick), so a lone call does not wait for the
// rest of the turn (a wait that shows in p99, docs/decisions/007-hot-path-shapes.md); with one in flight, at the
// end of the turn (setImmediate), so the turn's calls leave together, which is where batching pays.
export function scheduleTurnFlush(flush: () => void, inFlight: number): void {
  if (inFlight === 0) process.nextTick(flush);
  else setImmediate(flush);
}
