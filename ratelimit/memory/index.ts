// Public face of memory/: the in-process backend (BACKEND_TYPE=memory) behind the counter-store
// contract, for one process (local runs and tests).
export * from './memory-store.js';
