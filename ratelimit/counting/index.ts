// Public face of counting: everything between the limiter and a backend. The CounterStore contract
// (store.ts) and the layers that wrap a backend in it: circuit breaker, coalescing (with the check
// batcher) and write-behind. The order they are stacked in is written once, in counter-stack.ts.
export * from './store.js';
export * from './algorithms.js';
export * from './key-bytes.js';
export * from './turn.js';
export * from './coalescing.js';
export * from './write-behind.js';
export * from './circuit-breaker.js';
