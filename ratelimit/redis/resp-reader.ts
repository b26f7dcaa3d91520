// A reader of the RESP replies that INCRBY, EXPIRE, AUTH, SCRIPT LOAD and the limit script answer with:
// integer (`:`), simple string (`+`), error (`-`), a short bulk string (`$`, the script's SHA1) and an
// array of integers (`*`, the script's verdict). Hand-written for
// the direct counting connection (direct-counter.ts): the general parser ioredis uses handles every type
// and hands each reply to a Command object, which is the cost this path removes. Anything else on the
// wire is a protocol error, never a guess. The few command writers the connection needs live here too.

export type ReplyHandler = (value: number | string | number[], isError: boolean) => void;

/** Most elements accepted in one array reply (the script returns 1 + 2 per limit). */
const MAX_ARRAY = 1 << 16;

/**
 * Most bytes of an incomplete reply held between reads: an error line, an integer or the 4 KiB bulk
 * string, never a value read from a key. Each read re-joins what is held, so this also bounds the
 * copying a reply dripped a byte at a time costs.
 */
export const MAX_HELD_BYTES = 8 * 1024;

export class RespProtocolError extends Error {
  override name = 'RespProtocolError';
}

export class RespReplyReader {
  private rest: Buffer | undefined;
  /** The array being read, and how many elements it still lacks. */
  private array: number[] | undefined;
  private arrayLeft = 0;

  constructor(private readonly onReply: ReplyHandler) {}

  /** Bytes of an incomplete reply held until the next read. */
  get heldBytes(): number {
    return this.rest ? this.rest.length : 0;
  }

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
        // Integers: parsed in place, as doubles (exact below 2^53). Redis's are signed 64-bit, so more
        // than 19 digits is a protocol error; whether a value is a count in range is checked where it
        // is used (reply-shapes.ts), as on the ioredis path.
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
        if (digits > 19) throw new RespProtocolError('malformed integer reply');
        if (i + 1 >= n) break; // the line continues in the next chunk
        if (digits === 0 || buf[i] !== 0x0d || buf[i + 1] !== 0x0a) {
          throw new RespProtocolError('malformed integer reply');
        }
        at = i + 2;
        const value = neg ? -v : v;
        if (this.array) {
          this.array.push(value);
          if (--this.arrayLeft === 0) {
            const a = this.array;
            this.array = undefined;
            this.onReply(a, false);
          }
        } else this.onReply(value, false);
      } else if (type === 0x2a /* * */ && !this.array) {
        const end = buf.indexOf(0x0d, at + 1);
        if (end < 0 || end + 1 >= n) break;
        const count = Number(buf.toString('latin1', at + 1, end));
        if (buf[end + 1] !== 0x0a || !Number.isInteger(count) || count < 0 || count > MAX_ARRAY) {
          throw new RespProtocolError('malformed array reply');
        }
        at = end + 2;
        if (count === 0) this.onReply([], false);
        else {
          this.array = [];
          this.arrayLeft = count;
        }
      } else if (type === 0x24 /* $ */ && !this.array) {
        // SCRIPT LOAD's answer (the script's SHA1): short bulk strings only.
        const end = buf.indexOf(0x0d, at + 1);
        if (end < 0 || end + 1 >= n) break;
        const len = Number(buf.toString('latin1', at + 1, end));
        if (buf[end + 1] !== 0x0a || !Number.isInteger(len) || len < -1 || len > 4096) {
          throw new RespProtocolError('malformed bulk reply');
        }
        if (len === -1) {
          at = end + 2;
          this.onReply('', false);
          continue;
        }
        if (end + 2 + len + 2 > n) break;
        const text = buf.toString('utf8', end + 2, end + 2 + len);
        at = end + 2 + len + 2;
        this.onReply(text, false);
      } else if (!this.array && (type === 0x2b /* + */ || type === 0x2d) /* - */) {
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
      if (n - at > MAX_HELD_BYTES) throw new RespProtocolError('reply line too long');
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
  return respArray(username ? ['AUTH', username, password] : ['AUTH', password]);
}

/** Any command as a RESP array of bulk strings (numbers written as String(n) does). */
export function respArray(parts: readonly (string | number)[]): string {
  let out = `*${parts.length}\r\n`;
  for (let i = 0; i < parts.length; i++) {
    const p = parts[i]!;
    if (typeof p === 'number') {
      const s = String(p);
      out += `$${s.length}\r\n${s}\r\n`;
    } else out += `$${Buffer.byteLength(p)}\r\n${p}\r\n`;
  }
  return out;
}
