// The response fields besides the statuses, in the reference's shapes: RESPONSE_DYNAMIC_METADATA
// and LIMIT_REQUEST_HEADERS_* (request_headers_to_add).
import t from 'tap';
import { fromStruct } from './index.js';
import { descriptor, startTestApp } from '../test-support.js';

const METADATA_RULES = `
domain: m
descriptors:
  - key: a
    metadata: { backend: a, nested: { x: 1, keep: first }, list: [1, 2] }
    rate_limit: { unit: minute, requests_per_unit: 100 }
  - key: b
    metadata: { backend: b, nested: { y: 2, n: 3, keep: second }, list: [3], only_b: true }
    rate_limit: { unit: minute, requests_per_unit: 100 }
  - key: full
    metadata: { backend: full }
    rate_limit: { unit: minute, requests_per_unit: 0 }
`;

t.test('RESPONSE_DYNAMIC_METADATA has the reference shape', async (t) => {
  const svc = await startTestApp({
    files: { 'm.yaml': METADATA_RULES },
    env: { RESPONSE_DYNAMIC_METADATA: 'true' },
  });
  t.teardown(() => svc.close());
  const md = async (req: Parameters<typeof svc.call>[0]) =>
    fromStruct((await svc.call(req)).dynamicMetadata as never) as Record<string, any>;

  await t.test(
    'entries as key=value, the descriptor limit and hitsAddend, the request hitsAddend',
    async (t) => {
      const got = await md({
        domain: 'm',
        hitsAddend: 2,
        descriptors: [
          { ...descriptor(['a', '1'], ['sub', 'x=y']), limit: { requestsPerUnit: 7, unit: 'HOUR' } },
          { ...descriptor(['b', '2']), hitsAddend: { value: 0 } },
          { ...descriptor(['b', '3']), hitsAddend: { value: 4 } },
        ],
      });
      t.same(got.descriptors, [
        { entries: ['a=1', 'sub=x=y'], limit: 'requests_per_unit:7 unit:HOUR' },
        { entries: ['b=2'], hitsAddend: 0 },
        { entries: ['b=3'], hitsAddend: 4 },
      ]);
      t.equal(got.hitsAddend, 2);
      t.equal(got.domain, 'm');
      t.notOk('quotaModeEnabled' in got, 'upstream main no longer writes quotaModeEnabled');
    },
  );

  await t.test('no top-level hitsAddend when the request leaves it at zero', async (t) => {
    const got = await md({ domain: 'm', descriptors: [descriptor(['a', '1'])] });
    t.notOk('hitsAddend' in got);
    t.same(got.descriptors, [{ entries: ['a=1'] }]);
  });

  await t.test('the passed rules metadata is merged deeply, the first value of a key winning', async (t) => {
    const got = await md({ domain: 'm', descriptors: [descriptor(['a', '1']), descriptor(['b', '1'])] });
    t.same(got.metadata, {
      backend: 'a',
      nested: { x: 1, keep: 'first', y: 2, n: 3 },
      list: [1, 2],
      only_b: true,
    });
    const reversed = await md({ domain: 'm', descriptors: [descriptor(['b', '1']), descriptor(['a', '1'])] });
    t.same(reversed.metadata, {
      backend: 'b',
      nested: { y: 2, n: 3, keep: 'second', x: 1 },
      list: [3],
      only_b: true,
    });
    const alone = await md({ domain: 'm', descriptors: [descriptor(['a', '1'])] });
    t.same(
      alone.metadata,
      { backend: 'a', nested: { x: 1, keep: 'first' }, list: [1, 2] },
      'rules unchanged',
    );
  });

  await t.test('an over-limit descriptor adds no metadata', async (t) => {
    const got = await md({ domain: 'm', descriptors: [descriptor(['full', '1']), descriptor(['a', '1'])] });
    t.equal(got.metadata.backend, 'a');
    const none = await md({ domain: 'm', descriptors: [descriptor(['full', '1'])] });
    t.notOk('metadata' in none);
  });
});

t.test(
  'metadata keys stay the text written, at every depth (y, n, on, 010 are not YAML 1.1 booleans or numbers)',
  async (t) => {
    const yaml = `
domain: k
descriptors:
  - key: a
    metadata:
      y: top
      nested: { y: 2, n: 3, on: 4, "off": 5, 010: 6, yes: no }
    rate_limit: { unit: minute, requests_per_unit: 100 }
`;
    const svc = await startTestApp({ files: { 'k.yaml': yaml }, env: { RESPONSE_DYNAMIC_METADATA: 'true' } });
    t.teardown(() => svc.close());
    const r = await svc.call({ domain: 'k', descriptors: [descriptor(['a', '1'])] });
    const md = fromStruct(r.dynamicMetadata as never) as Record<string, any>;
    t.same(md.metadata, { y: 'top', nested: { y: 2, n: 3, on: 4, off: 5, '010': 6, yes: false } });
  },
);

const HEADER_RULES = `
domain: h
descriptors:
  - key: wide
    rate_limit: { unit: hour, requests_per_unit: 100 }
  - key: narrow
    rate_limit: { unit: minute, requests_per_unit: 3 }
`;

t.test(
  'LIMIT_REQUEST_HEADERS_ENABLED: request_headers_to_add for the descriptor closest to its limit',
  async (t) => {
    const svc = await startTestApp({
      files: { 'h.yaml': HEADER_RULES },
      env: { LIMIT_REQUEST_HEADERS_ENABLED: 'true', LIMIT_REQUEST_REMAINING_HEADER: 'X-Quota-Left' },
    });
    t.teardown(() => svc.close());
    const req = { domain: 'h', descriptors: [descriptor(['wide', '1']), descriptor(['narrow', '1'])] };
    const r = await svc.call(req);
    t.equal(r.overallCode, 'OK');
    const byKey = Object.fromEntries((r.requestHeadersToAdd ?? []).map((h) => [h.key, h.value]));
    t.same(
      Object.keys(byKey),
      ['RateLimit-Limit', 'X-Quota-Left', 'RateLimit-Reset'],
      'default and set names',
    );
    t.equal(byKey['RateLimit-Limit'], '3', 'the narrow limit, least remaining');
    t.equal(byKey['X-Quota-Left'], '2');
    const reset = Number(byKey['RateLimit-Reset']);
    t.ok(reset >= 0 && reset <= 60, `reset within the minute (${reset})`);
    t.same(r.responseHeadersToAdd ?? [], [], 'response headers stay off');
    const json = await svc.postJson(req);
    t.same(
      json.json().requestHeadersToAdd.map((h: { key: string }) => h.key),
      ['RateLimit-Limit', 'X-Quota-Left', 'RateLimit-Reset'],
      '/json carries them too',
    );
  },
);

t.test('request headers are off by default and independent of the response headers', async (t) => {
  const svc = await startTestApp({
    files: { 'h.yaml': HEADER_RULES },
    env: { LIMIT_RESPONSE_HEADERS_ENABLED: 'true' },
  });
  t.teardown(() => svc.close());
  const r = await svc.call({ domain: 'h', descriptors: [descriptor(['narrow', '2'])] });
  t.same(r.requestHeadersToAdd ?? [], []);
  t.equal(r.responseHeadersToAdd?.length, 3);
});
