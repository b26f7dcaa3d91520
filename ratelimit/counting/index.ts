// Public face of counting: everything between the limiter and a backend. The CounterStore contract
// (store.ts) and the layers that wrap a backend in it: write-behind, the one batcher (coalescing.ts:
// a turn's increments and checks in one flush, one batch per shard, the shard named once and handed
// down) and the circuit breaker; the backend only sends the batch it is given. The order they are
// stacked in is written once, in counter-stack.ts. Settings onto the flush: COALESCE_INCREMENTS merges
// a key's hits (off: every op sent, still per flush); REDIS_PIPELINE_WINDOW / REDIS_PIPELINE_LIMIT
// (REDIS_PERSECOND_* for SECOND-unit items) replace the end-of-turn flush by a window and a size.
export * from './store.js';
export * from './algorithms.js';
export * from './key-bytes.js';
export * from './coalescing.js';
export * from './write-behind.js';
export * from './circuit-breaker.js';
