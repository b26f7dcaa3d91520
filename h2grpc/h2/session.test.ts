// The HTTP/2 layer of our own, from a client that writes raw frames: one connection's hostile or broken
// input ends that stream or that connection, never the process and never another connection's answers;
// each per-connection bound holds; flow control in both directions. (Protocol conformance as a whole:
// h2spec, in ../conformance.test.ts. Each attack class against the whole service: ratelimit/server/h2-attacks.test.ts.)
import t from 'tap';
import fc from 'fast-check';
import { textFrame } from '../../harness/grpc-raw.js';
import { ErrorCode, Flag, frame, FrameType, frameU32, PREFACE, settingsFrame } from './frames.js';
import { encodeHeaders } from './hpack.js';
import { bareSession, echo, goawayCode, headersFrame, RawClient, REQUEST, startServer } from './testing.js';

t.test('a header list past the bound: 431 for that stream, the connection serves on', async (t) => {
  const port = await startServer(t, { limits: { maxHeaderListSize: 1024 } });
  const c = await RawClient.connect(port);
  t.teardown(() => c.socket.destroy());
  c.write(headersFrame(1, { ...REQUEST, 'x-big': 'v'.repeat(2000) }, Flag.END_HEADERS | Flag.END_STREAM));
  const h = await c.waitFor((f) => f.type === FrameType.HEADERS && f.stream === 1);
  t.ok(h, 'stream 1 answered');
  t.equal(h!.payload.toString('latin1').includes('431'), true, ':status 431');
  c.write(headersFrame(3, REQUEST), frame(FrameType.DATA, Flag.END_STREAM, 3, textFrame('hi')));
  const data = await c.waitFor((f) => f.type === FrameType.DATA && f.stream === 3);
  t.same(data?.payload.subarray(5).toString(), 'hi', 'the next call on the same connection is answered');
});

t.test('a header block past twice the bound over CONTINUATION frames: ENHANCE_YOUR_CALM', async (t) => {
  const port = await startServer(t, { limits: { maxHeaderListSize: 1024 } });
  const c = await RawClient.connect(port);
  t.teardown(() => c.socket.destroy());
  c.write(frame(FrameType.HEADERS, 0, 1, encodeHeaders(REQUEST)));
  for (let i = 0; i < 40; i++) c.write(frame(FrameType.CONTINUATION, 0, 1, Buffer.alloc(100, 0x40)));
  const g = await c.waitFor((f) => f.type === FrameType.GOAWAY);
  t.equal(goawayCode(g), ErrorCode.ENHANCE_YOUR_CALM);
  t.same((await echo(port, textFrame('other')))[0], '0', 'another connection is answered');
});

t.test('streams reset as fast as they are opened: the connection is cut off', async (t) => {
  const port = await startServer(t, { limits: { maxConcurrentStreams: 5 } });
  const c = await RawClient.connect(port);
  t.teardown(() => c.socket.destroy());
  const burst: Buffer[] = [];
  for (let id = 1; id < 2 * 200; id += 2)
    burst.push(headersFrame(id, REQUEST), frameU32(FrameType.RST_STREAM, id, ErrorCode.CANCEL));
  c.write(...burst);
  const g = await c.waitFor((f) => f.type === FrameType.GOAWAY);
  t.equal(goawayCode(g), ErrorCode.ENHANCE_YOUR_CALM, 'after 2 x the stream limit + 100 resets');
  t.same((await echo(port, textFrame('other')))[0], '0', 'another connection is answered');
});

t.test('more streams than SETTINGS_MAX_CONCURRENT_STREAMS: the extra ones are refused', async (t) => {
  const port = await startServer(t, { limits: { maxConcurrentStreams: 2 } });
  const c = await RawClient.connect(port);
  t.teardown(() => c.socket.destroy());
  c.write(headersFrame(1, REQUEST), headersFrame(3, REQUEST), headersFrame(5, REQUEST));
  const r = await c.waitFor((f) => f.type === FrameType.RST_STREAM);
  t.equal(r?.stream, 5);
  t.equal(r?.payload.readUInt32BE(0), ErrorCode.REFUSED_STREAM);
  c.write(frame(FrameType.DATA, Flag.END_STREAM, 1, textFrame('one')));
  const d = await c.waitFor((f) => f.type === FrameType.DATA && f.stream === 1);
  t.same(d?.payload.subarray(5).toString(), 'one', 'the open streams are served');
});

t.test('a peer that floods PINGs and never reads the answers is disconnected', async (t) => {
  const socket = await bareSession(t, { maxSessionMemory: 64 * 1024 });
  let closed = false;
  socket.on('close', () => (closed = true));
  socket.pause(); // never reads: the server's PING answers pile up
  socket.write(Buffer.concat([PREFACE, settingsFrame([])]));
  const ping = frame(FrameType.PING, 0, 0, Buffer.alloc(8));
  const batch = Buffer.concat(Array.from({ length: 4096 }, () => ping));
  const deadline = Date.now() + 30_000;
  while (!closed && Date.now() < deadline) {
    if (!socket.write(batch)) await new Promise((r) => setTimeout(r, 5));
  }
  t.ok(closed, 'the server closed the connection instead of buffering on');
});

t.test('a connection that never sends the preface is closed', async (t) => {
  const socket = await bareSession(t, { prefaceTimeoutMs: 200 });
  socket.resume();
  const closed = await new Promise<boolean>((resolve) => {
    socket.on('close', () => resolve(true));
    setTimeout(() => resolve(false), 10_000).unref();
  });
  t.ok(closed, 'closed by the server');
});

t.test('flow control: an answer larger than the client window waits for its WINDOW_UPDATEs', async (t) => {
  const port = await startServer(t);
  const big = textFrame('x'.repeat(200_000));
  const [status, body] = await echo(port, big, { initialWindowSize: 1000 });
  t.equal(status, '0');
  t.equal(Buffer.compare(body, big), 0, 'all 200 kB arrived in order through a 1,000-byte stream window');
  const [status2, body2] = await echo(port, textFrame('y'.repeat(3_000_000)));
  t.equal(status2, '0');
  t.equal(body2.length, 3_000_005, 'a 3 MB request crossed many connection and stream windows');
});

t.test('random frames after the preface never end the process or another connection', async (t) => {
  const port = await startServer(t);
  await fc.assert(
    fc.asyncProperty(
      fc.array(
        fc.record({
          type: fc.integer({ min: 0, max: 12 }),
          flags: fc.integer({ min: 0, max: 255 }),
          id: fc.oneof(
            fc.constant(0),
            fc.constant(1),
            fc.constant(3),
            fc.integer({ min: 0, max: 2 ** 31 - 1 }),
          ),
          payload: fc.uint8Array({ maxLength: 64 }),
        }),
        { maxLength: 12 },
      ),
      async (frames) => {
        const c = await RawClient.connect(port);
        c.write(
          headersFrame(1, REQUEST),
          ...frames.map((f) => frame(f.type, f.flags, f.id, Buffer.from(f.payload))),
        );
        await new Promise((r) => setTimeout(r, 5));
        c.socket.destroy();
        const [status, body] = await echo(port, textFrame('still here'));
        return status === '0' && body.subarray(5).toString() === 'still here';
      },
    ),
    { numRuns: 150, seed: 7 },
  );
  t.pass('150 random frame sequences; every other connection was answered');
});
