// Redis Cluster hash slots (CRC16/XMODEM of the key, or of its {hash tag}), so the counters of one
// slot can share a pipeline: ioredis refuses a cluster pipeline whose keys live on different nodes.

const TABLE = (() => {
  const t = new Uint16Array(256);
  for (let i = 0; i < 256; i++) {
    let c = i << 8;
    for (let j = 0; j < 8; j++) c = c & 0x8000 ? ((c << 1) ^ 0x1021) & 0xffff : (c << 1) & 0xffff;
    t[i] = c;
  }
  return t;
})();

function crc16(b: Uint8Array, from: number, to: number): number {
  let crc = 0;
  for (let i = from; i < to; i++) crc = ((crc << 8) & 0xffff) ^ TABLE[((crc >> 8) ^ b[i]) & 0xff];
  return crc;
}

/** The same over a string's UTF-16 code units, for a string that is all ASCII (each unit its byte). */
function crc16Ascii(s: string, from: number, to: number): number {
  let crc = 0;
  for (let i = from; i < to; i++) crc = ((crc << 8) & 0xffff) ^ TABLE[((crc >> 8) ^ s.charCodeAt(i)) & 0xff];
  return crc;
}

/** The hash slot (0..16383) Redis Cluster assigns to a key given as its bytes. */
export function clusterSlotOfBytes(b: Uint8Array): number {
  const open = b.indexOf(0x7b); // {
  if (open >= 0) {
    const close = b.indexOf(0x7d, open + 1); // }
    if (close > open + 1) return crc16(b, open + 1, close) % 16384;
  }
  return crc16(b, 0, b.length) % 16384;
}

/**
 * The hash slot (0..16383) Redis Cluster assigns to a key (its UTF-8 bytes). Asked per counter on every
 * decision: an ASCII key is hashed from the string, without encoding it.
 */
export function clusterSlot(key: string): number {
  for (let i = 0; i < key.length; i++) {
    if (key.charCodeAt(i) > 0x7f) return clusterSlotOfBytes(Buffer.from(key));
  }
  const open = key.indexOf('{');
  if (open >= 0) {
    const close = key.indexOf('}', open + 1);
    if (close > open + 1) return crc16Ascii(key, open + 1, close) % 16384;
  }
  return crc16Ascii(key, 0, key.length) % 16384;
}
