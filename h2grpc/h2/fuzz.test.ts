// A standing fuzz target for the frame reader and the HPACK decoder that asserts resources, not only
// "no crash": random and mutated frame sequences, cut at random points into the socket's reads, against a
// session of the HTTP/2 layer. After each sequence: the bytes the connection holds stay within its bounds,
// the CPU it cost stays within a small budget per frame, and another connection is still answered. The
// HPACK decoder alone: random and mutated blocks either decode within the list bound or fail with an
// HpackError, at a bounded cost per byte.
//
// CI runs a short pass; `npm run fuzz:h2` runs a long one (H2_FUZZ_RUNS, default 20,000 sequences).
import t from 'tap';
import fc from 'fast-check';
import net from 'node:net';
import { textFrame } from '../../harness/grpc-raw.js';
import { frameSplitter } from '../../harness/h2-frames.js';
import { Flag, frame, FrameType, PREFACE, settingsFrame } from './frames.js';
import { encodeHeaders, HpackDecoder, HpackError } from './hpack.js';
import { H2Session } from './session.js';
import type { H2Stream } from './stream.js';
import { REQUEST, threadCpuMs } from './testing.js';

const RUNS = Number(process.env.H2_FUZZ_RUNS ?? 200);
const LAST_PING = Buffer.from('fuzzdone');

const LIMITS = { maxConcurrentStreams: 20, maxSessionMemory: 256 * 1024, maxHeaderListSize: 8192 };
/** What a connection may hold: its memory bound, an incomplete frame, an unfinished header block. */
const HELD_BOUND = LIMITS.maxSessionMemory + 16_384 + 9 + 2 * LIMITS.maxHeaderListSize;

/** One frame of a sequence: a kind with its fields, encoded later. */
const frameArb = fc.oneof(
  fc.record({
    kind: fc.constant('headers' as const),
    id: fc.integer({ min: 0, max: 41 }),
    flags: fc.constantFrom(
      Flag.END_HEADERS,
      Flag.END_HEADERS | Flag.END_STREAM,
      0,
      Flag.PADDED | Flag.END_HEADERS,
    ),
    extra: fc.dictionary(fc.stringMatching(/^[a-z-]{1,12}$/), fc.string({ maxLength: 40 }), { maxKeys: 4 }),
  }),
  fc.record({
    kind: fc.constant('continuation' as const),
    id: fc.integer({ min: 0, max: 41 }),
    flags: fc.constantFrom(0, Flag.END_HEADERS),
    payload: fc.uint8Array({ maxLength: 32 }),
  }),
  fc.record({
    kind: fc.constant('data' as const),
    id: fc.integer({ min: 0, max: 41 }),
    flags: fc.constantFrom(0, Flag.END_STREAM, Flag.PADDED),
    text: fc.string({ maxLength: 200 }),
    raw: fc.boolean(),
  }),
  fc.record({
    kind: fc.constant('settings' as const),
    flags: fc.constantFrom(0, Flag.ACK),
    entries: fc.array(fc.tuple(fc.integer({ min: 0, max: 8 }), fc.nat()), { maxLength: 40 }),
  }),
  fc.record({
    kind: fc.constant('other' as const),
    type: fc.constantFrom(
      FrameType.PING,
      FrameType.RST_STREAM,
      FrameType.WINDOW_UPDATE,
      FrameType.PRIORITY,
      FrameType.GOAWAY,
      FrameType.PUSH_PROMISE,
      0x0b,
    ),
    id: fc.integer({ min: 0, max: 41 }),
    flags: fc.integer({ min: 0, max: 255 }),
    payload: fc.uint8Array({ maxLength: 16 }),
  }),
);

type FuzzFrame = typeof frameArb extends fc.Arbitrary<infer F> ? F : never;

function encode(f: FuzzFrame): Buffer {
  switch (f.kind) {
    case 'headers': {
      let block = encodeHeaders({ ...REQUEST, ...f.extra });
      if (f.flags & Flag.PADDED) block = Buffer.concat([Buffer.from([3]), block, Buffer.alloc(3)]);
      return frame(FrameType.HEADERS, f.flags, f.id, block);
    }
    case 'continuation':
      return frame(FrameType.CONTINUATION, f.flags, f.id, Buffer.from(f.payload));
    case 'data': {
      const body = f.raw ? Buffer.from(f.text) : textFrame(f.text);
      const payload = f.flags & Flag.PADDED ? Buffer.concat([Buffer.from([2]), body, Buffer.alloc(2)]) : body;
      return frame(FrameType.DATA, f.flags, f.id, payload);
    }
    case 'settings': {
      const b = frame(FrameType.SETTINGS, f.flags, 0);
      return f.flags & Flag.ACK ? b : settingsFrame(f.entries.map(([k, v]) => [k, v >>> 0] as const));
    }
    case 'other':
      return frame(f.type, f.flags, f.id, Buffer.from(f.payload));
  }
}

/** A sequence: its frames, byte flips, and where the stream of bytes is cut into writes. */
const sequenceArb = fc.record({
  frames: fc.array(frameArb, { maxLength: 40 }),
  flips: fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 3 }),
  cuts: fc.array(fc.nat(), { maxLength: 8 }),
});

t.test('random and mutated frame sequences: bytes held and CPU stay bounded', async (t) => {
  const sessions: H2Session[] = [];
  const server = net.createServer((socket) => {
    const s = new H2Session(socket, LIMITS);
    s.on('error', () => undefined);
    // A minimal echo: the request's bytes back, then trailers.
    s.on('stream', (stream: H2Stream) => {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
        stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
        stream.end(Buffer.concat(chunks));
      });
    });
    sessions.push(s);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => server.close());
  const port = (server.address() as net.AddressInfo).port;

  let worstHeld = 0;
  let totalCpuMs = 0;
  let totalFrames = 0;
  await fc.assert(
    fc.asyncProperty(sequenceArb, async ({ frames, flips, cuts }) => {
      const bytes = Buffer.concat([PREFACE, settingsFrame([]), ...frames.map(encode)]);
      for (const [pos, b] of flips)
        bytes[PREFACE.length + (pos % Math.max(1, bytes.length - PREFACE.length))] = b;
      const points = [...new Set(cuts.map((c) => c % bytes.length))].sort((a, b) => a - b);
      const socket = net.connect(port, '127.0.0.1');
      socket.on('error', () => undefined);
      await new Promise((r) => socket.once('connect', r));
      const cpu0 = threadCpuMs();
      let at = 0;
      for (const p of [...points, bytes.length]) {
        if (p <= at) continue;
        socket.write(bytes.subarray(at, p));
        at = p;
        await new Promise((r) => setImmediate(r));
      }
      // The server has read everything once the PING sent last is answered (or the connection is gone,
      // or the sequence left a frame unfinished that swallowed the PING: then it waits for more bytes).
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 500);
        const done = (): void => {
          clearTimeout(timer);
          resolve();
        };
        socket.once('close', done);
        socket.on(
          'data',
          frameSplitter((f) => {
            if (f.type === FrameType.PING && f.flags & Flag.ACK && f.payload.equals(LAST_PING)) done();
          }),
        );
        socket.write(frame(FrameType.PING, 0, 0, LAST_PING));
      });
      const cpuMs = threadCpuMs() - cpu0;
      const session = sessions[sessions.length - 1]!;
      const held = session.destroyed ? 0 : session.bufferedBytes;
      socket.destroy();
      worstHeld = Math.max(worstHeld, held);
      totalCpuMs += cpuMs;
      totalFrames += frames.length;
      if (held > HELD_BOUND) throw new Error(`the connection holds ${held} bytes (bound ${HELD_BOUND})`);
      // One sequence: a generous ceiling that still catches work out of proportion to the input (a GC
      // or a compile of the test's own code can land in any one of them).
      if (cpuMs > 500 + 10 * frames.length)
        throw new Error(`${frames.length} frames cost ${cpuMs.toFixed(1)} ms of CPU`);
      return true;
    }),
    { numRuns: RUNS },
  );
  const perFrame = totalCpuMs / Math.max(1, totalFrames + RUNS);
  t.comment(
    `${RUNS} sequences: most bytes held ${worstHeld}, ${perFrame.toFixed(3)} ms of CPU a frame overall`,
  );
  // Over all sequences (client, server and test in one thread): well under a millisecond a frame.
  t.ok(perFrame < 2, 'the frames cost less than 2 ms of CPU each over all sequences');

  // Still serving: a well-formed call on a new connection.
  const c = net.connect(port, '127.0.0.1');
  t.teardown(() => c.destroy());
  const answer = await new Promise<Buffer>((resolve) => {
    const got: Buffer[] = [];
    c.on('data', (d: Buffer) => {
      got.push(d);
      if (Buffer.concat(got).includes('still here')) resolve(Buffer.concat(got));
    });
    c.write(
      Buffer.concat([
        PREFACE,
        settingsFrame([]),
        frame(FrameType.HEADERS, Flag.END_HEADERS, 1, encodeHeaders(REQUEST)),
        frame(FrameType.DATA, Flag.END_STREAM, 1, textFrame('still here')),
      ]),
    );
  });
  t.ok(answer.includes('still here'), 'a new connection is served after the sequences');
});

t.test('HPACK: random and mutated blocks decode within the bound or fail cleanly', async (t) => {
  const valid = fc
    .dictionary(fc.stringMatching(/^[a-z-]{1,16}$/), fc.string({ maxLength: 300 }), { maxKeys: 12 })
    .map((h) => encodeHeaders(h));
  const blockArb = fc.oneof(
    fc.uint8Array({ maxLength: 2048 }).map((b) => Buffer.from(b)),
    fc
      .tuple(valid, fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 4 }))
      .map(([b, flips]) => {
        const out = Buffer.from(b);
        for (const [pos, v] of flips) if (out.length > 0) out[pos % out.length] = v;
        return out;
      }),
  );
  let totalUs = 0;
  let totalBytes = 0;
  let worstBlockMs = 0;
  fc.assert(
    fc.property(fc.array(blockArb, { minLength: 1, maxLength: 8 }), (blocks) => {
      // One decoder across the blocks of a connection: the dynamic table carries over.
      const decoder = new HpackDecoder();
      for (const block of blocks) {
        const start = process.hrtime.bigint();
        try {
          const fields = decoder.decode(block, 4096);
          if (fields !== null) {
            let size = 0;
            for (let i = 0; i < fields.length; i += 2) size += fields[i]!.length + fields[i + 1]!.length + 32;
            if (size > 4096) throw new Error(`a list of ${size} bytes passed the 4,096 bound`);
          }
        } catch (err) {
          if (!(err instanceof HpackError)) throw err;
        }
        const us = Number(process.hrtime.bigint() - start) / 1000;
        totalUs += us;
        totalBytes += block.length;
        worstBlockMs = Math.max(worstBlockMs, us / 1000);
      }
      return true;
    }),
    { numRuns: RUNS * 5 },
  );
  const usPerByte = totalUs / Math.max(1, totalBytes);
  t.comment(
    `${totalBytes} bytes: ${usPerByte.toFixed(3)} µs a byte; the slowest block ${worstBlockMs.toFixed(1)} ms`,
  );
  t.ok(usPerByte < 5, 'decoding costs less than 5 µs a byte over all blocks');
});
