import t from 'tap';
import protobuf from 'protobufjs';
import {
  decodeRateLimitConfig,
  encodeRateLimitConfig,
  RATELIMIT_CONFIG_TYPE_URL,
  type RateLimitConfigInit,
} from './ratelimit-config.js';

// The published ratelimit.config.ratelimit.v3 definition, declared by hand from its field numbers
// and enum values (independent of our .proto file), to prove the two agree on the wire.
function publishedRoot(): protobuf.Root {
  const root = new protobuf.Root();
  const ns = root.define('ratelimit.config.ratelimit.v3');
  ns.add(
    new protobuf.Enum('RateLimitUnit', {
      UNKNOWN: 0,
      SECOND: 1,
      MINUTE: 2,
      HOUR: 3,
      DAY: 4,
      MONTH: 5,
      YEAR: 6,
      WEEK: 7,
    }),
  );
  ns.add(new protobuf.Type('RateLimitReplace').add(new protobuf.Field('name', 1, 'string')));
  ns.add(
    new protobuf.Type('RateLimitPolicy')
      .add(new protobuf.Field('unit', 1, 'RateLimitUnit'))
      .add(new protobuf.Field('requests_per_unit', 2, 'uint32'))
      .add(new protobuf.Field('unlimited', 3, 'bool'))
      .add(new protobuf.Field('name', 4, 'string'))
      .add(new protobuf.Field('replaces', 5, 'RateLimitReplace', 'repeated')),
  );
  ns.add(
    new protobuf.Type('RateLimitDescriptor')
      .add(new protobuf.Field('key', 1, 'string'))
      .add(new protobuf.Field('value', 2, 'string'))
      .add(new protobuf.Field('rate_limit', 3, 'RateLimitPolicy'))
      .add(new protobuf.Field('descriptors', 4, 'RateLimitDescriptor', 'repeated'))
      .add(new protobuf.Field('shadow_mode', 5, 'bool'))
      .add(new protobuf.Field('detailed_metric', 6, 'bool'))
      .add(new protobuf.Field('quota_mode', 7, 'bool')),
  );
  ns.add(
    new protobuf.Type('RateLimitConfig')
      .add(new protobuf.Field('name', 1, 'string'))
      .add(new protobuf.Field('domain', 2, 'string'))
      .add(new protobuf.Field('descriptors', 3, 'RateLimitDescriptor', 'repeated')),
  );
  root.resolveAll();
  return root;
}

const sample: RateLimitConfigInit = {
  name: 'team-a',
  domain: 'edge',
  descriptors: [
    {
      key: 'remote_address',
      rateLimit: { unit: 'WEEK', requestsPerUnit: 7 },
      detailedMetric: true,
    },
    {
      key: 'path',
      value: '/api*',
      shadowMode: true,
      descriptors: [
        {
          key: 'method',
          value: 'GET',
          rateLimit: { unit: 'YEAR', requestsPerUnit: 1000, name: 'get', replaces: [{ name: 'old' }] },
          quotaMode: true,
        },
      ],
    },
    { key: 'internal', rateLimit: { unlimited: true } },
    { key: 'monthly', rateLimit: { unit: 'MONTH', requestsPerUnit: 0 } },
  ],
};

t.test('type URL is the published one', async (t) => {
  t.equal(RATELIMIT_CONFIG_TYPE_URL, 'type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig');
});

t.test('our encoding decodes with the published field numbers and back', async (t) => {
  const published = publishedRoot().lookupType('ratelimit.config.ratelimit.v3.RateLimitConfig');
  const bytes = encodeRateLimitConfig(sample);
  const theirs = published.toObject(published.decode(bytes), { enums: String, defaults: false }) as any;
  t.equal(theirs.name, 'team-a');
  t.equal(theirs.domain, 'edge');
  t.equal(theirs.descriptors[0].rate_limit.unit, 'WEEK');
  t.equal(theirs.descriptors[0].rate_limit.requests_per_unit, 7);
  t.equal(theirs.descriptors[0].detailed_metric, true);
  t.equal(theirs.descriptors[1].shadow_mode, true);
  t.equal(theirs.descriptors[1].descriptors[0].rate_limit.unit, 'YEAR');
  t.equal(theirs.descriptors[1].descriptors[0].rate_limit.name, 'get');
  t.same(theirs.descriptors[1].descriptors[0].rate_limit.replaces, [{ name: 'old' }]);
  t.equal(theirs.descriptors[1].descriptors[0].quota_mode, true);
  t.equal(theirs.descriptors[2].rate_limit.unlimited, true);
  t.equal(theirs.descriptors[3].rate_limit.unit, 'MONTH');

  // Their encoding, our decoding: byte-identical both ways for the same content.
  const theirBytes = published.encode(published.fromObject(theirs)).finish();
  t.same(Buffer.from(theirBytes), Buffer.from(bytes));
  const ours = decodeRateLimitConfig(theirBytes);
  t.equal(ours.descriptors[1].descriptors[0].rateLimit?.replaces[0].name, 'old');
});

t.test('unit numbers on the wire are those of the published enum', async (t) => {
  const expected = { SECOND: 1, MINUTE: 2, HOUR: 3, DAY: 4, MONTH: 5, YEAR: 6, WEEK: 7 } as const;
  for (const [unit, n] of Object.entries(expected)) {
    const bytes = encodeRateLimitConfig({
      descriptors: [{ key: 'k', rateLimit: { unit: unit as keyof typeof expected, requestsPerUnit: 1 } }],
    });
    // descriptors(3) > rate_limit(3) > unit(1): the varint after tag 0x08.
    const i = Buffer.from(bytes).indexOf(0x08);
    t.equal(bytes[i + 1], n, unit);
  }
});

t.test('decode fills proto3 defaults and tolerates unknown enum numbers', async (t) => {
  const published = publishedRoot().lookupType('ratelimit.config.ratelimit.v3.RateLimitConfig');
  const bytes = published
    .encode(published.fromObject({ domain: 'd', descriptors: [{ key: 'k', rate_limit: { unit: 42 } }] }))
    .finish();
  const m = decodeRateLimitConfig(bytes);
  t.same(m, {
    name: '',
    domain: 'd',
    descriptors: [
      {
        key: 'k',
        value: '',
        rateLimit: {
          unit: 'UNKNOWN',
          requestsPerUnit: 0,
          unlimited: false,
          name: '',
          replaces: [],
          algorithm: 'FIXED_WINDOW',
          burst: 0,
        },
        descriptors: [],
        shadowMode: false,
        detailedMetric: false,
        quotaMode: false,
        valueToMetric: false,
        shareThreshold: false,
        metadata: null,
        rateLimits: [],
      },
    ],
  });
  t.throws(() => decodeRateLimitConfig(Uint8Array.from([0x0a, 0x05, 0x61])));
});

t.test('a reference decoder (published field numbers only) skips our fields', async (t) => {
  // It would enforce a sliding window as a fixed one and drop rate_limits, which is why pods announce
  // the features they enforce.
  const bytes = encodeRateLimitConfig({
    domain: 'edge',
    descriptors: [
      { key: 'tenant', rateLimit: { unit: 'MINUTE', requestsPerUnit: 60, algorithm: 'SLIDING_WINDOW' } },
      { key: 'user', rateLimits: [{ unit: 'SECOND', requestsPerUnit: 5, algorithm: 'TOKEN_BUCKET' }] },
    ],
  });
  const published = publishedRoot().lookupType('ratelimit.config.ratelimit.v3.RateLimitConfig');
  const seen = published.toObject(published.decode(bytes)) as { descriptors: Record<string, unknown>[] };
  t.same(seen.descriptors[0], { key: 'tenant', rate_limit: { unit: 2, requests_per_unit: 60 } });
  t.same(seen.descriptors[1], { key: 'user' }, 'the reference sees no limit at all on the list form');
});
