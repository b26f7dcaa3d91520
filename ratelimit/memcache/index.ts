export * from './memcache-store.js';
export * from './memcache-client.js';
export * from './srv.js';
