// The frames of a raw HTTP/2 byte stream, for tests that speak HTTP/2 by hand on a socket (the HTTP/2
// layer's bounds from a raw client, HPACK against nghttp2 from a raw server): one splitter for both.
export interface RawFrame {
  type: number;
  flags: number;
  stream: number;
  payload: Buffer;
}

/**
 * A socket 'data' handler that cuts the bytes into frames and calls `onFrame` for each, in order;
 * `afterPreface`: the stream starts with the 24-byte client connection preface, which is skipped.
 */
export function frameSplitter(onFrame: (f: RawFrame) => void, afterPreface = false): (chunk: Buffer) => void {
  let pending = Buffer.alloc(0);
  let prefaceLeft = afterPreface ? 24 : 0;
  return (chunk) => {
    pending = Buffer.concat([pending, chunk]);
    if (prefaceLeft > 0) {
      const n = Math.min(prefaceLeft, pending.length);
      pending = pending.subarray(n);
      prefaceLeft -= n;
    }
    while (pending.length >= 9) {
      const length = pending.readUIntBE(0, 3);
      if (pending.length < 9 + length) break;
      const f: RawFrame = {
        type: pending[3]!,
        flags: pending[4]!,
        stream: pending.readUInt32BE(5) & 0x7fffffff,
        payload: pending.subarray(9, 9 + length),
      };
      pending = pending.subarray(9 + length);
      onFrame(f);
    }
  };
}
