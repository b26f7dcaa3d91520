// One gRPC call over node:http2 whose message is already compressed (flag 1, grpc-encoding set): grpc-js
// compresses only what it serializes itself, and the attack benchmark sends prepared bombs.
import * as http2 from 'node:http2';
import { SHOULD_RATE_LIMIT_PATH } from '../../proto/index.js';

/** Resolves with `OK` or `<grpc-status>: <grpc-message>`. */
export function compressedCall(
  address: string,
  encoding: 'gzip' | 'deflate',
  compressed: Buffer,
): Promise<string> {
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
    req.on('trailers', (tr) => (headers = { ...headers, ...tr }));
    req.on('data', () => undefined);
    req.on('error', reject);
    req.on('close', () => {
      session.close();
      const code = String(headers['grpc-status'] ?? '?');
      const message = decodeURIComponent(String(headers['grpc-message'] ?? ''));
      resolve(code === '0' ? 'OK' : `${code}: ${message.slice(0, 90)}`);
    });
    const prefix = Buffer.alloc(5);
    prefix[0] = 1;
    prefix.writeUInt32BE(compressed.length, 1);
    req.end(Buffer.concat([prefix, compressed]));
  });
}
