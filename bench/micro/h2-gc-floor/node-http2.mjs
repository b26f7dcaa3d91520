// The least a node:http2 server does for a unary gRPC call: read the request, answer one message and
// grpc-status 0. Started by h2-gc-floor.ts; plain JavaScript so that no loader adds to its heap.
import http2 from 'node:http2';

const BODY = Buffer.from([0, 0, 0, 0, 2, 0x08, 0x01]);
const HEADERS = { ':status': 200, 'content-type': 'application/grpc' };
const TRAILERS = { 'grpc-status': '0' };
const WAIT_FOR_TRAILERS = { waitForTrailers: true };

function sendTrailers() {
  this.sendTrailers(TRAILERS);
}
function ignore() {}
function answer() {
  this.respond(HEADERS, WAIT_FOR_TRAILERS);
  this.end(BODY);
}

const server = http2.createServer();
server.on('stream', (stream) => {
  stream.on('error', ignore);
  stream.on('data', ignore);
  stream.on('wantTrailers', sendTrailers);
  stream.on('end', answer);
});
server.listen(Number(process.env.PORT), '127.0.0.1');
