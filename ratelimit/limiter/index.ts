export * from './cache-key.js';
export * from './local-cache.js';
export * from './limiter.js';
export * from './failure-mode.js';
