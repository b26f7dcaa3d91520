// Public face of proto/: our own definitions and the loader that joins them with the shipped Envoy protos.
export * from './loader.js';
export * from './rls.js';
export * from './rlqs.js';
export * from './xds.js';
export * from './rls-codec.js';
export * from './units.js';
export * from './struct.js';
export * from './features.js';
export * from './request-bounds.js';
