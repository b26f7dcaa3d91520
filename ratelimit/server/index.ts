// Public face of server/: the service's listeners: gRPC (the rate limit, health and quota services on
// h2grpc/), HTTP (/json, /healthcheck), the debug listener, and the health state they report.
export * from './health.js';
export * from './grpc-server.js';
export * from './http-server.js';
export * from './debug-server.js';
export * from './json.js';
export { frameMessage } from '../../h2grpc/index.js';
