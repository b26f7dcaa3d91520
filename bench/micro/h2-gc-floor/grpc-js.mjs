// The least a @grpc/grpc-js server (on node:http2) does for a unary gRPC call: its own request and
// answer machinery around the same bytes as the other servers. Started by h2-gc-floor.ts; plain
// JavaScript so that no loader adds to its heap.
import * as grpc from '@grpc/grpc-js';

const BODY = Buffer.from([0x08, 0x01]);
const same = (b) => b;
const SERVICE = {
  ShouldRateLimit: {
    path: '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit',
    requestStream: false,
    responseStream: false,
    requestSerialize: same,
    requestDeserialize: same,
    responseSerialize: same,
    responseDeserialize: same,
  },
};

const server = new grpc.Server();
server.addService(SERVICE, { ShouldRateLimit: (_call, callback) => callback(null, BODY) });
server.bindAsync(`127.0.0.1:${process.env.PORT}`, grpc.ServerCredentials.createInsecure(), () => undefined);
