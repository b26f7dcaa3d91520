// A minimal RESP2 client for the harness: one fresh connection, a few pipelined commands, then close.
// Readiness and topology checks speak it instead of ioredis so no client reconnect logic second-guesses
// what a test is looking at (a server that is down, a failover in progress).
import { createConnection, type Socket } from 'node:net';
import { connect as tlsConnect, type ConnectionOptions as TlsConnectionOptions } from 'node:tls';
import { LOOPBACK } from '../net.js';

export class RespError extends Error {}
export type RespValue = string | number | null | RespError | RespValue[];

export interface RespTarget {
  host?: string;
  port?: number;
  /** Unix socket path (instead of host/port). */
  path?: string;
  /** TLS options (ca/cert/key) when the server only speaks TLS. */
  tls?: TlsConnectionOptions;
  username?: string;
  password?: string;
  timeoutMs?: number;
}

function encode(args: (string | number)[]): string {
  let out = `*${args.length}\r\n`;
  for (const a of args) {
    const s = String(a);
    out += `$${Buffer.byteLength(s)}\r\n${s}\r\n`;
  }
  return out;
}

/** One RESP2 value from `buf` at `off`, with the offset after it; undefined while incomplete. */
export function parseResp(buf: Buffer, off: number): [RespValue, number] | undefined {
  if (off >= buf.length) return undefined;
  const nl = buf.indexOf('\r\n', off);
  if (nl < 0) return undefined;
  const type = buf[off];
  const line = buf.toString('utf8', off + 1, nl);
  const next = nl + 2;
  switch (type) {
    case 0x2b: // +
      return [line, next];
    case 0x2d: // -
      return [new RespError(line), next];
    case 0x3a: // :
      return [Number(line), next];
    case 0x24: {
      // $
      const len = Number(line);
      if (len < 0) return [null, next];
      if (buf.length < next + len + 2) return undefined;
      return [buf.toString('utf8', next, next + len), next + len + 2];
    }
    case 0x2a: {
      // *
      const n = Number(line);
      if (n < 0) return [null, next];
      const arr: RespValue[] = [];
      let o = next;
      for (let i = 0; i < n; i++) {
        const r = parseResp(buf, o);
        if (!r) return undefined;
        arr.push(r[0]);
        o = r[1];
      }
      return [arr, o];
    }
    default:
      throw new Error(`unexpected RESP type byte ${type}`);
  }
}

/** Send commands on one fresh connection; resolve with one reply per command (errors as RespError). */
export function respCommands(target: RespTarget, commands: (string | number)[][]): Promise<RespValue[]> {
  const all = [...commands];
  const auth = target.password !== undefined;
  if (auth) {
    all.unshift(target.username ? ['AUTH', target.username, target.password!] : ['AUTH', target.password!]);
  }
  return new Promise((resolve, reject) => {
    let sock: Socket;
    const host = target.host ?? LOOPBACK;
    if (target.path) sock = createConnection({ path: target.path });
    else if (target.tls) sock = tlsConnect({ host, port: target.port, ...target.tls });
    else sock = createConnection({ host, port: target.port! });
    let buf = Buffer.alloc(0);
    const replies: RespValue[] = [];
    let off = 0;
    const fail = (err: Error) => {
      sock.destroy();
      reject(err);
    };
    sock.setTimeout(target.timeoutMs ?? 2000, () => fail(new Error('RESP request timed out')));
    sock.once('error', fail);
    sock.once('close', () => {
      if (replies.length < all.length) reject(new Error('connection closed before all replies arrived'));
    });
    sock.once(target.tls && !target.path ? 'secureConnect' : 'connect', () =>
      sock.write(all.map(encode).join('')),
    );
    sock.on('data', (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      for (;;) {
        const r = parseResp(buf, off);
        if (!r) break;
        replies.push(r[0]);
        off = r[1];
      }
      if (replies.length >= all.length) {
        sock.destroy();
        if (auth && replies[0] instanceof RespError) reject(replies[0]);
        else resolve(auth ? replies.slice(1) : replies);
      }
    });
  });
}

/** One command; an error reply rejects. */
export async function respCommand(target: RespTarget, ...args: (string | number)[]): Promise<RespValue> {
  const [reply] = await respCommands(target, [args]);
  if (reply instanceof RespError) throw reply;
  return reply ?? null;
}

/** `INFO section` as a key → value map. */
export async function redisInfo(target: RespTarget, section: string): Promise<Record<string, string>> {
  const text = String(await respCommand(target, 'INFO', section));
  return parseInfo(text);
}

export function parseInfo(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split('\r\n')) {
    const i = line.indexOf(':');
    if (i > 0 && !line.startsWith('#')) out[line.slice(0, i)] = line.slice(i + 1);
  }
  return out;
}
