// Public face of control-plane/: the snapshot cache, the ADS server (state of the world and incremental) and its per-stream state, its
// metrics and the standalone directory source.
export * from './cache.js';
export * from './server.js';
export * from './stream-state.js';
export * from './metrics.js';
export * from './resources.js';
export * from './file-source.js';
