// HPACK decoder and encoder: the RFC 7541 Appendix C examples, round trips against nghttp2 (node:http2) in both
// directions over a raw socket that speaks just enough HTTP/2, every coding error, the header list bound, and
// random input that must end in a result or an HpackError.
import t, { type Test } from 'tap';
import fc from 'fast-check';
import * as http2 from 'node:http2';
import * as net from 'node:net';
import type { AddressInfo } from 'node:net';
import { frameSplitter, type RawFrame } from '../../harness/h2-frames.js';
import { Flag, frame, FrameType } from './frames.js';
import { HpackDecoder, HpackError, encodeHeaders } from './hpack.js';
import { HUFFMAN_CODES, HUFFMAN_CODE_LENGTHS, huffmanDecode } from './huffman.js';

const hex = (s: string): Buffer => Buffer.from(s.replace(/\s+/g, ''), 'hex');
const flat = (pairs: [string, string][]): string[] => pairs.flat();

/** An HPACK integer with an N-bit prefix (mask 2^N - 1) whose first byte carries `first`. */
function int(value: number, mask: number, first: number): number[] {
  if (value < mask) return [first | value];
  const out = [first | mask];
  let v = value - mask;
  while (v >= 0x80) {
    out.push((v & 0x7f) | 0x80);
    v = Math.floor(v / 0x80);
  }
  out.push(v);
  return out;
}

/**
 * Checks the decoder's dynamic table without touching it: indexed fields 62.. (newest first) must decode to
 * `entries`, and the index after the last must be past the tables.
 */
function checkTable(t: Test, d: HpackDecoder, entries: [string, string][], what: string): void {
  const probe = Buffer.from(entries.flatMap((_, i) => int(62 + i, 0x7f, 0x80)));
  t.same(d.decode(probe, Infinity), flat(entries), `${what}: dynamic table, newest first`);
  t.throws(
    () => d.decode(Buffer.from(int(62 + entries.length, 0x7f, 0x80)), Infinity),
    HpackError,
    `${what}: no more entries`,
  );
}

t.test('RFC 7541 C.2: one literal or indexed field each, table size 4096', async (t) => {
  const cases: [string, string, [string, string][], [string, string][]][] = [
    [
      'C.2.1',
      '400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572',
      [['custom-key', 'custom-header']],
      [['custom-key', 'custom-header']],
    ],
    ['C.2.2', '040c 2f73 616d 706c 652f 7061 7468', [[':path', '/sample/path']], []],
    ['C.2.3', '1008 7061 7373 776f 7264 0673 6563 7265 74', [['password', 'secret']], []],
    ['C.2.4', '82', [[':method', 'GET']], []],
  ];
  for (const [name, bytes, fields, table] of cases) {
    const d = new HpackDecoder(4096);
    t.same(d.decode(hex(bytes), Infinity), flat(fields), name);
    checkTable(t, d, table, name);
  }
});

const REQ1: [string, string][] = [
  [':method', 'GET'],
  [':scheme', 'http'],
  [':path', '/'],
  [':authority', 'www.example.com'],
];
const REQ2: [string, string][] = [...REQ1, ['cache-control', 'no-cache']];
const REQ3: [string, string][] = [
  [':method', 'GET'],
  [':scheme', 'https'],
  [':path', '/index.html'],
  [':authority', 'www.example.com'],
  ['custom-key', 'custom-value'],
];
const REQ_TABLES: [string, string][][] = [
  [[':authority', 'www.example.com']],
  [
    ['cache-control', 'no-cache'],
    [':authority', 'www.example.com'],
  ],
  [
    ['custom-key', 'custom-value'],
    ['cache-control', 'no-cache'],
    [':authority', 'www.example.com'],
  ],
];

for (const [section, blocks] of [
  [
    'C.3 (requests without Huffman)',
    [
      '8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d',
      '8286 84be 5808 6e6f 2d63 6163 6865',
      '8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65',
    ],
  ],
  [
    'C.4 (requests with Huffman)',
    [
      '8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff',
      '8286 84be 5886 a8eb 1064 9cbf',
      '8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf',
    ],
  ],
] as const) {
  t.test(`RFC 7541 ${section}: three requests on one decoder`, async (t) => {
    const d = new HpackDecoder(4096);
    [REQ1, REQ2, REQ3].forEach((fields, i) => {
      t.same(d.decode(Uint8Array.from(hex(blocks[i])), Infinity), flat(fields), `request ${i + 1}`);
      checkTable(t, d, REQ_TABLES[i], `after request ${i + 1}`);
    });
  });
}

const DATE1 = 'Mon, 21 Oct 2013 20:13:21 GMT';
const DATE2 = 'Mon, 21 Oct 2013 20:13:22 GMT';
const LOC = 'https://www.example.com';
const COOKIE = 'foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1';
const RESPONSES: [string, string][][] = [
  [
    [':status', '302'],
    ['cache-control', 'private'],
    ['date', DATE1],
    ['location', LOC],
  ],
  [
    [':status', '307'],
    ['cache-control', 'private'],
    ['date', DATE1],
    ['location', LOC],
  ],
  [
    [':status', '200'],
    ['cache-control', 'private'],
    ['date', DATE2],
    ['location', LOC],
    ['content-encoding', 'gzip'],
    ['set-cookie', COOKIE],
  ],
];
const RESPONSE_TABLES: [string, string][][] = [
  [
    ['location', LOC],
    ['date', DATE1],
    ['cache-control', 'private'],
    [':status', '302'],
  ],
  [
    [':status', '307'],
    ['location', LOC],
    ['date', DATE1],
    ['cache-control', 'private'],
  ],
  [
    ['set-cookie', COOKIE],
    ['content-encoding', 'gzip'],
    ['date', DATE2],
  ],
];

for (const [section, blocks] of [
  [
    'C.5 (responses without Huffman)',
    [
      '4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 6c65 2e63 6f6d',
      '4803 3330 37c1 c0bf',
      '88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d 54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049 5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e 3d31',
    ],
  ],
  [
    'C.6 (responses with Huffman)',
    [
      '4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3',
      '4883 640e ffc1 c0bf',
      '88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab 77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07',
    ],
  ],
] as const) {
  t.test(`RFC 7541 ${section}: table size 256, entries evicted`, async (t) => {
    const d = new HpackDecoder(256);
    RESPONSES.forEach((fields, i) => {
      t.same(d.decode(hex(blocks[i]), Infinity), flat(fields), `response ${i + 1}`);
      checkTable(t, d, RESPONSE_TABLES[i], `after response ${i + 1}`);
    });
  });
}

// RFC 7541 Appendix A, as its table lists it: index, name, value.
const APPENDIX_A =
  `1 :authority|2 :method GET|3 :method POST|4 :path /|5 :path /index.html|6 :scheme http|7 :scheme https|
8 :status 200|9 :status 204|10 :status 206|11 :status 304|12 :status 400|13 :status 404|14 :status 500|15 accept-charset|
16 accept-encoding gzip, deflate|17 accept-language|18 accept-ranges|19 accept|20 access-control-allow-origin|21 age|
22 allow|23 authorization|24 cache-control|25 content-disposition|26 content-encoding|27 content-language|
28 content-length|29 content-location|30 content-range|31 content-type|32 cookie|33 date|34 etag|35 expect|36 expires|
37 from|38 host|39 if-match|40 if-modified-since|41 if-none-match|42 if-range|43 if-unmodified-since|44 last-modified|
45 link|46 location|47 max-forwards|48 proxy-authenticate|49 proxy-authorization|50 range|51 referer|52 refresh|
53 retry-after|54 server|55 set-cookie|56 strict-transport-security|57 transfer-encoding|58 user-agent|59 vary|60 via|
61 www-authenticate`
    .split('|')
    .map((row) => {
      const [, index, name, value] = /^\s*(\d+) (\S+) ?(.*)$/.exec(row) ?? [];
      return { index: Number(index), name, value };
    });

t.test('static table: every index of RFC 7541 Appendix A, as a field and as a name', async (t) => {
  t.equal(APPENDIX_A.length, 61);
  const d = new HpackDecoder();
  for (const { index, name, value } of APPENDIX_A) {
    t.same(d.decode(Buffer.from(int(index, 0x7f, 0x80)), Infinity), [name, value], `indexed ${index}`);
    t.same(
      d.decode(Buffer.from([...int(index, 0x0f, 0x00), 0x01, 0x76]), Infinity),
      [name, 'v'],
      `name ${index}`,
    );
    const block = encodeHeaders({ [name]: 'v' });
    t.same(
      block.subarray(0, -2),
      Buffer.from(int(APPENDIX_A.find((e) => e.name === name)?.index ?? 0, 0x0f, 0x00)),
      `encoded by the name's first index (${name})`,
    );
  }
  checkTable(t, d, [], 'nothing indexed');
});

t.test('Huffman table: codes from RFC 7541 Appendix B, a complete code', async (t) => {
  // [symbol, code, bits] rows copied from Appendix B.
  const rows: [number, number, number][] = [
    [0x00, 0x1ff8, 13],
    [0x0a, 0x3ffffffc, 30],
    [0x20, 0x14, 6],
    [0x25, 0x15, 6],
    [0x30, 0x0, 5],
    [0x61, 0x3, 5],
    [0x7b, 0x7ffe, 15],
    [0x7f, 0xffffffc, 28],
    [0x80, 0xfffe6, 20],
    [0xff, 0x3ffffee, 26],
    [256, 0x3fffffff, 30],
  ];
  for (const [sym, code, bits] of rows) {
    t.equal(HUFFMAN_CODE_LENGTHS[sym], bits, `symbol ${sym}: ${bits} bits`);
    t.equal(HUFFMAN_CODES[sym], code, `symbol ${sym}: code ${code.toString(16)}`);
  }
  t.equal(
    HUFFMAN_CODE_LENGTHS.reduce((s, len) => s + 2 ** -len, 0),
    1,
    'Kraft sum 1: every bit string decodes',
  );
});

/** Huffman-codes bytes with the table under test (padding: ones). */
function huffmanEncode(bytes: Uint8Array): Buffer {
  const out: number[] = [];
  let acc = 0;
  let bits = 0;
  for (const b of bytes) {
    const len = HUFFMAN_CODE_LENGTHS[b];
    for (let i = len - 1; i >= 0; i--) {
      acc = (acc << 1) | (Math.floor(HUFFMAN_CODES[b] / 2 ** i) & 1);
      if (++bits === 8) {
        out.push(acc);
        acc = 0;
        bits = 0;
      }
    }
  }
  if (bits > 0) out.push((acc << (8 - bits)) | (0xff >> bits));
  return Buffer.from(out);
}

t.test('Huffman: every byte string decodes back from its code', async () => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 300 }), (bytes) => {
      const coded = huffmanEncode(bytes);
      const dst = Buffer.alloc(Math.ceil((coded.length * 8) / 5));
      const n = huffmanDecode(coded, 0, coded.length, dst, 0);
      return n === bytes.length && dst.subarray(0, n).equals(bytes);
    }),
    { numRuns: 500 },
  );
});

/** A literal field without indexing, literal name, raw name and the given value bytes (a raw or Huffman string). */
const literalValue = (name: string, value: number[], huffman: boolean): Buffer =>
  Buffer.from([
    0x00,
    ...int(name.length, 0x7f, 0),
    ...Buffer.from(name, 'latin1'),
    ...int(value.length, 0x7f, huffman ? 0x80 : 0),
    ...value,
  ]);

t.test('coding errors are HpackErrors, each for its own reason', async (t) => {
  const cases: [string, Buffer, RegExp][] = [
    ['indexed field 0', hex('80'), /index 0/],
    ['indexed field past the static table, dynamic table empty', hex('be'), /index 62 past the tables/],
    ['literal name index past the tables', hex('7e 01 61'), /index 62 past the tables/],
    ['integer with too many continuation bytes', hex('ff ff ff ff ff ff 0f'), /integer too long/],
    ['integer past 2^31', hex('ff ff ff ff ff 0f'), /integer too large/],
    [
      'a long run of continuation bytes',
      Buffer.concat([hex('ff'), Buffer.alloc(1_000_000, 0x80)]),
      /integer too long/,
    ],
    ['integer cut by the end of the block', hex('ff 80'), /integer runs past the end/],
    ['string length past the end', hex('00 05 61'), /string length runs past the end/],
    ['string missing', hex('00'), /string missing/],
    ['Huffman EOS inside a string', literalValue('a', [0xff, 0xff, 0xff, 0xff], true), /EOS/],
    ['Huffman EOS then a symbol', literalValue('a', [0xff, 0xff, 0xff, 0xff, 0xfc], true), /EOS/],
    ['Huffman padding of 8 ones', literalValue('a', [0xff], true), /padding/],
    ['Huffman "a" and 11 bits of padding', literalValue('a', [0x1f, 0xff], true), /padding/],
    ['Huffman padding not all ones', literalValue('a', [0x18], true), /padding/],
    ['table size update above the announced size', hex('3f e2 1f'), /size update to 4097, above the 4096/],
    ['table size update after a field', hex('82 20'), /size update after a header field/],
  ];
  for (const [what, block, message] of cases) {
    t.throws(() => new HpackDecoder(4096).decode(block, Infinity), { name: 'HpackError', message }, what);
  }
  // The valid neighbours of those cases decode.
  const d = new HpackDecoder(4096);
  t.same(
    d.decode(literalValue('a', [0x1f], true), Infinity),
    ['a', 'a'],
    'Huffman "a" with 3 bits of padding',
  );
  t.same(d.decode(literalValue('a', [], true), Infinity), ['a', ''], 'empty Huffman string');
  t.same(
    d.decode(hex('3f e1 1f 20 3f e1 1f 82'), Infinity),
    [':method', 'GET'],
    'size updates to 4096, 0, 4096 at the start',
  );
});

t.test('a dynamic table size update evicts; a smaller one than announced bounds later entries', async (t) => {
  const d = new HpackDecoder(4096);
  t.same(d.decode(hex('400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572'), Infinity), [
    'custom-key',
    'custom-header',
  ]);
  checkTable(t, d, [['custom-key', 'custom-header']], 'before');
  t.same(d.decode(hex('20'), Infinity), [], 'size update to 0');
  checkTable(t, d, [], 'after the update to 0');
  // Limit 60 (one 55-byte entry fits, two do not): the second entry evicts the first.
  t.same(d.decode(hex('3f 1d 40 01 61 17' + '62'.repeat(23) + '40 01 63 17' + '64'.repeat(23)), Infinity), [
    'a',
    'b'.repeat(23),
    'c',
    'd'.repeat(23),
  ]);
  checkTable(t, d, [['c', 'd'.repeat(23)]], 'limit 60');
  // An entry larger than the table empties it and is not added (RFC 7541 4.4).
  t.same(d.decode(hex('40 01 65 40' + '66'.repeat(64)), Infinity), ['e', 'f'.repeat(64)]);
  checkTable(t, d, [], 'after an entry larger than the table');
});

t.test('the header list bound: null, and the table stays in step for the next block', async (t) => {
  const c21 = hex('400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572'); // 10 + 13 + 32 = 55
  t.same(new HpackDecoder().decode(c21, 55), ['custom-key', 'custom-header'], 'exactly the bound');
  t.equal(new HpackDecoder().decode(c21, 54), null, 'one byte past the bound');
  const d = new HpackDecoder();
  // Over the bound at the first field; the rest (an indexed field, two entries added to the table, a literal
  // without indexing, a Huffman one) is still decoded and the entries still added.
  const rest = Buffer.concat([
    hex('82'),
    c21,
    hex('40 01 78 81 1f'),
    literalValue('y', [...Buffer.from('z'.repeat(500))], false),
  ]);
  t.equal(
    d.decode(Buffer.concat([literalValue('big', [...Buffer.from('v'.repeat(100))], false), rest]), 100),
    null,
  );
  checkTable(
    t,
    d,
    [
      ['x', 'a'],
      ['custom-key', 'custom-header'],
    ],
    'entries added past the bound',
  );
  t.same(
    d.decode(hex('be bf 82'), 1000),
    ['x', 'a', 'custom-key', 'custom-header', ':method', 'GET'],
    'next block',
  );
  // Over the bound in the middle, with an indexed field.
  t.equal(d.decode(hex('bf bf bf'), 55 * 2), null, 'three 55-byte fields against 110');
  t.same(
    d.decode(hex('bf bf'), 55 * 2),
    ['custom-key', 'custom-header', 'custom-key', 'custom-header'],
    'two fit',
  );
  // Past the bound, an entry larger than the table still empties it.
  const huge = Buffer.from([0x40, 0x01, 0x68, ...int(5000, 0x7f, 0), ...Buffer.alloc(5000, 0x69)]);
  t.equal(d.decode(huge, 10), null, 'an entry of 5033 bytes against a bound of 10');
  checkTable(t, d, [], 'the table emptied by an entry larger than it');
  // A coding error after the bound is still an error.
  t.throws(() => d.decode(Buffer.concat([c21, hex('80')]), 10), HpackError, 'error past the bound');
});

t.test(
  'random blocks end in a result or an HpackError, never anything else or a hang',
  { timeout: 120_000 },
  async () => {
    const fragments = [
      '82',
      'be',
      'bf',
      '40 01 61 01 62',
      '7f 00',
      '3f e1 1f',
      '20',
      '3f e2 1f',
      '00 01 61 81 1f',
      '10 01 61 84 ff ff ff ff',
      'ff ff ff ff ff',
      '0f 2f 02 ff 7f',
    ].map(hex);
    const block = fc.oneof(
      fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b)),
      fc
        .array(
          fc.oneof(
            fc.constantFrom(...fragments),
            fc.uint8Array({ maxLength: 8 }).map((b) => Buffer.from(b)),
          ),
          { maxLength: 12 },
        )
        .map((parts) => Buffer.concat(parts)),
    );
    const shared = new HpackDecoder(256);
    fc.assert(
      fc.property(block, fc.integer({ min: 0, max: 400 }), (b, bound) => {
        for (const d of [shared, new HpackDecoder()]) {
          try {
            const r = d.decode(b, bound);
            if (r !== null && (r.length % 2 !== 0 || r.some((s) => typeof s !== 'string'))) return false;
          } catch (err) {
            if (!(err instanceof HpackError)) throw err;
          }
        }
        return true;
      }),
      { numRuns: 5000 },
    );
  },
);

t.test('encodeHeaders: literal fields without indexing, static names by index, :status first', async (t) => {
  const block = encodeHeaders({ 'content-type': 'application/grpc', ':status': 200, 'grpc-status': 0 });
  t.equal(
    block.toString('hex'),
    '08033230300f10106170706c69636174696f6e2f67727063000b677270632d7374617475730130',
    '":status" index 8, "content-type" index 31 (0f 10), "grpc-status" a literal name',
  );
  t.same(new HpackDecoder().decode(block, Infinity), [
    ':status',
    '200',
    'content-type',
    'application/grpc',
    'grpc-status',
    '0',
  ]);
  t.same(encodeHeaders({}), Buffer.alloc(0), 'no fields');
  fc.assert(
    fc.property(
      fc.dictionary(
        fc.oneof(
          fc.constantFrom(':status', 'content-type', 'www-authenticate', ':authority', 'user-agent'),
          fc.stringMatching(/^[a-z0-9-]{1,300}$/),
        ),
        fc.oneof(
          fc.nat(),
          fc.string({
            unit: fc.integer({ min: 0x20, max: 0xff }).map((c) => String.fromCharCode(c)),
            maxLength: 400,
          }),
        ),
      ),
      (headers) => {
        const fields = Object.entries(headers).map(([n, v]) => [n, String(v)]);
        const status = fields.findIndex(([n]) => n === ':status');
        if (status > 0) fields.unshift(...fields.splice(status, 1));
        const d = new HpackDecoder(0);
        t.same(d.decode(encodeHeaders(headers), Infinity), fields.flat());
        checkTable(t, d, [], 'never indexed');
      },
    ),
    { numRuns: 300 },
  );
});

// --- A raw HTTP/2 peer: enough framing to read a client's header blocks and answer with ours. ---

type Frame = RawFrame;
const { DATA, HEADERS, RST_STREAM, SETTINGS, CONTINUATION } = FrameType;
const { END_STREAM, ACK, END_HEADERS, PADDED, PRIORITY } = Flag;

/** Reads the client preface, then calls onFrame per frame; acknowledges the client's SETTINGS. */
function readFrames(socket: net.Socket, onFrame: (f: Frame) => void): void {
  socket.on(
    'data',
    frameSplitter((f) => {
      if (f.type === SETTINGS && !(f.flags & ACK)) socket.write(frame(SETTINGS, ACK, 0));
      onFrame(f);
    }, true),
  );
}

/** Joins HEADERS + CONTINUATION payloads into header blocks (padding and priority removed). */
function headerBlocks(onBlock: (stream: number, block: Buffer) => void): (f: Frame) => void {
  let parts: Buffer[] = [];
  return (f) => {
    if (f.type === HEADERS) {
      let p = f.payload;
      const pad = f.flags & PADDED ? p[0] : 0;
      if (f.flags & PADDED) p = p.subarray(1);
      if (f.flags & PRIORITY) p = p.subarray(5);
      parts = [p.subarray(0, p.length - pad)];
    } else if (f.type === CONTINUATION) parts.push(f.payload);
    else return;
    if (f.flags & END_HEADERS) onBlock(f.stream, Buffer.concat(parts));
  };
}

async function listen(
  onSocket: (s: net.Socket) => void,
): Promise<{ address: string; close: () => Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => undefined);
    onSocket(s);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    address: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

// Field values node:http2 accepts: printable ASCII, tab and space inside, latin1 0x80-0xff.
const latin1Char = fc
  .oneof(
    { weight: 6, arbitrary: fc.integer({ min: 0x21, max: 0x7e }) },
    { weight: 1, arbitrary: fc.constant(0x20) },
    { weight: 1, arbitrary: fc.integer({ min: 0x80, max: 0xff }) },
  )
  .map((c) => String.fromCharCode(c));
const rareLatin1 = fc.oneof(
  { weight: 30, arbitrary: fc.constantFrom(...'aceiost012'.split('')) },
  { weight: 1, arbitrary: fc.integer({ min: 0x80, max: 0xff }).map((c) => String.fromCharCode(c)) },
);
const headerValue = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.constantFrom(
      'tenant-a',
      'tenant-b',
      'Bearer eyJhbGciOiJIUzI1NiJ9.e30.x',
      '10.0.0.1',
      'caf\u00e9 cr\u00e8me',
    ),
  },
  { weight: 4, arbitrary: fc.string({ unit: latin1Char, minLength: 1, maxLength: 60 }) },
  { weight: 1, arbitrary: fc.string({ unit: latin1Char, minLength: 1025, maxLength: 3000 }) },
  {
    weight: 1,
    arbitrary: fc.string({
      unit: fc.integer({ min: 0x80, max: 0xff }).map((c) => String.fromCharCode(c)),
      minLength: 1,
      maxLength: 40,
    }),
  },
  // Short-coded letters with a rare latin1 byte: shorter Huffman-coded, so nghttp2 codes the long codes too.
  { weight: 3, arbitrary: fc.string({ unit: rareLatin1, minLength: 20, maxLength: 200 }) },
);
const headerName = fc.oneof(
  fc.constantFrom('x-tenant', 'x-user', 'x-request-id', 'authorization', 'accept', 'x-envoy-original-path'),
  fc.stringMatching(/^[a-z0-9][a-z0-9-]{0,30}$/).map((s) => `x-${s}`),
);
const headerList = fc.record({
  fields: fc.uniqueArray(fc.tuple(headerName, fc.array(headerValue, { minLength: 1, maxLength: 3 })), {
    selector: ([n]) => n,
    maxLength: 12,
  }),
  sensitive: fc.array(fc.nat(), { maxLength: 3 }),
});

function multiset(pairs: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < pairs.length; i += 2)
    if (!pairs[i].startsWith(':')) out.push(`${pairs[i]}\u0000${pairs[i + 1]}`);
  return out.sort();
}

t.test(
  'decodes what nghttp2 encodes: many requests on one connection, table size 256',
  { timeout: 240_000 },
  async (t) => {
    const decoder = new HpackDecoder(256);
    // Requests go one at a time: the next header block (or why none came) settles the waiting one.
    let settle: ((r: string[] | Error) => void) | null = null;
    const answer = (r: string[] | Error): void => {
      settle?.(r);
      settle = null;
    };
    let continuations = 0;
    const server = await listen((socket) => {
      socket.write(frame(SETTINGS, 0, 0, Buffer.from([0x00, 0x01, 0x00, 0x00, 0x01, 0x00]))); // HEADER_TABLE_SIZE 256
      socket.on('close', () => answer(new Error('the connection closed')));
      const onBlock = headerBlocks((stream, block) => {
        try {
          answer(decoder.decode(block, Infinity) ?? new Error('null: no bound was given'));
        } catch (err) {
          answer(err as Error);
          socket.destroy();
        }
        socket.write(frame(RST_STREAM, 0, stream, Buffer.from([0, 0, 0, 8]))); // CANCEL
      });
      readFrames(socket, (f) => {
        if (f.type === CONTINUATION) continuations++;
        onBlock(f);
      });
    });
    t.teardown(server.close);
    const session = http2.connect(server.address, { maxSendHeaderBlockLength: 1 << 20 });
    t.teardown(() => session.destroy());
    session.on('error', () => undefined);
    await new Promise<void>((r) => session.once('remoteSettings', () => r()));

    let n = 0;
    const send = async (headers: http2.OutgoingHttpHeaders): Promise<string[]> => {
      const path = `/r/${n++}`;
      const got = new Promise<string[] | Error>((r) => (settle = r));
      const req = session.request({ ...headers, ':path': path }, { endStream: true });
      req.on('error', () => undefined);
      req.resume();
      const deadline = setTimeout(() => answer(new Error(`no header block for ${path} within 60 s`)), 60_000);
      const fields = await got;
      clearTimeout(deadline);
      if (fields instanceof Error) throw fields;
      t.equal(fields[fields.indexOf(':path') + 1], path, ':path');
      const names = fields.filter((_, i) => i % 2 === 0);
      const firstRegular = names.findIndex((name) => !name.startsWith(':'));
      t.ok(
        firstRegular === -1 || names.slice(firstRegular).every((name) => !name.startsWith(':')),
        'pseudo-headers first',
      );
      t.equal(fields[fields.indexOf(':method') + 1], 'GET', ':method');
      return fields;
    };

    await fc.assert(
      fc.asyncProperty(headerList, async ({ fields, sensitive }) => {
        const headers: http2.OutgoingHttpHeaders = {};
        const sent: string[] = [];
        for (const [name, values] of fields) {
          const single = !name.startsWith('x-');
          headers[name] = single ? values[0] : values;
          for (const v of single ? values.slice(0, 1) : values) sent.push(name, v);
        }
        if (fields.length)
          (headers as Record<symbol, string[]>)[http2.sensitiveHeaders] = sensitive.map(
            (i) => fields[i % fields.length][0],
          );
        const got = await send(headers);
        t.same(multiset(got), multiset(sent), 'the fields sent, as sent');
      }),
      { numRuns: 300, endOnFailure: true },
    );

    // Every request field of the static table, so that nghttp2 refers to its entries by index.
    const statics: http2.OutgoingHttpHeaders = {};
    for (const { name, value } of APPENDIX_A)
      if (!name.startsWith(':') && name !== 'transfer-encoding' && !(name in statics)) statics[name] = value;
    const gotStatics = await send(statics);
    t.same(
      multiset(gotStatics),
      multiset(Object.entries(statics).flat() as string[]),
      'the static table fields',
    );

    // One block too big for a frame: HEADERS plus CONTINUATIONs.
    const big = { 'x-big-a': 'a'.repeat(12_000), 'x-big-b': 'b\u00e9'.repeat(8000), 'x-after': 'tenant-a' };
    const got = await send(big);
    t.same(multiset(got), multiset(Object.entries(big).flat()), 'a block split across frames');
    t.ok(continuations > 0, `${continuations} CONTINUATION frames seen`);
  },
);

t.test(
  'nghttp2 accepts the blocks encodeHeaders writes: response headers, then trailers',
  { timeout: 60_000 },
  async (t) => {
    const longMessage = `a b% ${'m'.repeat(300)}`; // a length past one byte's prefix
    const requests = new HpackDecoder();
    const server = await listen((socket) => {
      socket.write(frame(SETTINGS, 0, 0));
      readFrames(
        socket,
        headerBlocks((stream, block) => {
          let fields: string[];
          try {
            fields = requests.decode(block, Infinity) ?? [];
          } catch {
            socket.destroy(); // the calls then fail
            return;
          }
          const long = fields[fields.indexOf(':path') + 1] === '/long';
          socket.write(
            frame(
              HEADERS,
              END_HEADERS,
              stream,
              encodeHeaders({ ':status': 200, 'content-type': 'application/grpc' }),
            ),
          );
          socket.write(frame(DATA, 0, stream, Buffer.from([0, 0, 0, 0, 0])));
          const trailers: Record<string, string | number> = long
            ? { 'grpc-status': 14, 'grpc-message': longMessage, 'x-custom-trailer': 'v' }
            : { 'grpc-status': '0', 'grpc-message': 'a b%' };
          socket.write(frame(HEADERS, END_HEADERS | END_STREAM, stream, encodeHeaders(trailers)));
        }),
      );
    });
    t.teardown(server.close);
    const session = http2.connect(server.address);
    t.teardown(() => session.destroy());
    session.on('error', () => undefined);
    type Answer = { headers: http2.IncomingHttpHeaders; trailers: http2.IncomingHttpHeaders; body: Buffer };
    const call = (path: string): Promise<Answer> =>
      new Promise((resolve, reject) => {
        const req = session.request(
          { ':method': 'POST', ':path': path, 'content-type': 'application/grpc', te: 'trailers' },
          { endStream: true },
        );
        let headers: http2.IncomingHttpHeaders = {};
        let trailers: http2.IncomingHttpHeaders = {};
        const chunks: Buffer[] = [];
        req.on('response', (h) => (headers = h));
        req.on('trailers', (h) => (trailers = h));
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('error', reject);
        req.on('close', () => resolve({ headers, trailers, body: Buffer.concat(chunks) }));
      });
    for (let i = 0; i < 3; i++) {
      const { headers, trailers, body } = await call('/pb.lyft.ratelimit.RateLimitService/ShouldRateLimit');
      t.equal(headers[':status'], 200, `call ${i + 1}: :status`);
      t.equal(headers['content-type'], 'application/grpc', `call ${i + 1}: content-type`);
      t.equal(trailers['grpc-status'], '0', `call ${i + 1}: grpc-status`);
      t.equal(trailers['grpc-message'], 'a b%', `call ${i + 1}: grpc-message`);
      t.equal(body.length, 5, `call ${i + 1}: the message between them`);
    }
    const { trailers } = await call('/long');
    t.equal(trailers['grpc-status'], '14', 'a number written as its decimal string');
    t.equal(trailers['grpc-message'], longMessage, 'a 305-byte value');
    t.equal(trailers['x-custom-trailer'], 'v', 'a name outside the static table');
  },
);
