export * from './settings.js';
export * from './env.js';
