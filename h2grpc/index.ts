// Public face of h2grpc/: a gRPC server (unary, server-streaming and bidirectional methods) on an
// HTTP/2 layer of our own, with every known attack class of HTTP/2 bounded per connection and per
// process (docs/decisions/006-http2-layer.md). It imports only node:* and common/, so it can be used
// without the rest of the project.
export { H2GrpcServer, type H2GrpcServerOptions } from './server.js';
export { DEFAULT_H2_LIMITS, type H2Limits } from './h2/limits.js';
export type {
  BidiHandler,
  BidiStreamingMethod,
  CallContext,
  CallHeaders,
  ServerStream,
  ServerStreamingMethod,
  UnaryMethod,
} from './grpc/method.js';
export { GrpcStatusError, percentEncode, Status } from './grpc/status.js';
export { frameMessage } from './grpc/framing.js';
