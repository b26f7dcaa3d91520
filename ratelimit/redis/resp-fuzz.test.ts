// A standing fuzz target for the hand-written RESP reader that asserts resources, not only "no crash":
// random and mutated reply streams (the replies Redis sends on the direct connection, noise, RESP3 types,
// overlong integers and lines), cut at random points into the socket's reads. After each stream: the
// reader threw nothing but RespProtocolError, the bytes it held between reads stayed within its bound,
// and the CPU it cost stayed within a small budget per byte. A reply dripped one byte a read, the costly
// case for a reader that re-joins what it holds, is measured on its own.
//
// CI runs a short pass; `RESP_FUZZ_RUNS=50000 npx tap ratelimit/redis/resp-fuzz.test.ts` a long one.
import t from 'tap';
import fc from 'fast-check';
import { threadCpuMs } from '../../h2grpc/h2/testing.js';
import { MAX_HELD_BYTES, RespProtocolError, RespReplyReader } from './resp-reader.js';

const RUNS = Number(process.env.RESP_FUZZ_RUNS ?? 500);
const SEED = Number(process.env.RESP_FUZZ_SEED ?? 20261129);
/** CPU per byte fed, over all streams (the reader costs well under 0.1 µs a byte). */
const CPU_US_PER_BYTE = 5;

const fragmentArb: fc.Arbitrary<string> = fc.oneof(
  fc.integer({ min: -(2 ** 53), max: 2 ** 53 }).map((v) => `:${v}\r\n`),
  fc.array(fc.nat(), { maxLength: 12 }).map((a) => `*${a.length}\r\n${a.map((v) => `:${v}\r\n`).join('')}`),
  fc.string({ maxLength: 40 }).map((s) => `$${Buffer.byteLength(s)}\r\n${s}\r\n`),
  fc.string({ maxLength: 80 }).map((s) => `-ERR ${s.replace(/[\r\n]/g, ' ')}\r\n`),
  fc.constantFrom('+OK\r\n', '$-1\r\n', '*0\r\n', ',1.5\r\n', '%1\r\n+a\r\n:1\r\n', '#t\r\n', '_\r\n'),
  fc.stringMatching(/^:[0-9]{15,40}$/).map((s) => `${s}\r\n`),
  fc.integer({ min: 1, max: 3 * MAX_HELD_BYTES }).map((n) => `+${'x'.repeat(n)}`),
  fc.integer({ min: 1, max: 3 * MAX_HELD_BYTES }).map((n) => `:${'7'.repeat(n)}`),
  fc.uint8Array({ maxLength: 64 }).map((b) => Buffer.from(b).toString('latin1')),
);

/** A stream of fragments, some bytes flipped, cut into reads at the given offsets. */
const streamArb = fc.record({
  fragments: fc.array(fragmentArb, { minLength: 1, maxLength: 30 }),
  flips: fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 4 }),
  cuts: fc.array(fc.nat(), { maxLength: 40 }),
});

interface Stream {
  fragments: string[];
  flips: [number, number][];
  cuts: number[];
}

function build(s: Stream): Buffer[] {
  const bytes = Buffer.from(s.fragments.join(''), 'latin1');
  for (const [at, v] of s.flips) if (bytes.length > 0) bytes[at % bytes.length] = v;
  const offsets = [...new Set(s.cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
  const reads: Buffer[] = [];
  let from = 0;
  for (const o of offsets) {
    if (o > from) reads.push(bytes.subarray(from, o));
    from = Math.max(from, o);
  }
  if (from < bytes.length) reads.push(bytes.subarray(from));
  return reads;
}

/** Feeds the reads; returns the most bytes held between reads. Throws only what feed threw. */
function feedAll(reads: Buffer[]): number {
  const reader = new RespReplyReader(() => undefined);
  let held = 0;
  for (const r of reads) {
    reader.feed(r);
    held = Math.max(held, reader.heldBytes);
  }
  return held;
}

t.test('random and mutated reply streams: protocol errors only, bounded bytes held and CPU', async (t) => {
  let bytes = 0;
  let mostHeld = 0;
  let refused = 0;
  const cpu0 = threadCpuMs();
  fc.assert(
    fc.property(streamArb, (s) => {
      const reads = build(s);
      for (const r of reads) bytes += r.length;
      try {
        mostHeld = Math.max(mostHeld, feedAll(reads));
      } catch (err) {
        if (!(err instanceof RespProtocolError)) throw err;
        refused++;
      }
      return mostHeld <= MAX_HELD_BYTES;
    }),
    { numRuns: RUNS, seed: SEED },
  );
  const usPerByte = ((threadCpuMs() - cpu0) * 1000) / Math.max(1, bytes);
  t.comment(
    `${RUNS} streams, ${bytes} bytes, ${refused} refused; most held ${mostHeld} B; ${usPerByte.toFixed(3)} µs CPU a byte`,
  );
  t.ok(mostHeld <= MAX_HELD_BYTES, `bytes held between reads within ${MAX_HELD_BYTES}`);
  t.ok(usPerByte < CPU_US_PER_BYTE, `CPU per byte under ${CPU_US_PER_BYTE} µs`);
});

t.test('a reply line dripped a byte a read costs bounded copying, then is refused', async (t) => {
  for (const [name, head, fill] of [
    ['a status line', '+', 'x'],
    ['an error line', '-', 'x'],
    ['an integer', ':', '7'],
  ] as const) {
    const reader = new RespReplyReader(() => undefined);
    const drip = Buffer.from(fill);
    const cpu0 = threadCpuMs();
    let fed = 0;
    let err: unknown;
    try {
      reader.feed(Buffer.from(head));
      for (; fed < 4 * MAX_HELD_BYTES; fed++) reader.feed(drip);
    } catch (e) {
      err = e;
    }
    const ms = threadCpuMs() - cpu0;
    t.type(err, RespProtocolError, `${name}: refused`);
    t.ok(
      fed <= MAX_HELD_BYTES,
      `${name}: refused after ${fed} bytes, within the ${MAX_HELD_BYTES}-byte bound`,
    );
    // At most MAX_HELD_BYTES reads each copying at most MAX_HELD_BYTES: 64 MiB of copying at worst.
    t.ok(ms < 2000, `${name}: ${ms.toFixed(1)} ms of CPU for ${fed} one-byte reads`);
  }
});
