// The same least answer as node-http2.mjs on the HTTP/2 layer of our own (h2grpc/h2/, the
// compiled one in dist/: run `npm run build` first). Started by h2-gc-floor.ts.
import net from 'node:net';
import { H2Session } from '../../../dist/h2grpc/h2/session.js';

const BODY = Buffer.from([0, 0, 0, 0, 2, 0x08, 0x01]);
const HEADERS = Object.freeze({ ':status': 200, 'content-type': 'application/grpc' });
const TRAILERS = Object.freeze({ 'grpc-status': '0' });
const WAIT_FOR_TRAILERS = { waitForTrailers: true };
const OPTIONS = { maxConcurrentStreams: 1000, maxSessionMemory: 64 << 20, maxHeaderListSize: 65536 };

function sendTrailers() {
  this.sendTrailers(TRAILERS);
}
function ignore() {}
function answer() {
  this.respond(HEADERS, WAIT_FOR_TRAILERS);
  this.end(BODY);
}

const server = net.createServer((socket) => {
  socket.setNoDelay(true);
  const session = new H2Session(socket, OPTIONS);
  session.on('error', ignore);
  session.on('stream', (stream) => {
    stream.on('data', ignore);
    stream.on('wantTrailers', sendTrailers);
    stream.on('end', answer);
  });
});
server.listen(Number(process.env.PORT), '127.0.0.1');
