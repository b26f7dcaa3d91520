// The hand-written hot-path codecs against protobufjs (the proto-loader definition): for random
// messages, our decoder reads exactly what protobufjs reads, and what our encoder writes protobufjs
// reads back as the message.
import t from 'tap';
import fc from 'fast-check';
import * as protoLoader from '@grpc/proto-loader';
import { isDeepStrictEqual } from 'node:util';
import { LOADER_OPTIONS } from './loader.js';
import { rateLimitServiceDefinition, RLS_PROTO_FILE, RLS_SERVICE_NAME } from './rls.js';
import type { WireRateLimitRequest, WireRateLimitResponse } from './rls.js';
import {
  decodeRateLimitRequest as decodeBounded,
  encodeRateLimitResponse,
  InvalidFieldError,
} from './rls-codec.js';
import type { RequestBounds } from './request-bounds.js';

// The wire reading compared with protobufjs over the full value ranges: no request bounds here (they
// are tested in request-bounds.test.ts).
const NO_BOUNDS: RequestBounds = {
  maxDescriptors: Infinity,
  maxEntries: Infinity,
  maxKeyBytes: Infinity,
  maxValueBytes: Infinity,
  maxHitsAddend: Infinity,
};
const decodeRateLimitRequest = (b: Buffer) => decodeBounded(b, NO_BOUNDS);

const def = rateLimitServiceDefinition().ShouldRateLimit;
const pbEncodeRequest = (r: unknown) => def.requestSerialize(r) as Buffer;
const pbDecodeRequest = (b: Buffer) => def.requestDeserialize(b) as WireRateLimitRequest;
const pbEncodeResponse = (r: unknown) => def.responseSerialize(r) as Buffer;
const pbDecodeResponse = (b: Buffer) => def.responseDeserialize(b) as WireRateLimitResponse;

/** proto3 equality: a field at its default ('', 0, the 0 enum) equals an absent one. */
function stripDefaults(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(stripDefaults);
  if (v && typeof v === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) {
      if (x === '' || x === 0 || x === 'UNKNOWN' || x === undefined || x === null) continue;
      out[k] = stripDefaults(x);
    }
    return out;
  }
  return v;
}

const text = fc.oneof(
  fc.string({ maxLength: 12 }),
  fc.string({ unit: 'grapheme', maxLength: 6 }),
  fc.constant(''),
);
const u32 = fc.oneof(fc.integer({ min: 0, max: 300 }), fc.integer({ min: 0, max: 4294967295 }));
const unit = fc.constantFrom('UNKNOWN', 'SECOND', 'MINUTE', 'HOUR', 'DAY', 'MONTH', 'YEAR', 'WEEK');

const request = fc.record(
  {
    domain: text,
    hitsAddend: u32,
    descriptors: fc.array(
      fc.record(
        {
          entries: fc.array(fc.record({ key: text, value: text }, { requiredKeys: [] }), { maxLength: 4 }),
          limit: fc.record({ requestsPerUnit: u32, unit }, { requiredKeys: [] }),
          hitsAddend: fc.record({ value: fc.integer({ min: 0, max: 2 ** 40 }) }, { requiredKeys: [] }),
          isNegativeHits: fc.boolean(),
        },
        { requiredKeys: [] },
      ),
      { maxLength: 4 },
    ),
  },
  { requiredKeys: [] },
);

const code = fc.constantFrom('UNKNOWN', 'OK', 'OVER_LIMIT');
const response = fc.record(
  {
    overallCode: code,
    statuses: fc.array(
      fc.record(
        {
          code,
          currentLimit: fc.record(
            { name: text, requestsPerUnit: u32, unit },
            { requiredKeys: ['requestsPerUnit', 'unit'] },
          ),
          limitRemaining: u32,
          durationUntilReset: fc.record(
            {
              seconds: fc.integer({ min: 0, max: 2 ** 40 }),
              nanos: fc.integer({ min: 0, max: 999_999_999 }),
            },
            { requiredKeys: ['seconds'] },
          ),
        },
        { requiredKeys: ['code', 'limitRemaining'] },
      ),
      { maxLength: 8 },
    ),
    responseHeadersToAdd: fc.array(fc.record({ key: text, value: text }), { maxLength: 3 }),
    requestHeadersToAdd: fc.array(fc.record({ key: text, value: text }), { maxLength: 3 }),
  },
  { requiredKeys: ['overallCode', 'statuses'] },
);

t.test('decodeRateLimitRequest reads what protobufjs reads', async (t) => {
  fc.assert(
    fc.property(request, (r) => {
      const bytes = pbEncodeRequest(r);
      const mine = decodeRateLimitRequest(bytes);
      const theirs = pbDecodeRequest(bytes);
      if (JSON.stringify(mine) !== JSON.stringify(theirs)) t.same(mine, theirs, JSON.stringify(r));
      return JSON.stringify(mine) === JSON.stringify(theirs);
    }),
    { numRuns: 500 },
  );
  t.pass('500 random requests');
});

t.test(
  'decodeRateLimitRequest: unknown fields skipped, unknown enum numbers kept, malformed input thrown',
  async (t) => {
    const known = pbEncodeRequest({ domain: 'd', descriptors: [{ entries: [{ key: 'k', value: 'v' }] }] });
    // field 9 varint, field 10 fixed64, field 11 bytes, field 12 fixed32: all unknown
    const extra = Buffer.from([
      0x48, 0x96, 0x01, 0x51, 1, 2, 3, 4, 5, 6, 7, 8, 0x5a, 0x02, 0x61, 0x62, 0x65, 1, 2, 3, 4,
    ]);
    const withUnknown = Buffer.concat([known, extra]);
    t.same(decodeRateLimitRequest(withUnknown), pbDecodeRequest(withUnknown));
    // descriptor with limit { unit: 42 }
    const odd = Buffer.from([0x12, 0x04, 0x12, 0x02, 0x10, 42]);
    t.same(decodeRateLimitRequest(odd), { descriptors: [{ limit: { unit: 42 } }] });
    t.same(decodeRateLimitRequest(odd), pbDecodeRequest(odd));
    t.throws(() => decodeRateLimitRequest(Buffer.from([0x0a, 0x05, 0x61])), /truncated/);
    t.throws(() => decodeRateLimitRequest(Buffer.from([0x18, 0xff])), /truncated varint/);
    t.throws(() => decodeRateLimitRequest(Buffer.from([0x0b])), /wire type 3/);
  },
);

t.test('encodeRateLimitResponse writes what protobufjs reads back as the message', async (t) => {
  fc.assert(
    fc.property(response, (r) => {
      const ours = encodeRateLimitResponse(r as WireRateLimitResponse);
      if (!ours) throw new Error('fast path refused a plain response');
      const mine = stripDefaults(pbDecodeResponse(ours));
      const theirs = stripDefaults(pbDecodeResponse(pbEncodeResponse(r)));
      if (JSON.stringify(mine) !== JSON.stringify(theirs)) t.same(mine, theirs, JSON.stringify(r));
      return JSON.stringify(mine) === JSON.stringify(theirs);
    }),
    { numRuns: 500 },
  );
  t.pass('500 random responses');
});

t.test('framed: the 5-byte gRPC prefix, then the same message bytes', async (t) => {
  fc.assert(
    fc.property(response, (r) => {
      const plain = encodeRateLimitResponse(r as WireRateLimitResponse)!;
      const framed = encodeRateLimitResponse(r as WireRateLimitResponse, true)!;
      return (
        framed.length === plain.length + 5 &&
        framed[0] === 0 &&
        framed.readUInt32BE(1) === plain.length &&
        framed.subarray(5).equals(plain)
      );
    }),
    { numRuns: 300 },
  );
  // Past the encoder's first scratch of sizes (16 statuses' worth), then a small response again: each
  // response is sized from its own fields only.
  const big: WireRateLimitResponse = {
    overallCode: 'OVER_LIMIT',
    statuses: Array.from({ length: 40 }, (_, i) => ({
      code: i % 2 === 0 ? ('OVER_LIMIT' as const) : ('OK' as const),
      currentLimit: { name: `limit-${i}`, requestsPerUnit: i * 1000 + 1, unit: 'MINUTE' as const },
      limitRemaining: i,
      durationUntilReset: { seconds: i + 1 },
    })),
    responseHeadersToAdd: Array.from({ length: 12 }, (_, i) => ({ key: `k${i}`, value: 'v'.repeat(i * 50) })),
    requestHeadersToAdd: [{ key: 'x-request', value: 'é' }],
  };
  const small: WireRateLimitResponse = {
    overallCode: 'OK',
    statuses: [{ code: 'OK', limitRemaining: 7, durationUntilReset: { seconds: 3 } }],
  };
  for (const r of [small, big, small]) {
    const framed = encodeRateLimitResponse(r, true)!;
    t.equal(framed.readUInt32BE(1), framed.length - 5, 'the prefix holds the message length');
    t.same(
      stripDefaults(pbDecodeResponse(framed.subarray(5))),
      stripDefaults(pbDecodeResponse(pbEncodeResponse(r))),
      `${r.statuses!.length} statuses read back as protobufjs reads its own encoding`,
    );
  }
});

t.test('responses with dynamic metadata or negative numbers are left to protobufjs', async (t) => {
  const base = { overallCode: 'OK' as const, statuses: [] };
  t.equal(encodeRateLimitResponse({ ...base, dynamicMetadata: { fields: {} } }), undefined);
  t.equal(
    encodeRateLimitResponse({
      ...base,
      statuses: [{ code: 'OK', limitRemaining: 1, durationUntilReset: { seconds: -1 } }],
    }),
    undefined,
  );
  t.same([...encodeRateLimitResponse(base)!], [0x08, 0x01]);
  t.same(
    [...encodeRateLimitResponse({ overallCode: 'UNKNOWN', statuses: [] })!],
    [],
    'all defaults: no bytes',
  );
});

// protobufjs with 64-bit integers as decimal strings: the exact value to compare against.
const exactDef = (
  protoLoader.loadSync([RLS_PROTO_FILE], { ...LOADER_OPTIONS, longs: String })[RLS_SERVICE_NAME] as Record<
    string,
    { requestDeserialize(b: Buffer): unknown; requestSerialize(r: unknown): Buffer }
  >
).ShouldRateLimit!;

t.test('64-bit varints decode exactly over the full uint64 range, as protobufjs reads them', async (t) => {
  const u64 = fc.oneof(
    fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }),
    fc.bigInt({ min: 2n ** 53n - 2n, max: 2n ** 53n + 2n }),
    fc.constantFrom(0n, 1n, 2n ** 63n - 1n, 2n ** 63n, 2n ** 64n - 1n),
  );
  fc.assert(
    fc.property(u64, u64, (hits, requestHits) => {
      // Every varint field of the request, written with a 64-bit value.
      const bytes = exactDef.requestSerialize({
        domain: 'd',
        hitsAddend: requestHits.toString(),
        descriptors: [{ entries: [], hitsAddend: { value: hits.toString() }, limit: { requestsPerUnit: 1 } }],
      });
      const mine = decodeRateLimitRequest(bytes);
      const theirs = exactDef.requestDeserialize(bytes) as {
        hitsAddend?: number;
        descriptors: { hitsAddend?: { value?: string } }[];
      };
      const value = mine.descriptors![0]!.hitsAddend!.value!;
      const expected = BigInt(theirs.descriptors[0]!.hitsAddend!.value ?? '0');
      if (BigInt(value) !== expected) return false;
      if (expected <= BigInt(Number.MAX_SAFE_INTEGER) ? typeof value !== 'number' : typeof value !== 'bigint')
        return false;
      return (mine.hitsAddend ?? 0) === (theirs.hitsAddend ?? 0);
    }),
    { numRuns: 2000 },
  );
  t.pass('2000 random uint64 values');
  // The bytes: ff ff ff ff ff ff ff ff ff 01 is 2^64-1, not 1.
  const ten = Buffer.from([
    0x12, 0x0d, 0x1a, 0x0b, 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
  ]);
  t.equal(decodeRateLimitRequest(ten).descriptors![0]!.hitsAddend!.value, 2n ** 64n - 1n);
});

t.test('uint32 fields keep the exact low 32 bits of a longer varint, as protobufjs does', async (t) => {
  const varint = (n: bigint) => {
    const out: number[] = [];
    while (n >= 0x80n) {
      out.push(Number(n & 0x7fn) | 0x80);
      n >>= 7n;
    }
    return [...out, Number(n)];
  };
  fc.assert(
    fc.property(
      fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }),
      fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }),
      (a, b) => {
        const limit = [0x08, ...varint(a), 0x10, 2];
        const descriptor = [0x12, limit.length, ...limit];
        // The request's field 3 first: protobufjs misreads a long uint32 varint at the very end of a buffer.
        const bytes = Buffer.from([
          0x18,
          ...varint(b),
          0x12,
          descriptor.length,
          ...descriptor,
          0x0a,
          1,
          0x64,
        ]);
        const mine = decodeRateLimitRequest(bytes);
        const low = (n: bigint) => Number(n & 0xffffffffn);
        if (mine.hitsAddend !== low(b) || mine.descriptors![0]!.limit!.requestsPerUnit !== low(a))
          return false;
        // protobufjs skips 5 more bytes after the 5th of a uint32 varint (it expects the 10-byte form
        // of a negative int32), so it is the oracle only for varints of up to 5 or exactly 10 bytes.
        const fair = (n: bigint) => n < 2n ** 35n || n >= 2n ** 63n;
        return !fair(a) || !fair(b) || isDeepStrictEqual(mine, pbDecodeRequest(bytes));
      },
    ),
    { numRuns: 2000 },
  );
  t.pass('2000 random 64-bit values in uint32 fields');
});

t.test(
  'a string field that is not UTF-8 is an InvalidFieldError (INVALID_ARGUMENT), UTF-8 decodes',
  async (t) => {
    const entry = (value: number[]) => {
      const e = [0x0a, 1, 0x6b, 0x12, value.length, ...value];
      const d = [0x0a, e.length, ...e];
      return Buffer.from([0x12, d.length, ...d]);
    };
    for (const bad of [
      [0x61, 0xff],
      [0x61, 0xfe],
      [0xc3],
      [0xed, 0xa0, 0x80],
      [0xf8, 0x88, 0x80, 0x80, 0x80],
    ]) {
      t.throws(() => decodeRateLimitRequest(entry(bad)), InvalidFieldError, Buffer.from(bad).toString('hex'));
    }
    const good = [...Buffer.from('añ€😀')];
    t.equal(decodeRateLimitRequest(entry(good)).descriptors![0]!.entries![0]!.value, 'añ€😀');
    const bom = [0xef, 0xbb, 0xbf, 0x61];
    t.equal(
      decodeRateLimitRequest(entry(bom)).descriptors![0]!.entries![0]!.value,
      '\ufeffa',
      'a BOM is kept',
    );
  },
);

t.test(
  "a descriptor's is_negative_hits (Envoy's field 4) is read; a long or repeated varint too",
  async (t) => {
    // domain "d"; descriptor { entries [{k: v}], is_negative_hits (field 4, varint) }
    const entry = [0x0a, 0x06, 0x0a, 0x01, 0x6b, 0x12, 0x01, 0x76];
    const descriptor = (flag: number[]) =>
      Buffer.from([0x0a, 0x01, 0x64, 0x12, entry.length + flag.length, ...entry, ...flag]);
    const plain = descriptor([]);
    t.same(decodeRateLimitRequest(plain), {
      domain: 'd',
      descriptors: [{ entries: [{ key: 'k', value: 'v' }] }],
    });
    for (const [flag, value] of [
      [[0x20, 0x01], true],
      [[0x20, 0x00], false],
      [[0x20, 0x80, 0x01], true],
      [[0x20, 0x01, 0x20, 0x00], false],
      [[0x20, 0x00, 0x20, 0x02], true],
    ] as const) {
      const bytes = descriptor([...flag]);
      const mine = decodeRateLimitRequest(bytes);
      t.equal(mine.descriptors![0]!.isNegativeHits, value, Buffer.from(flag).toString('hex'));
      t.same(mine, pbDecodeRequest(bytes), 'as protobufjs reads it');
    }
    // field 4 with another wire type is skipped as an unknown field
    t.same(decodeRateLimitRequest(descriptor([0x22, 0x00])), decodeRateLimitRequest(plain));
  },
);
