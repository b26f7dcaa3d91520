// Public face of control-plane/config-set/ (a second entry of control-plane/, without the ADS server
// and @grpc/grpc-js): config files and RateLimitConfig manifests read with their positions, checked as
// the service and the operator check them, and their problems printed one way. `ratelimit-config` and
// `ratelimit-control-plane --check` both use it.
export * from './config-set.js';
export * from './sources.js';
export * from './problems.js';
