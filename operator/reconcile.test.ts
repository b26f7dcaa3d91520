import t from 'tap';
import { buildSnapshot, oversizeMessage } from '../control-plane/index.js';
import {
  decodeRateLimitConfig,
  RATELIMIT_CONFIG_TYPE_URL as RATELIMIT_CONFIG_TYPE_URL_FOR_TESTS,
} from '../proto/index.js';
import { lostFieldsMessage, reconcile } from './reconcile.js';
import type { RateLimitConfigObject } from './resource.js';
import { desiredStatus, sameStatus, VersionIndex } from './status.js';

let seq = 0;
function rlc(
  name: string,
  spec: Record<string, unknown>,
  opts: { created?: string; generation?: number; namespace?: string } = {},
): RateLimitConfigObject {
  return {
    apiVersion: 'ratelimit.envoyproxy.io/v1alpha1',
    kind: 'RateLimitConfig',
    metadata: {
      name,
      namespace: opts.namespace ?? 'default',
      uid: `uid-${++seq}`,
      generation: opts.generation ?? 1,
      creationTimestamp: opts.created ?? '2026-01-01T00:00:00Z',
    },
    spec,
  };
}

const limit = (key: string, value?: string, rpu = 10) => ({
  key,
  ...(value ? { value } : {}),
  rate_limit: { unit: 'second', requests_per_unit: rpu },
});

function domains(result: ReturnType<typeof reconcile>) {
  return Object.fromEntries(
    result.resources.map((r) => {
      const m = decodeRateLimitConfig(r.value);
      return [m.domain, m.descriptors.map((d) => `${d.key}=${d.value}:${d.rateLimit?.requestsPerUnit}`)];
    }),
  );
}

t.test('valid resources become one xDS resource per domain and are Accepted', async (t) => {
  const r = reconcile([
    rlc('a', { domain: 'da', descriptors: [limit('k', 'v', 3)] }),
    rlc('b', { domain: 'db', descriptors: [limit('x')] }),
  ]);
  t.same(domains(r), { da: ['k=v:3'], db: ['x=:10'] });
  t.same(
    r.resources.map((x) => [x.name, x.typeUrl]),
    [
      ['da', RATELIMIT_CONFIG_TYPE_URL_FOR_TESTS],
      ['db', RATELIMIT_CONFIG_TYPE_URL_FOR_TESTS],
    ],
  );
  t.equal(r.verdicts.get('default/a')?.accepted, true);
  t.equal(r.verdicts.get('default/a')?.reason, 'Accepted');
  t.same(
    [...r.contents],
    [
      ['default/a', 1],
      ['default/b', 1],
    ],
  );
});

t.test(
  'an invalid resource gets the validator message and never reaches the snapshot; others keep serving',
  async (t) => {
    const r = reconcile([
      rlc('bad', {
        domain: 'bad',
        descriptors: [{ key: 'u', rate_limit: { unlimited: true, unit: 'second' } }],
      }),
      rlc('good', { domain: 'good', descriptors: [limit('k')] }),
    ]);
    const v = r.verdicts.get('default/bad')!;
    t.equal(v.accepted, false);
    t.equal(v.reason, 'Invalid');
    t.equal(
      v.message,
      'default/bad: descriptors[0].rate_limit.unit: should not specify rate limit unit when unlimited',
    );
    t.same(Object.keys(domains(r)), ['good']);
    t.notOk(r.contents.has('default/bad'));
  },
);

t.test('validation reaches below the CRD-unrolled CEL levels', async (t) => {
  let tree: Record<string, unknown> = { key: 'k8', rate_limit: { requests_per_unit: 1 } };
  for (let i = 7; i >= 1; i--) tree = { key: `k${i}`, descriptors: [tree] };
  const r = reconcile([rlc('deep', { domain: 'deep', descriptors: [tree] })]);
  t.equal(r.verdicts.get('default/deep')?.reason, 'Invalid');
  t.match(r.verdicts.get('default/deep')?.message, /invalid rate limit unit ''/);
});

t.test(
  'a domain belongs to the oldest resource; a younger claimant gets DomainConflict naming the owner',
  async (t) => {
    const r = reconcile([
      rlc('young', { domain: 'shared', descriptors: [limit('y')] }, { created: '2026-01-02T00:00:00Z' }),
      rlc('old', { domain: 'shared', descriptors: [limit('o')] }, { created: '2026-01-01T00:00:00Z' }),
    ]);
    t.same(domains(r), { shared: ['o=:10'] });
    const v = r.verdicts.get('default/young')!;
    t.equal(v.reason, 'DomainConflict');
    t.match(v.message, /domain "shared" belongs to default\/old/);
    t.equal(r.verdicts.get('default/old')?.accepted, true);
  },
);

t.test(
  'equal creation times are ordered by namespace/name, so every replica picks the same owner',
  async (t) => {
    const objs = [rlc('b', { domain: 'd' }), rlc('a', { domain: 'd' })];
    t.equal(reconcile(objs).verdicts.get('default/b')?.reason, 'DomainConflict');
    t.equal(reconcile(objs.reverse()).verdicts.get('default/b')?.reason, 'DomainConflict');
  },
);

t.test(
  'resources that opt in with mergeDomain share a domain; a duplicate descriptor is a conflict',
  async (t) => {
    const r = reconcile([
      rlc(
        'one',
        { domain: 's', mergeDomain: true, descriptors: [limit('path', '/a', 1)] },
        { created: '2026-01-01T00:00:00Z' },
      ),
      rlc(
        'two',
        { domain: 's', mergeDomain: true, descriptors: [limit('path', '/b', 2)] },
        { created: '2026-01-02T00:00:00Z' },
      ),
      rlc(
        'dup',
        { domain: 's', mergeDomain: true, descriptors: [limit('path', '/a', 9)] },
        { created: '2026-01-03T00:00:00Z' },
      ),
      rlc('solo', { domain: 's', descriptors: [limit('path', '/c')] }, { created: '2026-01-04T00:00:00Z' }),
    ]);
    t.same(domains(r), { s: ['path=/a:1', 'path=/b:2'] });
    t.equal(r.verdicts.get('default/two')?.accepted, true);
    t.match(r.verdicts.get('default/two')?.message, /merged from default\/one, default\/two/);
    t.equal(r.verdicts.get('default/dup')?.reason, 'DescriptorConflict');
    t.match(
      r.verdicts.get('default/dup')?.message,
      /'path_\/a' of shared domain "s" is already defined by default\/one/,
    );
    t.equal(r.verdicts.get('default/solo')?.reason, 'DomainConflict');
  },
);

t.test('an owner without mergeDomain keeps its domain to itself', async (t) => {
  const r = reconcile([
    rlc('owner', { domain: 's', descriptors: [limit('a')] }, { created: '2026-01-01T00:00:00Z' }),
    rlc(
      'wants',
      { domain: 's', mergeDomain: true, descriptors: [limit('b')] },
      { created: '2026-01-02T00:00:00Z' },
    ),
  ]);
  t.equal(r.verdicts.get('default/wants')?.reason, 'DomainConflict');
  t.match(r.verdicts.get('default/wants')?.message, /both must set spec.mergeDomain: true/);
});

t.test('resources being deleted are left out', async (t) => {
  const gone = rlc('gone', { domain: 'g', descriptors: [limit('a')] });
  gone.metadata.deletionTimestamp = '2026-01-05T00:00:00Z';
  const r = reconcile([gone]);
  t.same(r.resources, []);
  t.notOk(r.verdicts.has('default/gone'));
});

t.test('the same resources give the same version whatever their order (replicas agree)', async (t) => {
  const objs = [
    rlc('a', { domain: 'a', descriptors: [limit('k')] }),
    rlc('b', { domain: 'b', descriptors: [limit('k')] }),
    rlc('c', { domain: 'a', descriptors: [limit('z')] }, { created: '2026-02-01T00:00:00Z' }),
  ];
  const v1 = buildSnapshot(reconcile(objs).resources).resourceSet(
    RATELIMIT_CONFIG_TYPE_URL_FOR_TESTS,
  ).version;
  const v2 = buildSnapshot(reconcile([...objs].reverse()).resources).resourceSet(
    RATELIMIT_CONFIG_TYPE_URL_FOR_TESTS,
  ).version;
  t.equal(v1, v2);
});

t.test('Programmed needs every connected pod to ACK a version containing this generation', async (t) => {
  const r = reconcile([rlc('a', { domain: 'a', descriptors: [limit('k')] }, { generation: 3 })]);
  const verdict = r.verdicts.get('default/a')!;
  const index = new VersionIndex();
  index.record('v1', new Map([['default/a', 2]]));
  index.record('v2', r.contents);
  const now = new Date('2026-01-01T00:00:00Z');
  const status = (pods: Parameters<typeof desiredStatus>[0]['pods']) =>
    desiredStatus({ verdict, version: 'v2', pods, index, previous: undefined, now });
  const prog = (s: ReturnType<typeof status>) => s.conditions!.find((c) => c.type === 'Programmed')!;

  let s = status([]);
  t.equal(prog(s).status, 'False');
  t.equal(prog(s).reason, 'NoPods');

  s = status([
    { pod: 'p1', ackedVersion: 'v2', lastNack: undefined },
    { pod: 'p2', ackedVersion: 'v1', lastNack: undefined },
  ]);
  t.equal(prog(s).reason, 'Pending');
  t.equal(s.podsAcked, '1/2');
  t.same(s.pods, { connected: 2, acked: 1, nacked: 0 });

  s = status([
    { pod: 'p1', ackedVersion: 'v2', lastNack: undefined },
    { pod: 'p2', ackedVersion: 'v1', lastNack: { version: 'v2', message: 'no thanks' } },
  ]);
  t.equal(prog(s).reason, 'Nacked');
  t.equal(prog(s).message, 'pod p2 rejected version v2: no thanks');
  t.same(s.pods, { connected: 2, acked: 1, nacked: 1 });

  // A version the control plane did not send (over the maximum message size): TooLarge, said once.
  const tooLarge = { version: 'v2', message: oversizeMessage(5000, 4096) };
  s = status([
    { pod: 'p1', ackedVersion: 'v1', lastNack: tooLarge },
    { pod: 'p2', ackedVersion: 'v1', lastNack: tooLarge },
  ]);
  t.equal(prog(s).reason, 'TooLarge');
  t.equal(
    prog(s).message,
    'version v2 (with generation 3) is not sent by the control plane: the response is 5000 bytes, over the 4096-byte maximum message size (--max-send-bytes, XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES); pods keep enforcing their previous config',
  );
  t.same(
    s
      .conditions!.filter((c) => c.type === 'Ready' || c.type === 'Stalled')
      .map((c) => [c.type, c.status, c.reason]),
    [
      ['Ready', 'False', 'TooLarge'],
      ['Stalled', 'True', 'TooLarge'],
    ],
  );

  s = status([
    { pod: 'p1', ackedVersion: 'v2', lastNack: undefined },
    { pod: 'p2', ackedVersion: 'v2', lastNack: undefined },
  ]);
  t.equal(prog(s).status, 'True');
  t.equal(s.podsAcked, '2/2');
  t.equal(s.observedGeneration, 3);
  t.equal(s.conditions![0].observedGeneration, 3);
  t.equal(s.conditions![0].type, 'Accepted');
  t.equal(s.conditions![0].status, 'True');

  // lastTransitionTime stays while the status stays
  const later = desiredStatus({
    verdict,
    version: 'v2',
    pods: [{ pod: 'p1', ackedVersion: 'v2', lastNack: undefined }],
    index,
    previous: s,
    now: new Date('2026-01-02T00:00:00Z'),
  });
  t.equal(later.conditions![1].lastTransitionTime, s.conditions![1].lastTransitionTime);
  t.notOk(sameStatus(s, later));
  t.ok(
    sameStatus(later, {
      ...later,
      conditions: later.conditions!.map((c) => ({ ...c, lastTransitionTime: 'x' })),
    }),
  );
});

t.test('a rejected resource is Programmed=False NotAccepted, Ready=False and Stalled', async (t) => {
  const r = reconcile([rlc('bad', { domain: '' })]);
  const s = desiredStatus({
    verdict: r.verdicts.get('default/bad')!,
    version: 'v',
    pods: [],
    index: new VersionIndex(),
    previous: undefined,
    now: new Date(),
  });
  t.same(
    s.conditions!.map((c) => [c.type, c.status, c.reason]),
    [
      ['Accepted', 'False', 'Invalid'],
      ['Programmed', 'False', 'NotAccepted'],
      ['Ready', 'False', 'Invalid'],
      ['Stalled', 'True', 'Invalid'],
    ],
  );
  t.equal(s.conditions![0].message, 'default/bad: domain: config file cannot have empty domain');
});

t.test(
  'value_to_metric, share_threshold, metadata, algorithm and rate_limits cross xDS: nothing is reported lost',
  async (t) => {
    const r = reconcile([
      rlc('metrics', {
        domain: 'metrics',
        descriptors: [
          { key: 'route', detailed_metric: true, rate_limit: { unit: 'second', requests_per_unit: 50 } },
          {
            key: 'method',
            value_to_metric: true,
            descriptors: [
              {
                key: 'path',
                metadata: { team: 'search' },
                rate_limit: { unit: 'minute', requests_per_unit: 600, algorithm: 'sliding_window' },
              },
            ],
          },
          { ...limit('tenant', 'trial-*'), share_threshold: true },
          {
            key: 'user',
            rate_limits: [{ unit: 'second', requests_per_unit: 5, algorithm: 'token_bucket', burst: 9 }],
          },
        ],
      }),
    ]);
    const v = r.verdicts.get('default/metrics')!;
    t.equal(v.accepted, true);
    t.same(v.lostFields, []);
    t.equal(v.message, 'domain "metrics" is served');
  },
);

t.test('quota_unit is served from files and the CRD but named as not carried over xDS', async (t) => {
  const r = reconcile([
    rlc('llm', {
      domain: 'llm',
      descriptors: [
        {
          key: 'upload',
          rate_limit: { unit: 'second', requests_per_unit: 1e6, quota_unit: 'content-bytes' },
        },
        {
          key: 'user',
          rate_limits: [
            { unit: 'day', requests_per_unit: 100000, quota_unit: 'tokens' },
            { unit: 'month', requests_per_unit: 2000000, quota_unit: 'requests' },
          ],
        },
      ],
    }),
  ]);
  const v = r.verdicts.get('default/llm')!;
  t.equal(v.accepted, true);
  t.same(v.lostFields, [
    'spec.descriptors[0].rate_limit.quota_unit',
    'spec.descriptors[1].rate_limits[0].quota_unit',
    'spec.descriptors[1].rate_limits[1].quota_unit',
  ]);
  t.match(
    v.message,
    /not carried over xDS, so pods never see: spec\.descriptors\[0\]\.rate_limit\.quota_unit/,
  );
});

t.test('lost fields are named by spec path and a long list is cut in the condition message', async (t) => {
  const lost = Array.from({ length: 13 }, (_, i) => `spec.descriptors[${i}].future_field`);
  const message = lostFieldsMessage(lost);
  t.match(message, /^; not carried over xDS, so pods never see: spec\.descriptors\[0\]\.future_field/);
  t.match(message, /spec\.descriptors\[9\]\.future_field \(and 3 more\)$/);
  t.notMatch(message, /descriptors\[10\]/);
  t.equal(lostFieldsMessage([]), '');
});
