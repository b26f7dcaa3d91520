// Public face of limiter/: the decision for one request's descriptors. Limiter builds each descriptor's
// cache key (cache-key.ts), answers keys already over limit from the local over-limit cache
// (local-cache.ts), counts in the counter store (counting/), turns counts and verdicts into statuses,
// and applies the failure mode when the store cannot answer (failure-mode.ts).
export * from './cache-key.js';
export * from './local-cache.js';
export * from './limiter.js';
export * from './failure-mode.js';
