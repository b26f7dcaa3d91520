// The RateLimitConfig message <-> YAML-shaped document mapping (xds-document.ts), through the real
// codec: what an xDS push becomes before the validator sees it, and what the control plane sends.
import t from 'tap';
import { decodeRateLimitConfig, encodeRateLimitConfig, type RateLimitConfigInit } from '../../proto/index.js';
import { documentToRateLimitConfig, fieldsLostOverXds, rateLimitConfigToDocument } from './index.js';

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

t.test('quota_unit is an extension: named as lost, and left out of the message', async (t) => {
  const doc = {
    domain: 'llm',
    descriptors: [
      { key: 'a', rate_limit: { unit: 'second', requests_per_unit: 9, quota_unit: 'content-bytes' } },
      { key: 'b', rate_limits: [{ unit: 'day', requests_per_unit: 5, quota_unit: 'tokens' }] },
    ],
  };
  t.same(fieldsLostOverXds(doc), [
    'descriptors[0].rate_limit.quota_unit',
    'descriptors[1].rate_limits[0].quota_unit',
  ]);
  const back = rateLimitConfigToDocument(
    decodeRateLimitConfig(encodeRateLimitConfig(documentToRateLimitConfig('r', doc))),
  );
  t.same(back, {
    domain: 'llm',
    descriptors: [
      { key: 'a', rate_limit: { requests_per_unit: 9, unit: 'second' } },
      { key: 'b', rate_limits: [{ requests_per_unit: 5, unit: 'day' }] },
    ],
  });
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

// Protobuf wire bytes written by hand, as a control plane built on the published API would send them.
function varint(n: number): number[] {
  const out: number[] = [];
  while (n > 0x7f) {
    out.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  out.push(n);
  return out;
}
function lenField(field: number, body: number[]): number[] {
  return [...varint((field << 3) | 2), ...varint(body.length), ...body];
}
const utf8 = (s: string) => [...Buffer.from(s, 'utf8')];
/** A google.protobuf.Struct with one string entry. */
function structBytes(key: string, value: string): number[] {
  return lenField(1, [...lenField(1, utf8(key)), ...lenField(2, lenField(3, utf8(value)))]);
}
function configWithDescriptorFields(...fields: number[][]): Uint8Array {
  return Uint8Array.from([
    ...lenField(2, utf8('d')),
    ...lenField(3, [...lenField(1, utf8('k')), ...fields.flat()]),
  ]);
}

t.test('descriptor metadata is read from field 8, as the published API has it', async (t) => {
  const doc = rateLimitConfigToDocument(
    decodeRateLimitConfig(configWithDescriptorFields(lenField(8, structBytes('backend', 'a')))),
  );
  t.same(doc, { domain: 'd', descriptors: [{ key: 'k', metadata: { backend: 'a' } }] });

  // What we send is at field 8 too (tag 0x42), never at the old number.
  const bytes = encodeRateLimitConfig(
    documentToRateLimitConfig('r', {
      domain: 'd',
      descriptors: [{ key: 'k', metadata: { backend: 'a' } }],
    }),
  );
  t.same(
    [...bytes],
    [...lenField(1, utf8('r')), ...configWithDescriptorFields(lenField(8, structBytes('backend', 'a')))],
  );
});

t.test('field 102 (our earlier builds) is read only when field 8 is absent', async (t) => {
  const legacy = rateLimitConfigToDocument(
    decodeRateLimitConfig(configWithDescriptorFields(lenField(102, structBytes('backend', 'old')))),
  );
  t.same(legacy.descriptors, [{ key: 'k', metadata: { backend: 'old' } }]);
  const both = rateLimitConfigToDocument(
    decodeRateLimitConfig(
      configWithDescriptorFields(
        lenField(8, structBytes('backend', 'new')),
        lenField(102, structBytes('backend', 'old')),
      ),
    ),
  );
  t.same(both.descriptors, [{ key: 'k', metadata: { backend: 'new' } }]);
});
