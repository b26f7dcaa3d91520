export * from './errors.js';
export * from './ratelimit-service.js';
export * from './struct.js';
