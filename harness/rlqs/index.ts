// The RLQS client side of the harness: Envoy's rate_limit_quota filter emulated, the static-quota baseline
// server, service "pods" and the fleet measurement (see docs/test-harness.md).
export * from './envoy.js';
export * from './fleet.js';
export * from './pods.js';
export * from './static-server.js';
export * from './wire.js';
