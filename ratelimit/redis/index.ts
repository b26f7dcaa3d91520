// Public face of redis/: the Redis backend behind the counter-store contract. It only sends the batches
// the batcher (counting/coalescing.ts) gives it: RedisCounterStore names the shards and hands each batch
// to its deployment (single, sentinel or cluster; REDIS_* and the optional per-second REDIS_PERSECOND_*),
// which sends it on one path per transport: the direct RESP connection (direct-counter.ts) where it
// applies, ioredis otherwise (per-master pipelines on a cluster). REDIS_PIPELINE_WINDOW/LIMIT and
// COALESCE_INCREMENTS are the batcher's flush (counter-stack.ts maps them), not sent here.
export * from './redis-store.js';
export * from './redis-deployment.js';
export * from './client-options.js';
export * from './cluster-slot.js';
