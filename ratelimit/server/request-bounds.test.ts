// Bounded work per request, through the real listeners of a started service: a request past one of
// the REQUEST_MAX_* bounds is refused with INVALID_ARGUMENT (HTTP 400) naming the bound and its
// setting, a compressed request is refused as soon as its inflated size passes
// GRPC_MAX_DECOMPRESSED_MSG_SIZE, a /json body past HTTP_MAX_BODY_BYTES is refused, and /json reads
// every body through one parser (bytes that are not UTF-8 are refused whatever the content type). A
// victim's normal request made while the attacks run is answered and counted as usual.
import t from 'tap';
import * as grpc from '@grpc/grpc-js';
import { createGzip, deflateSync, gzipSync } from 'node:zlib';
import { SHOULD_RATE_LIMIT_PATH } from '../../proto/index.js';
import { compressedCall } from '../../harness/grpc-raw.js';
import { descriptor, roomInWindow, startTestApp, type TestApp } from '../test-support.js';

const CONFIG =
  'domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: minute, requests_per_unit: 1000 }\n' +
  '  - key: victim\n    rate_limit: { unit: minute, requests_per_unit: 100 }\n';

// --- hand-built RateLimitRequest bytes (the attacks are shaped byte by byte) -----------------------
function varint(n: number | bigint): Buffer {
  let v = BigInt(n);
  const out: number[] = [];
  while (v >= 0x80n) {
    out.push(Number(v & 0x7fn) | 0x80);
    v >>= 7n;
  }
  out.push(Number(v));
  return Buffer.from(out);
}
const ld = (field: number, bytes: Buffer) =>
  Buffer.concat([Buffer.from([(field << 3) | 2]), varint(bytes.length), bytes]);
const str = (field: number, s: string) => ld(field, Buffer.from(s));
const entry = (k: string, v: string) => ld(1, Buffer.concat([str(1, k), str(2, v)]));
function desc(entries: Buffer[], hits?: bigint): Buffer {
  const parts = [...entries];
  if (hits !== undefined) parts.push(ld(3, Buffer.concat([Buffer.from([0x08]), varint(hits)])));
  return ld(2, Buffer.concat(parts));
}
function request(descriptors: Buffer[], opts: { domain?: string; hits?: number } = {}): Buffer {
  const parts = [str(1, opts.domain ?? 'd'), ...descriptors];
  if (opts.hits !== undefined) parts.push(Buffer.concat([Buffer.from([0x18]), varint(opts.hits)]));
  return Buffer.concat(parts);
}
/** `n` descriptors k=v, repeated bytes (the 200,000-descriptor attack at n = 200,000). */
const manyDescriptors = (n: number) => request(Array<Buffer>(n).fill(desc([entry('k', 'v')])));

type Answer = { code: number; details: string; body?: Buffer };

function rawCall(client: grpc.Client, bytes: Buffer): Promise<Answer> {
  return new Promise((resolve) =>
    client.makeUnaryRequest(
      SHOULD_RATE_LIMIT_PATH,
      (b: Buffer) => b,
      (b: Buffer) => b,
      bytes,
      (err, body) =>
        resolve(
          err ? { code: err.code, details: err.details } : { code: 0, details: '', body: body as Buffer },
        ),
    ),
  );
}

/** A victim's request while the attacks run: answered OK, counted in its own key as usual. */
async function victim(svc: TestApp, value: string): Promise<void> {
  const r = await svc.call({ domain: 'd', descriptors: [descriptor(['victim', value])] });
  if (r.overallCode !== 'OK' || r.statuses[0]?.limitRemaining !== 99)
    throw new Error(`victim answered ${JSON.stringify(r)}`);
}

t.test(
  'gRPC: each REQUEST_MAX_* bound refused with INVALID_ARGUMENT naming it; a victim is served',
  async (t) => {
    await roomInWindow();
    const svc = await startTestApp({
      files: { 'd.yaml': CONFIG },
      env: {
        REQUEST_MAX_DESCRIPTORS: '4',
        REQUEST_MAX_DESCRIPTOR_ENTRIES: '3',
        REQUEST_MAX_KEY_BYTES: '16',
        REQUEST_MAX_VALUE_BYTES: '32',
        REQUEST_MAX_HITS_ADDEND: '1000',
      },
    });
    t.teardown(() => svc.close());
    const client = new grpc.Client(svc.grpcAddress, grpc.credentials.createInsecure());
    t.teardown(() => client.close());

    const e = entry('k', 'v');
    const atBounds: [string, Buffer][] = [
      ['4 descriptors', request(Array<Buffer>(4).fill(desc([e])))],
      ['3 entries', request([desc([e, entry('a', 'b'), entry('c', 'd')])])],
      ['a 16-byte key and domain', request([desc([e, entry('k'.repeat(16), 'v')])], { domain: 'd' })],
      ['a 32-byte value', request([desc([entry('k', 'é'.repeat(16))])])],
      ['hits_addend 1000', request([desc([e], 1000n)], { hits: 1000 })],
    ];
    for (const [what, bytes] of atBounds) {
      const r = await rawCall(client, bytes);
      t.equal(r.code, grpc.status.OK, `at the bound (${what}): decided (${r.details})`);
    }
    const past: [string, Buffer, RegExp][] = [
      [
        '5 descriptors',
        request(Array<Buffer>(5).fill(desc([e]))),
        /more than 4 descriptors.*REQUEST_MAX_DESCRIPTORS/,
      ],
      ['200,000 descriptors', manyDescriptors(200_000), /more than 4 descriptors.*REQUEST_MAX_DESCRIPTORS/],
      [
        '4 entries',
        request([desc([e, e, e, e])]),
        /descriptors\[0\]: more than 3 entries.*REQUEST_MAX_DESCRIPTOR_ENTRIES/,
      ],
      [
        'a 17-byte key',
        request([desc([e]), desc([entry('k'.repeat(17), 'v')])]),
        /descriptors\[1\]\.entries\[0\]\.key: 17 bytes, more than 16.*REQUEST_MAX_KEY_BYTES/,
      ],
      [
        'a 17-byte domain',
        request([desc([e])], { domain: 'd'.repeat(17) }),
        /domain: 17 bytes.*REQUEST_MAX_KEY_BYTES/,
      ],
      [
        'a 33-byte value (UTF-8 bytes, not characters)',
        request([desc([entry('k', 'é'.repeat(16) + 'x')])]),
        /entries\[0\]\.value: 33 bytes, more than 32.*REQUEST_MAX_VALUE_BYTES/,
      ],
      [
        'descriptor hits_addend 1001',
        request([desc([e], 1001n)]),
        /descriptors\[0\]\.hits_addend: 1001 is out of range.*REQUEST_MAX_HITS_ADDEND/,
      ],
      [
        'request hits_addend 1001',
        request([desc([e])], { hits: 1001 }),
        /hits_addend: 1001 is out of range.*REQUEST_MAX_HITS_ADDEND/,
      ],
    ];
    // The attacks at once, with a victim's request among them.
    const victims = Promise.all([victim(svc, 'a'), victim(svc, 'b')]);
    const answers = await Promise.all(past.map(([, bytes]) => rawCall(client, bytes)));
    await victims;
    t.pass('the victim requests made during the attacks were answered and counted');
    past.forEach(([what, , message], i) => {
      t.equal(answers[i]!.code, grpc.status.INVALID_ARGUMENT, `${what}: INVALID_ARGUMENT`);
      t.match(answers[i]!.details, message, `${what}: names the bound`);
    });
    const stats = svc.app.stats.snapshot();
    t.equal(stats['ratelimit.service.call.should_rate_limit.redis_error'] ?? 0, 0, 'no cache error counted');
  },
);

t.test(
  'gRPC defaults: 64 descriptors decided; 65, 200,000 and millions of tiny fields refused',
  async (t) => {
    const svc = await startTestApp({ files: { 'd.yaml': CONFIG } });
    t.teardown(() => svc.close());
    const client = new grpc.Client(svc.grpcAddress, grpc.credentials.createInsecure());
    t.teardown(() => client.close());
    t.equal((await rawCall(client, manyDescriptors(64))).code, grpc.status.OK);
    for (const n of [65, 200_000]) {
      const r = await rawCall(client, manyDescriptors(n));
      t.equal(r.code, grpc.status.INVALID_ARGUMENT, `${n}: INVALID_ARGUMENT`);
      t.match(r.details, /more than 64 descriptors in one request \(REQUEST_MAX_DESCRIPTORS\)/);
    }
    // ~4 MB of two-byte fields the decoder would otherwise walk one by one: unknown ones, and one
    // descriptor's limit repeated (each merged into the last).
    const fill = (bytes: number[]) => Buffer.alloc(4_000_000, Buffer.from(bytes));
    const walks: [string, Buffer][] = [
      ['2,000,000 unknown fields', Buffer.concat([request([desc([entry('k', 'v')])]), fill([0x78, 0x01])])],
      ['a limit repeated 2,000,000 times', request([desc([entry('k', 'v'), fill([0x12, 0x00])])])],
    ];
    for (const [what, bytes] of walks) {
      const r = await rawCall(client, bytes);
      t.equal(r.code, grpc.status.INVALID_ARGUMENT, `${what}: INVALID_ARGUMENT`);
      t.match(r.details, /more than 13376 protobuf fields in one request \(.*REQUEST_MAX_DESCRIPTORS/);
    }
    // A request at the bounds is far from that: 64 descriptors of 32 entries, each with a limit.
    const e32 = Array<Buffer>(32).fill(entry('k', 'v'));
    const limit = ld(2, Buffer.from([0x08, 0x05, 0x10, 0x02]));
    const full = rawCall(client, request(Array<Buffer>(64).fill(desc([...e32, limit], 1n)), { hits: 1 }));
    t.equal((await full).code, grpc.status.OK, '64 descriptors of 32 entries and a limit: decided');
  },
);

/** A gzip stream of `mib` MiB of zeros, made chunk by chunk (never the whole inflated size in memory). */
async function gzipZeros(mib: number): Promise<Buffer> {
  const z = createGzip({ level: 9 });
  const out: Buffer[] = [];
  z.on('data', (c: Buffer) => out.push(c));
  const zeros = Buffer.alloc(1024 * 1024);
  for (let i = 0; i < mib; i++) if (!z.write(zeros)) await new Promise((r) => z.once('drain', r));
  await new Promise<void>((r) => z.end(r));
  return Buffer.concat(out);
}

t.test('compressed requests: refused while inflating past GRPC_MAX_DECOMPRESSED_MSG_SIZE', async (t) => {
  await roomInWindow();
  const svc = await startTestApp({ files: { 'd.yaml': CONFIG } });
  t.teardown(() => svc.close());
  const address = svc.grpcAddress;

  // Under the bound, gzip and deflate: decided as the same message uncompressed would be.
  const small = request([desc([entry('k', 'z')])]);
  for (const [enc, bytes] of [
    ['gzip', gzipSync(small)],
    ['deflate', deflateSync(small)],
  ] as const) {
    const r = await compressedCall(address, enc, bytes);
    t.equal(r.code, 0, `${enc} under the bound: OK (${r.details})`);
  }

  // The attack of a few KB that inflates to ~3 MiB of descriptors: under GRPC_MAX_RECV_MSG_SIZE,
  // over the 64 KiB default of GRPC_MAX_DECOMPRESSED_MSG_SIZE.
  const attack = gzipSync(manyDescriptors(150_000), { level: 9 });
  t.ok(attack.length < 64 * 1024, `the attack is ${attack.length} bytes compressed`);
  // A bomb: 512 MiB of zeros in well under 1 MiB.
  const bomb = await gzipZeros(512);
  t.ok(bomb.length < 1024 * 1024, `the bomb is ${bomb.length} bytes compressed`);

  const rssBefore = process.memoryUsage().rss;
  const victims = Promise.all([victim(svc, 'c'), victim(svc, 'd')]);
  const answers = await Promise.all([
    compressedCall(address, 'gzip', attack),
    compressedCall(address, 'deflate', deflateSync(manyDescriptors(150_000))),
    ...Array.from({ length: 4 }, () => compressedCall(address, 'gzip', bomb)),
  ]);
  await victims;
  t.pass('the victim requests made during the attacks were answered and counted');
  for (const r of answers) {
    t.equal(r.code, grpc.status.RESOURCE_EXHAUSTED, 'RESOURCE_EXHAUSTED');
    t.match(
      r.details,
      /decompressed message larger than max \(more than 65536 bytes: GRPC_MAX_DECOMPRESSED_MSG_SIZE\)/,
    );
  }
  // Inflating one bomb fully would take 512 MiB; four at once 2 GiB. Stopped at the bound, the
  // process grew by far less than one of them.
  const grown = process.memoryUsage().rss - rssBefore;
  t.ok(grown < 256 * 1024 * 1024, `RSS grew by ${Math.round(grown / 1024 / 1024)} MiB (< 256 MiB)`);
});

t.test('/json: the same bounds, one parser for every content type, HTTP_MAX_BODY_BYTES', async (t) => {
  await roomInWindow();
  const svc = await startTestApp({
    files: { 'd.yaml': CONFIG },
    env: {
      REQUEST_MAX_DESCRIPTORS: '4',
      REQUEST_MAX_DESCRIPTOR_ENTRIES: '3',
      REQUEST_MAX_KEY_BYTES: '16',
      REQUEST_MAX_VALUE_BYTES: '32',
      REQUEST_MAX_HITS_ADDEND: '1000',
      HTTP_MAX_BODY_BYTES: '4096',
    },
  });
  t.teardown(() => svc.close());
  const post = async (body: string | Buffer, contentType?: string) => {
    const res = await fetch(`${svc.httpUrl}/json`, {
      method: 'POST',
      headers: contentType ? { 'content-type': contentType } : {},
      body: typeof body === 'string' ? body : new Uint8Array(body),
    });
    return { status: res.status, text: await res.text() };
  };
  const d = (entries: string, extra = '') => `{"entries":[${entries}]${extra}}`;
  const e = '{"key":"k","value":"v"}';
  const req = (descriptors: string[], extra = '') =>
    `{"domain":"d","descriptors":[${descriptors.join(',')}]${extra}}`;

  t.equal((await post(req([d(e), d(e), d(e), d(e)]))).status, 200, '4 descriptors: decided');
  const past: [string, string, RegExp][] = [
    ['5 descriptors', req(Array(5).fill(d(e))), /more than 4 descriptors.*REQUEST_MAX_DESCRIPTORS/],
    [
      '4 entries',
      req([d([e, e, e, e].join(','))]),
      /descriptors\[0\]: more than 3 entries.*REQUEST_MAX_DESCRIPTOR_ENTRIES/,
    ],
    [
      'a 17-byte key',
      req([d(`{"key":"${'k'.repeat(17)}","value":"v"}`)]),
      /key: 17 bytes.*REQUEST_MAX_KEY_BYTES/,
    ],
    [
      'a 33-byte value',
      req([d(`{"key":"k","value":"${'é'.repeat(16)}x"}`)]),
      /value: 33 bytes.*REQUEST_MAX_VALUE_BYTES/,
    ],
    [
      'hits_addend 1001',
      req([d(e, ',"hitsAddend":1001')]),
      /hits_addend: 1001 is out of range.*REQUEST_MAX_HITS_ADDEND/,
    ],
    [
      'request hits_addend 1001',
      req([d(e)], ',"hits_addend":"1001"'),
      /hits_addend: 1001 is out of range.*REQUEST_MAX_HITS_ADDEND/,
    ],
  ];
  for (const [what, body, message] of past) {
    for (const ct of ['application/json', 'text/plain', undefined]) {
      const r = await post(body, ct);
      t.equal(r.status, 400, `${what} (${ct ?? 'no content type'}): 400`);
      t.match(r.text, message, `${what}: names the bound`);
    }
  }
  const big = await post(req([d(`{"key":"k","value":"${'v'.repeat(5000)}"}`)]), 'application/json');
  t.equal(big.status, 413, 'a body past HTTP_MAX_BODY_BYTES: 413');
  t.match(big.text, /request body larger than 4096 bytes \(HTTP_MAX_BODY_BYTES\)/);

  // Bytes that are not UTF-8, under every content type: refused, never read as U+FFFD.
  const notUtf8 = Buffer.concat([
    Buffer.from(req([d('{"key":"victim","value":"a')]).slice(0, -4)),
    Buffer.from([0xff]),
    Buffer.from('"}]}]}'),
  ]);
  for (const ct of [
    'application/json',
    'application/json; charset=utf-8',
    'text/plain',
    'application/x-www-form-urlencoded',
    undefined,
  ]) {
    const r = await post(notUtf8, ct);
    t.equal(r.status, 400, `not UTF-8 as ${ct ?? 'no content type'}: 400`);
    t.match(r.text, /not valid UTF-8/);
  }
  const ok = await post(req([d('{"key":"victim","value":"a\uFFFD"}')]), 'application/json');
  t.equal(ok.status, 200, 'the U+FFFD character itself, sent as UTF-8, is an ordinary value');
  t.match(
    JSON.parse(ok.text),
    { statuses: [{ limitRemaining: 99 }] },
    'counted once: the refused bodies did not share its counter',
  );
});
