// Public face of proto/: our own definitions and the loader that joins them with the shipped Envoy protos.
// ratelimit-config.ts is the light entry (no grpc-js) for the configuration model and its parse worker.
export * from './loader.js';
export * from './rls.js';
export * from './rlqs.js';
export * from './xds.js';
export * from './rls-codec.js';
export * from './ratelimit-config.js';
export * from './request-bounds.js';
