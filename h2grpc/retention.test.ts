// Once a unary call's request is read, its stream no longer holds the call: node:http2 keeps a stream's
// objects until a major GC whatever the server does (the young-generation collector keeps its native
// wrappers alive), so a call hanging off the stream would go to the old generation with it, on every
// call. Held: the server-side streams (as node:http2 itself holds them until a major GC); asked: whether
// each call's context can be collected once answered. (The HTTP/2 layer of our own keeps no stream once
// it closes; this is about the node:http2 one, GRPC_HTTP2_SERVER=node.)
import t from 'tap';
import * as http2 from 'node:http2';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { pino } from 'pino';
import { textFrame } from '../harness/grpc-raw.js';
import { H2GrpcServer } from './server.js';
import type { CallContext, UnaryMethod } from './grpc/method.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const frame = textFrame;

function call(session: http2.ClientHttp2Session, text: string): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    const s = session.request({
      ':method': 'POST',
      ':path': '/t.S/Unary',
      'content-type': 'application/grpc',
      te: 'trailers',
    });
    let status: string | undefined;
    s.on('trailers', (h) => (status = h['grpc-status'] as string));
    s.on('data', () => undefined);
    s.on('close', () => resolve(status));
    s.on('error', reject);
    s.end(frame(text));
  });
}

t.test('an answered unary call is not kept alive by its stream', async (t) => {
  const contexts: WeakRef<CallContext>[] = [];
  const method: UnaryMethod<string, string> = {
    decode: (b) => b.toString(),
    encode: (m) => Buffer.from(m),
    handle: async (req, ctx) => {
      contexts.push(new WeakRef(ctx));
      return `echo ${req}`;
    },
  };
  const server = new H2GrpcServer({
    logger: pino({ level: 'silent' }),
    maxReceiveMessageLength: 1024,
    http2: 'node',
  });
  server.addUnary('/t.S/Unary', method);
  const port = await server.listen({ host: '127.0.0.1', port: 0 });
  // The node:http2 server inside: its streams are kept here, as node:http2 keeps them until a major GC.
  const inner = (server as unknown as { server: http2.Http2Server }).server;
  const streams: http2.ServerHttp2Stream[] = [];
  inner.on('stream', (s) => streams.push(s));
  const session = http2.connect(`http://127.0.0.1:${port}`);
  session.on('error', () => undefined);
  t.teardown(async () => {
    session.destroy();
    await server.close();
  });

  for (let i = 0; i < 20; i++) t.equal(await call(session, `m${i}`), '0', `call ${i} answered OK`);
  t.equal(streams.length, 20, 'every server-side stream is held');
  let alive = contexts.length;
  const deadline = Date.now() + 10_000;
  while (alive > 0 && Date.now() < deadline) {
    await new Promise((r) => setImmediate(r));
    gc();
    alive = contexts.filter((w) => w.deref() !== undefined).length;
  }
  t.equal(alive, 0, 'no call context is reachable from its held stream');
});
