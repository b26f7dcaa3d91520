export * from './health.js';
export * from './grpc-server.js';
export * from './http-server.js';
export * from './debug-server.js';
export * from './json.js';
export { frameMessage } from '../../h2grpc/index.js';
