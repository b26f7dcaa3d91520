// Public face of redis/: the Redis backend behind the counter-store contract. RedisCounterStore sends
// each batch to its deployment (single, sentinel or cluster; REDIS_* and the optional per-second
// REDIS_PERSECOND_*), with the client options, the cluster slot of a key, and the limit script.
export * from './redis-store.js';
export * from './redis-deployment.js';
export * from './client-options.js';
export * from './cluster-slot.js';
