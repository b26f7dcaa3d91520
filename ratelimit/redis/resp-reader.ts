// A reader of the RESP replies that INCRBY, EXPIRE, AUTH, SCRIPT LOAD and the limit script answer with:
// integer (`:`), simple string (`+`), error (`-`), a short bulk string (`$`, the script's SHA1) and an
// array of integers (`*`, the script's verdict). Hand-written for
// the direct counting connection (direct-counter.ts): the general parser ioredis uses handles every type
// and hands each reply to a Command object, which is the cost this path removes. Anything else on the
// wire is a protocol error, never a guess. The few command writers the connection needs live here too.
//
// Below the reader: what a reply must be where the service reads numbers from it, on every path
// (this connection, ioredis, the cluster's pipelines).
import {
  CacheError,
  CounterRefusedError,
  SATURATED_COUNT,
  type LimitCheck,
  type LimitVerdict,
} from '../counting/index.js';

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
        // is used (countOf below), as on the ioredis path.
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

// What a Redis reply must be where the service reads numbers from it. A count (INCRBY's answer, a
// counter read with GET) is a non-negative integer; the limit script's verdict is an array of
// 1 + 2 per limit integers, each in its range (limit-script.ts, algorithms.ts). Anything else — a
// RESP3 double, a map, a status or bulk string, a null, a count below zero — never comes from Redis
// running these commands: it is a misbehaving server or proxy, and the operation fails as a cache
// error (its failure mode decides it) instead of a number being guessed from the reply. A negative
// count is the one shape a real Redis can give (a key some other writer set below zero): that op's
// own data, so it fails that op only (CounterRefusedError) and never counts against the shard. Every
// other malformed reply is the server's failure, counted by the circuit breaker as a timeout would be.

/**
 * The largest "ms until replenished" a verdict carries: the script clamps a token bucket's at 1e13,
 * and a window's is at most two periods of at most a year.
 */
const MAX_RESET_MS = 1e13;

/** A short description of a reply for an error message (never its whole content). */
function shapeOf(value: unknown): string {
  if (value === null || value === undefined) return 'a null';
  if (typeof value === 'number') return String(value);
  if (typeof value === 'string') return `the string ${JSON.stringify(value.slice(0, 32))}`;
  if (Array.isArray(value)) return `an array of ${value.length}`;
  if (typeof value === 'bigint') return `the big number ${String(value).slice(0, 32)}`;
  return `a ${typeof value === 'object' ? (value.constructor?.name ?? 'map') : typeof value}`;
}

/**
 * INCRBY's reply as a count, or the CacheError of a reply that is not one. A count past 2^53 (a real
 * Redis counts to 2^63 - 1, read as a double near it) is over any limit: SATURATED_COUNT, as an
 * overflow is.
 */
export function countOf(value: unknown, what = 'INCRBY'): number | CacheError {
  if (typeof value === 'number' && value >= 0 && value <= Number.MAX_SAFE_INTEGER) {
    // Integer replies are integers; a RESP3 double such as 1.5 is not a count.
    if (Number.isInteger(value)) return value;
  } else if (typeof value === 'number' && value > 0 && value < 1e19 && Number.isInteger(value)) {
    return SATURATED_COUNT;
  }
  const text = `redis ${what} answered ${shapeOf(value)}, not a count`;
  if (typeof value === 'number' && Number.isInteger(value) && value < 0) {
    return new CounterRefusedError(`${text}: the key holds a negative value`);
  }
  return new CacheError(`${text}: malformed reply`);
}

/** GET's reply (a counter read without counting) as a count: absent is 0. */
export function storedCountOf(value: unknown): number | CacheError {
  if (value === null) return 0;
  if (typeof value === 'string' && /^-?\d{1,19}$/.test(value)) return countOf(Number(value), 'GET');
  return countOf(value, 'GET');
}

const isCount = (x: unknown): x is number => Number.isSafeInteger(x) && (x as number) >= 0;

/**
 * The limit script's reply for `check` as a verdict, or the CacheError of a reply of another shape:
 * [rejectedBy in 0..n, then per limit remaining in 0..max(limit, burst) and ms in 0..MAX_RESET_MS,
 * then per limit ms until more in 0..MAX_RESET_MS], n the check's limits (its args: now, hits, then four
 * per limit).
 */
export function verdictOf(value: unknown, check: LimitCheck): LimitVerdict | CacheError {
  const args = check.args;
  const n = (args.length - 2) >> 2;
  if (Array.isArray(value) && value.length === 1 + 3 * n && isCount(value[0]) && value[0] <= n) {
    let i = 0;
    for (; i < n; i++) {
      const remaining: unknown = value[1 + 2 * i];
      const reset: unknown = value[2 + 2 * i];
      const a = 2 + 4 * i;
      // args[a .. a + 3]: algorithm code, requests per unit, period ms, burst.
      const most = args[a + 1]! > args[a + 3]! ? args[a + 1]! : args[a + 3]!;
      const more: unknown = value[1 + 2 * n + i];
      if (!isCount(remaining) || remaining > most || !isCount(reset) || reset > MAX_RESET_MS) break;
      if (!isCount(more) || more > MAX_RESET_MS) break;
    }
    if (i === n) return value as LimitVerdict;
  }
  const at = Array.isArray(value) ? ` (${value.slice(0, 7).map(shapeOf).join(', ')})` : '';
  return new CacheError(
    `redis limit script answered ${shapeOf(value)}${at}, not a verdict for ${n} limit(s): malformed reply`,
  );
}

/** Every verdict of a call, or throws the first malformed one's CacheError (evaluate's contract). */
export function verdictsOf(values: readonly unknown[], checks: readonly LimitCheck[]): LimitVerdict[] {
  for (let i = 0; i < checks.length; i++) {
    const v = verdictOf(values[i], checks[i]!);
    if (v instanceof Error) throw v;
  }
  return values as LimitVerdict[];
}
