// Test helpers for the HTTP/2 layer: a client that writes raw frames and collects what the server
// sends, a gRPC echo server on our layer, a bare session, and a call from node:http2 (nghttp2).
import type { Test } from 'tap';
import * as http2 from 'node:http2';
import net from 'node:net';
import { pino } from 'pino';
import { frameSplitter, type RawFrame } from '../../harness/h2-frames.js';
import { H2GrpcServer } from '../server.js';
import { Flag, frame, FrameType, PREFACE, settingsFrame } from './frames.js';
import { encodeHeaders } from './hpack.js';
import { H2Session, type H2SessionOptions } from './session.js';

export type Frame = RawFrame;

/** A client socket that writes raw frames and collects what the server sends. */
export class RawClient {
  readonly frames: Frame[] = [];
  closed = false;
  private waiters: (() => void)[] = [];

  constructor(readonly socket: net.Socket) {
    socket.on(
      'data',
      frameSplitter((f) => {
        this.frames.push(f);
        this.wake();
      }),
    );
    socket.on('error', () => undefined);
    socket.on('close', () => {
      this.closed = true;
      this.wake();
    });
  }

  static async connect(port: number): Promise<RawClient> {
    const socket = net.connect(port, '127.0.0.1');
    await new Promise<void>((r, j) => socket.once('connect', r).once('error', j));
    const c = new RawClient(socket);
    socket.write(Buffer.concat([PREFACE, settingsFrame([])]));
    return c;
  }

  private wake(): void {
    for (const w of this.waiters.splice(0)) w();
  }

  /** Waits (up to 10 s) until a frame matching `pred` came, or the connection closed. */
  async waitFor(pred: (f: Frame) => boolean): Promise<Frame | undefined> {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const f = this.frames.find(pred);
      if (f || this.closed || Date.now() > deadline) return f;
      await new Promise<void>((r) => {
        this.waiters.push(r);
        setTimeout(r, 200);
      });
    }
  }

  write(...frames: Buffer[]): void {
    this.socket.write(Buffer.concat(frames));
  }
}

export const REQUEST = {
  ':method': 'POST',
  ':scheme': 'http',
  ':path': '/t.S/Echo',
  ':authority': 'x',
  'content-type': 'application/grpc',
  te: 'trailers',
};

export function headersFrame(
  id: number,
  fields: Record<string, string>,
  flags: number = Flag.END_HEADERS,
): Buffer {
  return frame(FrameType.HEADERS, flags, id, encodeHeaders(fields));
}

export const goawayCode = (f: Frame | undefined) => f?.payload.readUInt32BE(4);

export async function startServer(
  t: Test,
  opts: Partial<ConstructorParameters<typeof H2GrpcServer>[0]> = {},
) {
  const server = new H2GrpcServer({
    logger: pino({ level: 'silent' }),
    maxReceiveMessageLength: 4 * 1024 * 1024,
    ...opts,
  });
  server.addUnary<Buffer, Buffer>('/t.S/Echo', {
    decode: (b) => b,
    encode: (m) => m,
    handle: async (req) => req,
  });
  const port = await server.listen({ host: '127.0.0.1', port: 0 });
  t.teardown(() => server.close(1000));
  return port;
}

/** A call from node:http2 (nghttp2) on its own connection: the answer's grpc-status and body. */
export async function echo(
  port: number,
  body: Buffer,
  settings: http2.Settings = {},
): Promise<[string, Buffer]> {
  const session = http2.connect(`http://127.0.0.1:${port}`, { settings });
  session.on('error', () => undefined);
  try {
    return await new Promise((resolve, reject) => {
      const req = session.request({
        ':method': 'POST',
        ':path': '/t.S/Echo',
        'content-type': 'application/grpc',
      });
      const chunks: Buffer[] = [];
      let status = '';
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('trailers', (h) => (status = String(h['grpc-status'])));
      req.on('close', () => resolve([status, Buffer.concat(chunks)]));
      req.on('error', reject);
      req.end(body);
    });
  } finally {
    session.destroy();
  }
}

/** A bare H2Session (no gRPC server on it) with some options changed; a client socket connected to it. */
export async function bareSession(t: Test, opts: Partial<H2SessionOptions>): Promise<net.Socket> {
  const server = net.createServer((socket) => {
    const s = new H2Session(socket, {
      maxConcurrentStreams: 10,
      maxSessionMemory: 1 << 20,
      maxHeaderListSize: 4096,
      ...opts,
    });
    s.on('error', () => undefined);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => server.close());
  const socket = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
  socket.on('error', () => undefined);
  t.teardown(() => socket.destroy());
  return socket;
}

/** CPU time of this thread (ms): V8's compiler and GC helper threads left out where Node can. */
export function threadCpuMs(): number {
  const p = process as unknown as { threadCpuUsage?: () => NodeJS.CpuUsage };
  const u = p.threadCpuUsage ? p.threadCpuUsage() : process.cpuUsage();
  return (u.user + u.system) / 1000;
}
