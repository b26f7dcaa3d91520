// A reader of the three RESP reply types that INCRBY, EXPIRE and AUTH answer with: integer (`:`), simple
// string (`+`) and error (`-`). Hand-written for the direct counting connection (direct-counter.ts): the
// general parser ioredis uses handles every type and hands each reply to a Command object, which is the
// cost this path removes. Anything else on the wire is a protocol error, never a guess.

export type ReplyHandler = (value: number | string, isError: boolean) => void;

/** Longest reply line accepted: an error message or an integer, never a value read from a key. */
const MAX_LINE_BYTES = 64 * 1024;

export class RespProtocolError extends Error {
  override name = 'RespProtocolError';
}

export class RespReplyReader {
  private rest: Buffer | undefined;

  constructor(private readonly onReply: ReplyHandler) {}

  /** Feeds one chunk from the socket; calls the handler for every complete reply, in order. */
  feed(chunk: Buffer): void {
    let buf = chunk;
    if (this.rest) {
      buf = Buffer.concat([this.rest, chunk]);
      this.rest = undefined;
    }
    let at = 0;
    const n = buf.length;
    while (at < n) {
      const type = buf[at];
      if (type === 0x3a /* : */) {
        // Integers: parsed in place; INCRBY's counts stay far below 2^53 in practice, and the limiter
        // treats the count as a number as the ioredis path does.
        let i = at + 1;
        let neg = false;
        if (buf[i] === 0x2d) {
          neg = true;
          i++;
        }
        let v = 0;
        let digits = 0;
        while (i < n && buf[i] >= 0x30 && buf[i] <= 0x39) {
          v = v * 10 + (buf[i] - 0x30);
          i++;
          digits++;
        }
        if (i + 1 >= n) break; // the line continues in the next chunk
        if (digits === 0 || buf[i] !== 0x0d || buf[i + 1] !== 0x0a) {
          throw new RespProtocolError('malformed integer reply');
        }
        at = i + 2;
        this.onReply(neg ? -v : v, false);
      } else if (type === 0x2b /* + */ || type === 0x2d /* - */) {
        const end = buf.indexOf(0x0d, at + 1);
        if (end < 0 || end + 1 >= n) break;
        if (buf[end + 1] !== 0x0a) throw new RespProtocolError('malformed reply line');
        const text = buf.toString('utf8', at + 1, end);
        at = end + 2;
        this.onReply(text, type === 0x2d);
      } else {
        throw new RespProtocolError(`unexpected reply type '${String.fromCharCode(type)}'`);
      }
    }
    if (at < n) {
      if (n - at > MAX_LINE_BYTES) throw new RespProtocolError('reply line too long');
      this.rest = buf.subarray(at);
    }
  }
}

/** `*3 $<len> <name> $<len> <key> $<len> <arg>` for one three-part command (name ASCII, key UTF-8). */
export function respCommand3(name: string, key: string, arg: number): string {
  const a = String(arg);
  return `*3\r\n$${name.length}\r\n${name}\r\n$${Buffer.byteLength(key)}\r\n${key}\r\n$${a.length}\r\n${a}\r\n`;
}

/** `AUTH [username] password`. */
export function respAuth(username: string | undefined, password: string): string {
  const parts = username ? ['AUTH', username, password] : ['AUTH', password];
  return `*${parts.length}\r\n${parts.map((p) => `$${Buffer.byteLength(p)}\r\n${p}\r\n`).join('')}`;
}
