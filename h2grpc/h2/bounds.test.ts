// The bounds of the HTTP/2 layer against each attack class, from a raw-frame client: what the server
// answers, when it closes the connection, and what it allocates or spends (docs/decisions/006-http2-layer.md
// lists each bound with its class). The same classes against the whole service, with a victim's latency
// and the process's memory: ratelimit/server/h2-attacks.test.ts.
import t from 'tap';
import net from 'node:net';
import { textFrame } from '../../harness/grpc-raw.js';
import { ErrorCode, Flag, frame, FrameType, PREFACE, Setting, settingsFrame } from './frames.js';
import { encodeHeaders } from './hpack.js';
import { H2Session } from './session.js';
import { echo, goawayCode, headersFrame, RawClient, REQUEST, startServer, threadCpuMs } from './testing.js';

const isGoaway = (f: { type: number }) => f.type === FrameType.GOAWAY;

t.test('empty CONTINUATION frames that never end a block: ENHANCE_YOUR_CALM after 16', async (t) => {
  const port = await startServer(t);
  const c = await RawClient.connect(port);
  t.teardown(() => c.socket.destroy());
  c.write(frame(FrameType.HEADERS, 0, 1, encodeHeaders(REQUEST)));
  for (let i = 0; i < 17; i++) c.write(frame(FrameType.CONTINUATION, 0, 1));
  const g = await c.waitFor(isGoaway);
  t.equal(goawayCode(g), ErrorCode.ENHANCE_YOUR_CALM);
  t.ok(g!.payload.subarray(8).toString().includes('CONTINUATION'), 'the debug text names the frames');
});

t.test('a header block in 16 CONTINUATION frames is still served', async (t) => {
  const port = await startServer(t);
  const c = await RawClient.connect(port);
  t.teardown(() => c.socket.destroy());
  const block = encodeHeaders(REQUEST);
  const step = Math.ceil(block.length / 17);
  const parts: Buffer[] = [frame(FrameType.HEADERS, 0, 1, block.subarray(0, step))];
  for (let i = 1; i < 17; i++) {
    const last = i === 16;
    parts.push(
      frame(FrameType.CONTINUATION, last ? Flag.END_HEADERS : 0, 1, block.subarray(i * step, (i + 1) * step)),
    );
  }
  c.write(...parts, frame(FrameType.DATA, Flag.END_STREAM, 1, textFrame('split')));
  const d = await c.waitFor((f) => f.type === FrameType.DATA && f.stream === 1);
  t.same(d?.payload.subarray(5).toString(), 'split');
});

t.test('SETTINGS: a flood is cut off; the open streams move once per frame', async (t) => {
  const port = await startServer(t);
  const pairs: [number, number][] = [];
  for (let i = 0; i < 2730; i++) pairs.push([Setting.INITIAL_WINDOW_SIZE, 65_535 + (i % 2)]);
  const big = settingsFrame(pairs);
  /** This thread's CPU (ms) for 19 SETTINGS frames of 2,730 INITIAL_WINDOW_SIZE entries on c. */
  const settingsCost = async (c: RawClient): Promise<number> => {
    const acks = () => c.frames.filter((f) => f.type === FrameType.SETTINGS && f.flags & Flag.ACK).length;
    const before = acks();
    const cpu0 = threadCpuMs();
    for (let i = 0; i < 19; i++) c.write(big);
    await c.waitFor(() => acks() >= before + 19);
    t.equal(acks(), before + 19, 'each answered');
    return threadCpuMs() - cpu0;
  };
  // The same frames on a connection without streams, then on one with 900 open: each frame walks the
  // streams once, not once per entry (2.5 million window updates a frame before).
  const idle = await RawClient.connect(port);
  t.teardown(() => idle.socket.destroy());
  await idle.waitFor((f) => f.type === FrameType.SETTINGS && (f.flags & Flag.ACK) !== 0);
  const control = await settingsCost(idle);
  const c = await RawClient.connect(port);
  t.teardown(() => c.socket.destroy());
  await c.waitFor((f) => f.type === FrameType.SETTINGS && (f.flags & Flag.ACK) !== 0);
  const opens: Buffer[] = [];
  for (let id = 1; id < 1800; id += 2) opens.push(headersFrame(id, REQUEST));
  // A PING after them: its answer says the streams are open.
  c.write(...opens, frame(FrameType.PING, 0, 0, Buffer.alloc(8)));
  await c.waitFor((f) => f.type === FrameType.PING);
  const withStreams = await settingsCost(c);
  t.ok(
    withStreams - control < 60,
    `900 open streams add ${(withStreams - control).toFixed(1)} ms of CPU to 19 frames (${control.toFixed(1)} ms without)`,
  );
  // More SETTINGS frames than a client ever sends in a second: ENHANCE_YOUR_CALM.
  for (let i = 0; i < 5; i++) c.write(settingsFrame([]));
  t.equal(goawayCode(await c.waitFor(isGoaway)), ErrorCode.ENHANCE_YOUR_CALM);
});

t.test('SETTINGS_INITIAL_WINDOW_SIZE repeated in one frame: the last value counts', async (t) => {
  const port = await startServer(t);
  const c = await RawClient.connect(port);
  t.teardown(() => c.socket.destroy());
  c.write(
    settingsFrame([
      [Setting.INITIAL_WINDOW_SIZE, 1000],
      [Setting.INITIAL_WINDOW_SIZE, 70_000],
      [Setting.INITIAL_WINDOW_SIZE, 2000],
    ]),
  );
  await c.waitFor((f) => f.type === FrameType.SETTINGS && (f.flags & Flag.ACK) !== 0);
  c.write(headersFrame(1, REQUEST), frame(FrameType.DATA, Flag.END_STREAM, 1, textFrame('z'.repeat(5000))));
  await c.waitFor((f) => f.type === FrameType.DATA && f.stream === 1);
  await new Promise((r) => setImmediate(r));
  const sent = c.frames
    .filter((f) => f.type === FrameType.DATA && f.stream === 1)
    .reduce((n, f) => n + f.payload.length, 0);
  t.equal(sent, 2000, 'the answer stops at the 2,000-byte stream window');
});

t.test('PINGs: strikes as grpc-go counts them', async (t) => {
  await t.test('three PINGs in a row on an idle connection: GOAWAY too_many_pings', async (t) => {
    const port = await startServer(t);
    const c = await RawClient.connect(port);
    t.teardown(() => c.socket.destroy());
    const ping = frame(FrameType.PING, 0, 0, Buffer.alloc(8));
    c.write(ping, ping, ping, ping);
    const g = await c.waitFor(isGoaway);
    t.equal(goawayCode(g), ErrorCode.ENHANCE_YOUR_CALM);
    t.equal(g!.payload.subarray(8).toString(), 'too_many_pings');
    t.equal(c.frames.filter((f) => f.type === FrameType.PING).length, 4, 'each was answered first');
  });

  await t.test('a PING after each answer is never a strike', async (t) => {
    const port = await startServer(t);
    const c = await RawClient.connect(port);
    t.teardown(() => c.socket.destroy());
    for (let i = 0; i < 10; i++) {
      const id = 1 + 2 * i;
      c.write(headersFrame(id, REQUEST), frame(FrameType.DATA, Flag.END_STREAM, id, textFrame(`c${i}`)));
      await c.waitFor(
        (f) => f.type === FrameType.HEADERS && f.stream === id && (f.flags & Flag.END_STREAM) !== 0,
      );
      c.write(frame(FrameType.PING, 0, 0, Buffer.alloc(8, i)));
      await c.waitFor((f) => f.type === FrameType.PING && f.payload[0] === i);
    }
    t.notOk(c.frames.some(isGoaway), 'no GOAWAY after ten call-and-PING rounds');
  });

  await t.test('without streams, PINGs are refused when not permitted', async (t) => {
    const port = await startServer(t, {
      limits: { keepalivePermitWithoutStream: false, keepaliveMinTimeMs: 1 },
    });
    const c = await RawClient.connect(port);
    t.teardown(() => c.socket.destroy());
    for (let i = 0; i < 4; i++) c.write(frame(FrameType.PING, 0, 0, Buffer.alloc(8)));
    t.equal(goawayCode(await c.waitFor(isGoaway)), ErrorCode.ENHANCE_YOUR_CALM);
  });
});

t.test('a message prefix past GRPC_MAX_RECV_MSG_SIZE is answered at once', async (t) => {
  const port = await startServer(t, { maxReceiveMessageLength: 1024 });
  const c = await RawClient.connect(port);
  t.teardown(() => c.socket.destroy());
  // The prefix claims 4 GiB; the stream stays open and nothing else is sent.
  c.write(headersFrame(1, REQUEST), frame(FrameType.DATA, 0, 1, Buffer.from([0, 0xff, 0xff, 0xff, 0xff])));
  const h = await c.waitFor((f) => f.type === FrameType.HEADERS && f.stream === 1);
  t.ok(h, 'answered without the rest of the message');
  t.ok(h!.payload.toString('latin1').includes('grpc-status'), 'a trailers-only answer');
  const rst = await c.waitFor((f) => f.type === FrameType.RST_STREAM && f.stream === 1);
  t.equal(rst?.payload.readUInt32BE(0), ErrorCode.NO_ERROR, 'the rest of the request is not taken');
  t.same((await echo(port, textFrame('next')))[0], '0', 'the server serves on');
});

t.test('empty DATA frames: ENHANCE_YOUR_CALM past the budget; one with END_STREAM is no flood', async (t) => {
  const port = await startServer(t);
  const c = await RawClient.connect(port);
  t.teardown(() => c.socket.destroy());
  c.write(
    headersFrame(1, REQUEST),
    frame(FrameType.DATA, 0, 1, textFrame('a')),
    frame(FrameType.DATA, Flag.END_STREAM, 1),
  );
  const d = await c.waitFor((f) => f.type === FrameType.DATA && f.stream === 1);
  t.same(d?.payload.subarray(5).toString(), 'a');
  c.write(headersFrame(3, REQUEST), ...new Array<Buffer>(1100).fill(frame(FrameType.DATA, 0, 3)));
  t.equal(goawayCode(await c.waitFor(isGoaway)), ErrorCode.ENHANCE_YOUR_CALM);
});

t.test('HEADERS with empty blocks on new stream ids: ENHANCE_YOUR_CALM', async (t) => {
  const port = await startServer(t);
  const c = await RawClient.connect(port);
  t.teardown(() => c.socket.destroy());
  const out: Buffer[] = [];
  for (let id = 1; id < 400; id += 2) out.push(frame(FrameType.HEADERS, Flag.END_HEADERS, id));
  c.write(...out);
  t.equal(goawayCode(await c.waitFor(isGoaway)), ErrorCode.ENHANCE_YOUR_CALM);
  const refused = c.frames.filter((f) => f.type === FrameType.RST_STREAM).length;
  t.ok(refused <= 101, `${refused} malformed streams answered before the connection was closed`);
});

t.test('a frame written one byte at a time costs one copy, not a join per read', async (t) => {
  let joined = 0;
  const concat = Buffer.concat;
  const server = net.createServer((socket) => {
    const s = new H2Session(socket);
    s.on('error', () => undefined);
    // Counts what the session joins while it reads (a 16 KiB frame trickled: 134 MB with a join per read).
    socket.prependListener('data', () => {
      Buffer.concat = ((list: readonly Uint8Array[], n?: number) => {
        const b = concat(list, n);
        joined += b.length;
        return b;
      }) as typeof Buffer.concat;
    });
    socket.on('data', () => (Buffer.concat = concat));
  });
  t.teardown(() => {
    Buffer.concat = concat;
    server.close();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const socket = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
  socket.setNoDelay(true);
  t.teardown(() => socket.destroy());
  await new Promise((r) => socket.once('connect', r));
  socket.write(Buffer.concat([PREFACE, settingsFrame([]), headersFrame(1, REQUEST)]));
  const f = frame(FrameType.DATA, 0, 1, Buffer.alloc(4000, 0x42));
  for (let i = 0; i < f.length; i++) {
    socket.write(f.subarray(i, i + 1));
    await new Promise((r) => setImmediate(r));
  }
  t.ok(joined < 64 * 1024, `${joined} bytes joined while reading a 4 kB frame a byte at a time`);
});

t.test('request headers count against the connection bound: new streams refused past it', async (t) => {
  const port = await startServer(t, { limits: { maxSessionMemory: 256 * 1024 } });
  const c = await RawClient.connect(port);
  t.teardown(() => c.socket.destroy());
  // Calls that never end, each with 15 kB of headers: about seventeen fit in 256 KiB.
  const big = { ...REQUEST, 'x-pad': 'p'.repeat(15_000) };
  const out: Buffer[] = [];
  for (let id = 1; id < 80; id += 2) out.push(headersFrame(id, big));
  c.write(...out);
  const r = await c.waitFor((f) => f.type === FrameType.RST_STREAM);
  t.equal(r?.payload.readUInt32BE(0), ErrorCode.REFUSED_STREAM);
  t.ok(r !== undefined && r.stream <= 39, `the first refused stream is ${r?.stream}`);
});

t.test('all connections together: the one holding most is held back, a small caller is served', async (t) => {
  const port = await startServer(t, {
    limits: { maxSessionMemory: 8 * 1024 * 1024, maxTotalSessionMemory: 512 * 1024 },
  });
  const hog = await RawClient.connect(port);
  t.teardown(() => hog.socket.destroy());
  const big = { ...REQUEST, 'x-pad': 'p'.repeat(15_000) };
  const out: Buffer[] = [];
  for (let id = 1; id < 160; id += 2) out.push(headersFrame(id, big));
  hog.write(...out);
  const r = await hog.waitFor((f) => f.type === FrameType.RST_STREAM);
  t.equal(r?.payload.readUInt32BE(0), ErrorCode.REFUSED_STREAM, 'refused long before its own 8 MiB');
  t.ok(r !== undefined && r.stream <= 75, `the first refused stream is ${r?.stream}`);
  t.same((await echo(port, textFrame('small')))[0], '0', 'another caller is served meanwhile');
});

t.test('a connection with no open stream for maxConnectionIdleMs gets GOAWAY NO_ERROR', async (t) => {
  const port = await startServer(t, { limits: { maxConnectionIdleMs: 200 } });
  const idle = await RawClient.connect(port);
  const busy = await RawClient.connect(port);
  t.teardown(() => idle.socket.destroy());
  t.teardown(() => busy.socket.destroy());
  busy.write(headersFrame(1, REQUEST)); // a call that stays open
  const g = await idle.waitFor(isGoaway);
  t.equal(goawayCode(g), ErrorCode.NO_ERROR);
  t.notOk(busy.frames.some(isGoaway), 'the connection with an open call is not closed');
});

t.test('connections past maxConnections are closed as they come', async (t) => {
  const port = await startServer(t, { limits: { maxConnections: 2 } });
  const a = await RawClient.connect(port);
  const b = await RawClient.connect(port);
  t.teardown(() => a.socket.destroy());
  t.teardown(() => b.socket.destroy());
  await a.waitFor((f) => f.type === FrameType.SETTINGS);
  await b.waitFor((f) => f.type === FrameType.SETTINGS);
  const c = await RawClient.connect(port);
  t.teardown(() => c.socket.destroy());
  await c.waitFor(() => false);
  t.ok(c.closed, 'the third connection is closed');
  t.notOk(a.closed || b.closed, 'the first two stay');
});
