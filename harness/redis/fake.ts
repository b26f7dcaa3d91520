// A fake Redis on a loopback port, for the one thing a real redis-server cannot be made to do: answer a
// command with a reply of a type or range Redis never sends for it (a RESP3 double, a map, a string
// where a count belongs). It reads RESP2 command arrays and answers what ioredis and the direct
// counting connection send on connect (PING, INFO, CLIENT, SELECT, AUTH, SCRIPT LOAD, EXPIRE, QUIT)
// as Redis does; every other command is answered by the test's `answer`. Everything else in the tests
// runs on a real redis-server (server.ts).
import { createHash } from 'node:crypto';
import { createServer, type Server, type Socket } from 'node:net';
import { LOOPBACK } from '../net.js';
import { parseResp, type RespValue } from './resp.js';

/** The raw RESP bytes of a reply, or undefined for Redis's own answer to the command. */
export type FakeAnswer = (args: string[], conn: number) => string | undefined;

export interface FakeRedis {
  readonly port: number;
  /** host:port, for REDIS_URL. */
  readonly url: string;
  /** Every command received, with the number of the connection it came on (from 1). */
  readonly commands: { conn: number; args: string[] }[];
  /** Connections accepted so far. */
  readonly connections: () => number;
  close(): Promise<void>;
}

/** A bulk string reply. */
export function bulk(s: string): string {
  return `$${Buffer.byteLength(s)}\r\n${s}\r\n`;
}

function standard(args: string[]): string {
  const name = args[0]!.toUpperCase();
  switch (name) {
    case 'PING':
      return '+PONG\r\n';
    case 'INFO':
      return bulk('# Server\r\nredis_version:7.0.0\r\n# Persistence\r\nloading:0\r\n');
    case 'CLIENT':
    case 'SELECT':
    case 'AUTH':
    case 'QUIT':
      return '+OK\r\n';
    case 'SCRIPT':
      return args[1]?.toUpperCase() === 'LOAD'
        ? bulk(
            createHash('sha1')
              .update(args[2] ?? '')
              .digest('hex'),
          )
        : '+OK\r\n';
    case 'EXPIRE':
    case 'PEXPIRE':
      return ':1\r\n';
    case 'ROLE':
      return '*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n';
    default:
      return `-ERR unknown command '${args[0]}'\r\n`;
  }
}

export async function startFakeRedis(answer: FakeAnswer): Promise<FakeRedis> {
  const commands: { conn: number; args: string[] }[] = [];
  const sockets = new Set<Socket>();
  let accepted = 0;
  const server: Server = createServer((sock) => {
    const conn = ++accepted;
    sockets.add(sock);
    sock.on('close', () => sockets.delete(sock));
    sock.on('error', () => undefined);
    let buf: Buffer = Buffer.alloc(0);
    sock.on('data', (chunk: Buffer) => {
      buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
      let off = 0;
      let out = '';
      for (;;) {
        const r = parseResp(buf, off);
        if (!r) break;
        off = r[1];
        const args = (r[0] as RespValue[]).map(String);
        commands.push({ conn, args });
        out += answer(args, conn) ?? standard(args);
      }
      buf = buf.subarray(off);
      if (out) sock.write(out);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, LOOPBACK, resolve));
  const port = (server.address() as { port: number }).port;
  return {
    port,
    url: `${LOOPBACK}:${port}`,
    commands,
    connections: () => accepted,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
