// gRPC message framing: the 5-byte prefix (flag, big-endian length) written and read, and compressed
// messages inflated off the event loop with a running cap on their size.
import { createGunzip, createInflate, type Gunzip, type Inflate } from 'node:zlib';
import { GrpcStatusError, Status } from './status.js';

/** A gRPC message frame: flag 0, big-endian length, the bytes. */
export function frameMessage(msg: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(5 + msg.length);
  out[0] = 0;
  out.writeUInt32BE(msg.length, 1);
  out.set(msg, 5);
  return out;
}

/**
 * The one message of a unary request body: its 5-byte prefix checked; the message bytes, still
 * compressed when the flag (body[0]) is 1.
 */
export function unframe(body: Buffer, encoding: string | undefined, max: number): Buffer {
  if (body.length < 5) {
    throw new GrpcStatusError(
      Status.INTERNAL,
      body.length === 0 ? 'request has no message' : 'truncated message prefix',
    );
  }
  const flag = body[0];
  const len = body.readUInt32BE(1);
  if (len > max)
    throw new GrpcStatusError(
      Status.RESOURCE_EXHAUSTED,
      `received message larger than max (${len} vs. ${max}: GRPC_MAX_RECV_MSG_SIZE)`,
    );
  if (body.length < 5 + len) throw new GrpcStatusError(Status.INTERNAL, 'truncated message');
  if (body.length > 5 + len)
    throw new GrpcStatusError(Status.UNIMPLEMENTED, 'more than one request message in a unary call');
  if (flag !== 0 && flag !== 1) throw new GrpcStatusError(Status.INTERNAL, `invalid message flag ${flag}`);
  if (flag === 1 && encoding !== 'gzip' && encoding !== 'deflate')
    throw new GrpcStatusError(Status.INTERNAL, 'compressed message without grpc-encoding');
  return body.subarray(5);
}

/**
 * Inflates a gzip or deflate message in zlib's thread pool, counting the output as it comes: past
 * `cap` bytes the inflater is destroyed at once (RESOURCE_EXHAUSTED naming the bound), so a small
 * compressed bomb costs at most `cap` bytes and never a full inflate.
 */
export function inflateCapped(payload: Buffer, encoding: 'gzip' | 'deflate', cap: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const z: Gunzip | Inflate = encoding === 'gzip' ? createGunzip() : createInflate();
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    z.on('data', (chunk: Buffer) => {
      if (done) return;
      size += chunk.length;
      if (size > cap) {
        done = true;
        chunks.length = 0;
        z.destroy();
        reject(
          new GrpcStatusError(
            Status.RESOURCE_EXHAUSTED,
            `decompressed message larger than max (more than ${cap} bytes: GRPC_MAX_DECOMPRESSED_MSG_SIZE)`,
          ),
        );
        return;
      }
      chunks.push(chunk);
    });
    z.on('error', (err) => {
      if (done) return;
      done = true;
      reject(new GrpcStatusError(Status.INTERNAL, `cannot decompress message: ${err.message}`));
    });
    z.on('end', () => {
      if (done) return;
      done = true;
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    });
    z.end(payload);
  });
}
