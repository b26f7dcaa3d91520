// A streaming call the server has ended is released at once, even when the client never half-closes:
// the response's last frame first, then RST_STREAM with NO_ERROR, so a client cannot hold ended calls
// open (each one a stream slot and its buffers) by never ending its side.
import t, { type Test } from 'tap';
import * as http2 from 'node:http2';
import { pino } from 'pino';
import { textFrame } from '../harness/grpc-raw.js';
import { H2GrpcServer } from './server.js';
import type { BidiStreamingMethod } from './grpc/method.js';

const frame = textFrame;

/** Ends the call on its first message: with a reply and OK, or with INVALID_ARGUMENT and no reply. */
const method: BidiStreamingMethod<string, string> = {
  decode: (b) => b.toString(),
  encode: (m) => Buffer.from(m),
  start: (out) => ({
    message: (m) => {
      if (m === 'bad') return out.end(3, 'bad message');
      out.send(`echo ${m}`);
      out.end();
    },
    halfClose: () => out.end(),
  }),
};

async function startServer(t: Test): Promise<http2.ClientHttp2Session> {
  const server = new H2GrpcServer({ logger: pino({ level: 'silent' }), maxReceiveMessageLength: 1024 });
  server.addBidiStreaming('/t.S/Bidi', method);
  const port = await server.listen({ host: '127.0.0.1', port: 0 });
  const session = http2.connect(`http://127.0.0.1:${port}`);
  session.on('error', () => undefined);
  t.teardown(async () => {
    session.destroy();
    await server.close();
  });
  return session;
}

interface Seen {
  status?: string;
  data: number;
  rstCode?: number;
}

/** Opens a call, sends one message and never ends its side; resolves when the stream closes. */
function callWithoutHalfClose(session: http2.ClientHttp2Session, message: string): Promise<Seen> {
  const s = session.request(
    { ':method': 'POST', ':path': '/t.S/Bidi', 'content-type': 'application/grpc', te: 'trailers' },
    { endStream: false },
  );
  const seen: Seen = { data: 0 };
  s.on('response', (h) => (seen.status ??= h['grpc-status'] as string | undefined));
  s.on('trailers', (h) => (seen.status = h['grpc-status'] as string));
  s.on('data', (d: Buffer) => (seen.data += d.length));
  s.on('error', () => undefined);
  s.write(frame(message));
  return new Promise((resolve) =>
    s.on('close', () => {
      seen.rstCode = s.rstCode;
      resolve(seen);
    }),
  );
}

t.test(
  'an ended call whose client never half-closes: the reply and its status, then the stream is reset with NO_ERROR',
  async (t) => {
    const session = await startServer(t);
    const seen = await callWithoutHalfClose(session, 'hi');
    t.equal(seen.data, 5 + 'echo hi'.length, 'the reply arrived');
    t.equal(seen.status, '0', 'then the OK trailers');
    t.equal(seen.rstCode, http2.constants.NGHTTP2_NO_ERROR, 'then RST_STREAM NO_ERROR');
  },
);

t.test(
  'an ended call with an error status and no reply (trailers only): released the same way',
  async (t) => {
    const session = await startServer(t);
    const seen = await callWithoutHalfClose(session, 'bad');
    t.equal(seen.status, '3', 'INVALID_ARGUMENT in the trailers-only response');
    t.equal(seen.rstCode, http2.constants.NGHTTP2_NO_ERROR);
  },
);
