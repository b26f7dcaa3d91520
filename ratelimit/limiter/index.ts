export * from './store.js';
export * from './cache-key.js';
export * from './local-cache.js';
export * from './fixed-window.js';
export * from './coalescing-store.js';
export * from './write-behind-store.js';
export * from './algorithms.js';
export * from './failure-mode.js';
