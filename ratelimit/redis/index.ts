export * from './redis-store.js';
export * from './redis-deployment.js';
export * from './client-options.js';
export * from './cluster-slot.js';
