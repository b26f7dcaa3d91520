import t from 'tap';
import protobuf from 'protobufjs';
import {
  decodeRateLimitConfig,
  documentToRateLimitConfig,
  encodeRateLimitConfig,
  fieldsLostOverXds,
  RATELIMIT_CONFIG_TYPE_URL,
  rateLimitConfigToDocument,
  type RateLimitConfigInit,
} from './xds.js';

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

t.test('message to document is the reference conversion in YAML shape', async (t) => {
  const doc = rateLimitConfigToDocument(decodeRateLimitConfig(encodeRateLimitConfig(sample)));
  t.same(doc, {
    domain: 'edge',
    descriptors: [
      { key: 'remote_address', rate_limit: { requests_per_unit: 7, unit: 'week' }, detailed_metric: true },
      {
        key: 'path',
        value: '/api*',
        descriptors: [
          {
            key: 'method',
            value: 'GET',
            rate_limit: { requests_per_unit: 1000, unit: 'year', name: 'get', replaces: [{ name: 'old' }] },
            quota_mode: true,
          },
        ],
        shadow_mode: true,
      },
      { key: 'internal', rate_limit: { requests_per_unit: 0, unlimited: true } },
      { key: 'monthly', rate_limit: { requests_per_unit: 0, unit: 'month' } },
    ],
  });
});

t.test('document to message and back is the identity on what the wire carries', async (t) => {
  const doc = {
    domain: 'edge',
    descriptors: [
      { key: 'a', value: 'b', rate_limit: { unit: 'Second', requests_per_unit: 5 }, shadow_mode: true },
      { key: 'c', descriptors: [{ key: 'd', rate_limit: { unlimited: true } }] },
    ],
  };
  const msg = documentToRateLimitConfig('file.yaml', doc);
  t.equal(msg.name, 'file.yaml');
  const back = rateLimitConfigToDocument(decodeRateLimitConfig(encodeRateLimitConfig(msg)));
  t.same(back, {
    domain: 'edge',
    descriptors: [
      { key: 'a', value: 'b', rate_limit: { requests_per_unit: 5, unit: 'second' }, shadow_mode: true },
      { key: 'c', descriptors: [{ key: 'd', rate_limit: { requests_per_unit: 0, unlimited: true } }] },
    ],
  });
  t.throws(
    () =>
      documentToRateLimitConfig('f', {
        domain: 'x',
        descriptors: [{ key: 'k', rate_limit: { unit: 'fortnight' } }],
      }),
    /invalid unit/,
  );
  t.same(
    fieldsLostOverXds({
      domain: 'd',
      descriptors: [
        {
          key: 'k',
          share_threshold: true,
          rate_limit: { unit: 'second', foo: 1 },
          rate_limits: [{ bar: 2 }],
        },
      ],
    }),
    ['descriptors[0].rate_limit.foo', 'descriptors[0].rate_limits[0].bar'],
  );
});

t.test(
  'every field of the config model crosses xDS: algorithm, burst, rate_limits, metadata...',
  async (t) => {
    const doc = {
      domain: 'edge',
      descriptors: [
        {
          key: 'tenant',
          value: 'free-*',
          share_threshold: true,
          value_to_metric: true,
          metadata: { team: 'a', tier: 2, tags: ['x', true], nested: { k: null } },
          rate_limit: { unit: 'minute', requests_per_unit: 60, algorithm: 'sliding_window' },
        },
        {
          key: 'client',
          rate_limit: { unit: 'second', requests_per_unit: 10, algorithm: 'token_bucket', burst: 20 },
        },
        {
          key: 'user',
          rate_limits: [
            { unit: 'second', requests_per_unit: 5, algorithm: 'token_bucket' },
            { unit: 'day', requests_per_unit: 1000 },
          ],
        },
      ],
    };
    t.same(fieldsLostOverXds(doc), [], 'nothing is lost');
    const bytes = encodeRateLimitConfig(documentToRateLimitConfig('r', doc));
    const back = rateLimitConfigToDocument(decodeRateLimitConfig(bytes));
    t.same(back, {
      domain: 'edge',
      descriptors: [
        {
          key: 'tenant',
          value: 'free-*',
          rate_limit: { requests_per_unit: 60, unit: 'minute', algorithm: 'sliding_window' },
          value_to_metric: true,
          share_threshold: true,
          metadata: { team: 'a', tier: 2, tags: ['x', true], nested: { k: null } },
        },
        {
          key: 'client',
          rate_limit: { requests_per_unit: 10, unit: 'second', algorithm: 'token_bucket', burst: 20 },
        },
        {
          key: 'user',
          rate_limits: [
            { requests_per_unit: 5, unit: 'second', algorithm: 'token_bucket' },
            { requests_per_unit: 1000, unit: 'day' },
          ],
        },
      ],
    });

    // A reference decoder (published field numbers only) skips our fields: it would enforce a
    // sliding window as a fixed one and drop rate_limits, which is why pods announce features.
    const published = publishedRoot().lookupType('ratelimit.config.ratelimit.v3.RateLimitConfig');
    const seen = published.toObject(published.decode(bytes)) as { descriptors: Record<string, unknown>[] };
    t.same(seen.descriptors[2], { key: 'user' }, 'the reference sees no limit at all on the list form');

    // An algorithm number this build does not know is refused by the validator, never a fixed window.
    const unknown = decodeRateLimitConfig(
      encodeRateLimitConfig({
        domain: 'd',
        descriptors: [{ key: 'k', rateLimit: { unit: 'SECOND', algorithm: 7 as never } }],
      }),
    );
    t.match(rateLimitConfigToDocument(unknown), {
      descriptors: [{ rate_limit: { algorithm: 'unknown_7' } }],
    });
  },
);
