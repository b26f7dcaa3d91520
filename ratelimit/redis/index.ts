export * from './redis-store.js';
export * from './client-options.js';
