// HTTP/2 frame facts (RFC 9113 section 6 and 11): frame types, flags, error codes, settings identifiers,
// the client connection preface, and the one function that lays a frame out in bytes.

export const FrameType = {
  DATA: 0,
  HEADERS: 1,
  PRIORITY: 2,
  RST_STREAM: 3,
  SETTINGS: 4,
  PUSH_PROMISE: 5,
  PING: 6,
  GOAWAY: 7,
  WINDOW_UPDATE: 8,
  CONTINUATION: 9,
} as const;

export const Flag = {
  END_STREAM: 0x1,
  ACK: 0x1,
  END_HEADERS: 0x4,
  PADDED: 0x8,
  PRIORITY: 0x20,
} as const;

export const ErrorCode = {
  NO_ERROR: 0,
  PROTOCOL_ERROR: 1,
  INTERNAL_ERROR: 2,
  FLOW_CONTROL_ERROR: 3,
  STREAM_CLOSED: 5,
  FRAME_SIZE_ERROR: 6,
  REFUSED_STREAM: 7,
  CANCEL: 8,
  COMPRESSION_ERROR: 9,
  ENHANCE_YOUR_CALM: 11,
} as const;

export const Setting = {
  HEADER_TABLE_SIZE: 1,
  ENABLE_PUSH: 2,
  MAX_CONCURRENT_STREAMS: 3,
  INITIAL_WINDOW_SIZE: 4,
  MAX_FRAME_SIZE: 5,
  MAX_HEADER_LIST_SIZE: 6,
} as const;

/** What every client sends first (RFC 9113 3.4). */
export const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

/** The initial flow-control window of a connection and of a stream, and the smallest max frame size. */
export const DEFAULT_WINDOW = 65_535;
export const DEFAULT_MAX_FRAME = 16_384;
export const MAX_WINDOW = 2 ** 31 - 1;

/**
 * One frame: the 9-byte header and `len` bytes of `payload` from `start` (the whole payload by default),
 * in one Buffer (small ones come from Node's shared pool).
 */
export function frame(
  type: number,
  flags: number,
  streamId: number,
  payload?: Uint8Array,
  start = 0,
  len = payload ? payload.length - start : 0,
): Buffer {
  const b = Buffer.allocUnsafe(9 + len);
  b[0] = len >>> 16;
  b[1] = (len >>> 8) & 0xff;
  b[2] = len & 0xff;
  b[3] = type;
  b[4] = flags;
  b.writeUInt32BE(streamId, 5);
  if (len > 0) b.set(payload!.subarray(start, start + len), 9);
  return b;
}

/** A frame whose payload is one 32-bit number (RST_STREAM, WINDOW_UPDATE). */
export function frameU32(type: number, streamId: number, value: number): Buffer {
  const b = Buffer.allocUnsafe(13);
  b[0] = 0;
  b[1] = 0;
  b[2] = 4;
  b[3] = type;
  b[4] = 0;
  b.writeUInt32BE(streamId, 5);
  b.writeUInt32BE(value, 9);
  return b;
}

/** GOAWAY: the last stream id the server processed, the error code, and a short debug text. */
export function goawayFrame(lastStreamId: number, code: number, debug: string): Buffer {
  const text = Buffer.from(debug.slice(0, 256), 'utf8');
  const p = Buffer.allocUnsafe(8 + text.length);
  p.writeUInt32BE(lastStreamId, 0);
  p.writeUInt32BE(code, 4);
  text.copy(p, 8);
  return frame(FrameType.GOAWAY, 0, 0, p);
}

/** SETTINGS with the given [identifier, value] pairs. */
export function settingsFrame(pairs: readonly (readonly [number, number])[]): Buffer {
  const p = Buffer.allocUnsafe(pairs.length * 6);
  pairs.forEach(([id, value], i) => {
    p.writeUInt16BE(id, i * 6);
    p.writeUInt32BE(value, i * 6 + 2);
  });
  return frame(FrameType.SETTINGS, 0, 0, p);
}
