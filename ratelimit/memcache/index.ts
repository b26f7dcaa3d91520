// Public face of memcache/: the memcache backend (BACKEND_TYPE=memcache) behind the counter-store
// contract, its client (the reference's node selection and wire format) and SRV discovery of its nodes.
export * from './memcache-store.js';
export * from './memcache-client.js';
export * from './srv.js';
