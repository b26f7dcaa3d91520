// The RESP reply reader of the direct counting connection: every split of the byte stream into chunks
// gives the same replies in the same order; other reply types and overlong lines are protocol errors.
import fc from 'fast-check';
import t from 'tap';
import { RespProtocolError, RespReplyReader, respAuth, respCommand3 } from './resp-reader.js';

type Reply = { v: number | string | number[]; err: boolean; bulk?: boolean };

const encode = (r: Reply): string =>
  Array.isArray(r.v)
    ? `*${r.v.length}\r\n${r.v.map((x) => `:${x}\r\n`).join('')}`
    : typeof r.v === 'number'
      ? `:${r.v}\r\n`
      : r.bulk
        ? `$${Buffer.byteLength(r.v)}\r\n${r.v}\r\n`
        : `${r.err ? '-' : '+'}${r.v}\r\n`;

const replyArb: fc.Arbitrary<Reply> = fc.oneof(
  fc.integer({ min: -(2 ** 53 - 1), max: 2 ** 53 - 1 }).map((v) => ({ v, err: false })),
  fc
    .array(fc.integer({ min: -(2 ** 53 - 1), max: 2 ** 53 - 1 }), { maxLength: 9 })
    .map((v) => ({ v, err: false })),
  fc.string({ unit: 'grapheme', maxLength: 60 }).map((v) => ({ v, err: false, bulk: true })),
  fc
    .tuple(fc.string({ unit: 'grapheme' }), fc.boolean())
    .map(([s, err]) => ({ v: s.replace(/[\r\n]/g, ' '), err })),
);

t.test('any chunking of a reply stream gives the same replies', async (t) => {
  fc.assert(
    fc.property(
      fc.array(replyArb, { maxLength: 40 }),
      fc.array(fc.nat(), { maxLength: 20 }),
      (replies, cuts) => {
        const bytes = Buffer.from(replies.map(encode).join(''), 'utf8');
        const at = [...new Set(cuts.map((c) => (bytes.length ? c % bytes.length : 0)))].sort((a, b) => a - b);
        const got: Reply[] = [];
        const want = replies.map(({ v, err }) => ({ v, err }));
        const r = new RespReplyReader((v, err) => got.push({ v, err }));
        let from = 0;
        for (const c of [...at, bytes.length]) {
          r.feed(bytes.subarray(from, c));
          from = c;
        }
        t.same(got, want);
        return true;
      },
    ),
    { numRuns: 300 },
  );
});

t.test(
  'a bulk reply, an array of anything but integers, a malformed integer and an overlong line are protocol errors',
  async (t) => {
    const feed = (s: string | Buffer) => () => new RespReplyReader(() => undefined).feed(Buffer.from(s));
    t.throws(feed('$5000\r\n'), RespProtocolError, 'a long bulk string');
    t.throws(feed('*1\r\n$1\r\na\r\n'), RespProtocolError, 'a bulk string inside an array');
    t.throws(feed('*2\r\n*1\r\n:1\r\n'), RespProtocolError, 'a nested array');
    t.throws(feed('*2\r\n+OK\r\n'), RespProtocolError, 'a status inside an array');
    t.throws(feed('*-1\r\n'), RespProtocolError, 'a null array');
    t.throws(feed(':12x\r\n'), RespProtocolError);
    t.throws(feed(':\r\n'), RespProtocolError);
    t.throws(feed('+ok\rx'), RespProtocolError);
    t.throws(feed(Buffer.alloc(70_000, 0x61).fill('+', 0, 1)), /too long/);
    // RESP3 types Redis never sends on a RESP2 connection.
    for (const r of [',1.5\r\n', '%1\r\n+a\r\n:1\r\n', '_\r\n', '#t\r\n', '(12345\r\n', '~1\r\n:1\r\n']) {
      t.throws(feed(r), RespProtocolError, JSON.stringify(r));
    }
    t.throws(feed(':12345678901234567890\r\n'), RespProtocolError, 'an integer past 64 bits');
    const got: unknown[] = [];
    new RespReplyReader((v) => got.push(v)).feed(Buffer.from(':9223372036854775807\r\n:-5\r\n'));
    // The largest as a double near 2^63 (not exact past 2^53): its range is checked where it is used.
    t.ok((got[0] as number) > 9.2e18 && (got[0] as number) < 1e19, 'the largest 64-bit integer is read');
    t.equal(got[1], -5, 'a negative integer is read (a count below zero is refused where it is used)');
  },
);

t.test('commands are length-prefixed in bytes, so any key is sent as it is', async (t) => {
  t.equal(respCommand3('INCRBY', 'k', 3), '*3\r\n$6\r\nINCRBY\r\n$1\r\nk\r\n$1\r\n3\r\n');
  t.equal(respCommand3('EXPIRE', 'ü\r\n', 60), '*3\r\n$6\r\nEXPIRE\r\n$4\r\nü\r\n\r\n$2\r\n60\r\n');
  t.equal(respAuth(undefined, 'pw'), '*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n');
  t.equal(respAuth('u', 'pä'), '*3\r\n$4\r\nAUTH\r\n$1\r\nu\r\n$3\r\npä\r\n');
});
