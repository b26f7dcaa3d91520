// The same answers from HTTP/2 frames read and written in JavaScript on a net.Socket (no node:http2):
// the floor a server of our own would start from. It handles only what the load generator sends
// (preface, SETTINGS, PING, HEADERS, DATA) and does not decode header blocks. Started by h2-gc-floor.ts.
import net from 'node:net';

function frame(type, flags, id, payload) {
  const b = Buffer.allocUnsafe(9 + payload.length);
  b.writeUIntBE(payload.length, 0, 3);
  b[3] = type;
  b[4] = flags;
  b.writeUInt32BE(id, 5);
  payload.copy(b, 9);
  return b;
}
const contentType = Buffer.from('application/grpc');
// :status 200 (static index 8), content-type (name index 31) literal without indexing.
const HEADERS = Buffer.concat([Buffer.from([0x88, 0x0f, 0x10, contentType.length]), contentType]);
const status = Buffer.from('grpc-status');
const TRAILERS = Buffer.concat([Buffer.from([0x00, status.length]), status, Buffer.from([1, 0x30])]);
const BODY = Buffer.from([0, 0, 0, 0, 2, 0x08, 0x01]);
const EMPTY = Buffer.alloc(0);

const server = net.createServer((sock) => {
  sock.setNoDelay(true);
  let buf = EMPTY;
  let preface = false;
  let unacked = 0;
  sock.write(frame(4, 0, 0, EMPTY));
  sock.on('data', (chunk) => {
    buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
    let off = 0;
    if (!preface) {
      if (buf.length < 24) return;
      off = 24;
      preface = true;
    }
    const out = [];
    while (buf.length - off >= 9) {
      const len = buf.readUIntBE(off, 3);
      if (buf.length - off < 9 + len) break;
      const type = buf[off + 3];
      const flags = buf[off + 4];
      const id = buf.readUInt32BE(off + 5) & 0x7fffffff;
      if (type === 4 && !(flags & 1)) out.push(frame(4, 1, 0, EMPTY));
      else if (type === 6 && !(flags & 1)) out.push(frame(6, 1, 0, buf.subarray(off + 9, off + 9 + len)));
      else if (type === 0) {
        unacked += len;
        if (flags & 1) out.push(frame(1, 4, id, HEADERS), frame(0, 0, id, BODY), frame(1, 5, id, TRAILERS));
      }
      off += 9 + len;
    }
    if (unacked > 16384) {
      const n = Buffer.allocUnsafe(4);
      n.writeUInt32BE(unacked);
      out.push(frame(8, 0, 0, n));
      unacked = 0;
    }
    buf = buf.subarray(off);
    if (out.length) sock.write(Buffer.concat(out));
  });
  sock.on('error', () => {});
});
server.listen(Number(process.env.PORT), '127.0.0.1');
