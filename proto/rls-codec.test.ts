// The hand-written hot-path codecs against protobufjs (the proto-loader definition): for random
// messages, our decoder reads exactly what protobufjs reads, and what our encoder writes protobufjs
// reads back as the message.
import t from 'tap';
import fc from 'fast-check';
import { rateLimitServiceDefinition } from './rls.js';
import type { WireRateLimitRequest, WireRateLimitResponse } from './rls.js';
import { decodeRateLimitRequest, encodeRateLimitResponse } from './rls-codec.js';

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
