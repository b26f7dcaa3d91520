// One gRPC call over node:http2 whose message is already compressed (flag 1, grpc-encoding set): grpc-js
// compresses only what it serializes itself, and the request-bound tests and the attack benchmark send
// prepared bombs. And the frame of a text message, for tests that speak node:http2 to the gRPC server.
import * as http2 from 'node:http2';
import { SHOULD_RATE_LIMIT_PATH } from '../proto/index.js';

/** A gRPC message frame holding `text` (UTF-8): flag 0, big-endian length, the bytes. */
export function textFrame(text: string): Buffer {
  const msg = Buffer.from(text);
  const out = Buffer.alloc(5 + msg.length);
  out.writeUInt32BE(msg.length, 1);
  msg.copy(out, 5);
  return out;
}

/** The call's grpc-status (-1 when none came), its decoded grpc-message and the response body. */
export interface RawAnswer {
  code: number;
  details: string;
  body: Buffer;
}

export function compressedCall(
  address: string,
  encoding: 'gzip' | 'deflate',
  compressed: Buffer,
): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(`http://${address}`);
    session.on('error', reject);
    const req = session.request({
      ':method': 'POST',
      ':path': SHOULD_RATE_LIMIT_PATH,
      'content-type': 'application/grpc',
      'grpc-encoding': encoding,
      te: 'trailers',
    });
    let headers: http2.IncomingHttpHeaders = {};
    req.on('response', (h) => (headers = h));
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('trailers', (tr) => (headers = { ...headers, ...tr }));
    req.on('error', reject);
    req.on('close', () => {
      session.close();
      resolve({
        code: Number(headers['grpc-status'] ?? -1),
        details: decodeURIComponent(String(headers['grpc-message'] ?? '')),
        body: Buffer.concat(chunks),
      });
    });
    const prefix = Buffer.alloc(5);
    prefix[0] = 1;
    prefix.writeUInt32BE(compressed.length, 1);
    req.end(Buffer.concat([prefix, compressed]));
  });
}
