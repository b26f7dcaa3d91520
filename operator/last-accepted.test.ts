// The last good generation, the tenant rule and the kstatus conditions (pure: reconcile + status).
import t from 'tap';
import { decodeRateLimitConfig } from '../proto/index.js';
import { parseDomainPolicy } from './domain-policy.js';
import { reconcile, type ReconcileOptions } from './reconcile.js';
import type { RateLimitConfigObject } from './resource.js';
import { desiredStatus, VersionIndex, type PodState } from './status.js';

const limit = (key: string, rpu = 10) => ({ key, rate_limit: { unit: 'second', requests_per_unit: rpu } });
/** A nested duplicate, refused by the operator's validator (and, in a cluster, by the CRD's list map). */
const duplicateNested = {
  key: 'n',
  descriptors: [{ key: 'a', descriptors: [limit('x'), limit('x')] }],
};

function rlc(
  name: string,
  spec: Record<string, unknown>,
  opts: {
    created?: string;
    generation?: number;
    namespace?: string;
    lastAccepted?: { generation: number; spec: Record<string, unknown> };
  } = {},
): RateLimitConfigObject {
  return {
    metadata: {
      name,
      namespace: opts.namespace ?? 'default',
      generation: opts.generation ?? 1,
      creationTimestamp: opts.created ?? '2026-01-01T00:00:00Z',
    },
    spec,
    ...(opts.lastAccepted
      ? {
          status: {
            lastAccepted: {
              generation: opts.lastAccepted.generation,
              spec: JSON.stringify(opts.lastAccepted.spec),
            },
          },
        }
      : {}),
  };
}

function served(objects: RateLimitConfigObject[], opts?: ReconcileOptions) {
  const r = reconcile(objects, opts);
  const domains = Object.fromEntries(
    r.resources.map((x) => {
      const m = decodeRateLimitConfig(x.value);
      return [m.domain, m.descriptors.map((d) => `${d.key}:${d.rateLimit?.requestsPerUnit}`)];
    }),
  );
  return { r, domains };
}

function status(r: ReturnType<typeof reconcile>, key: string, pods: PodState[] = [], version = 'v1') {
  const index = new VersionIndex();
  index.record(version, r.contents);
  return desiredStatus({
    verdict: r.verdicts.get(key)!,
    version,
    pods,
    index,
    previous: undefined,
    now: new Date(),
  });
}

const pod = (acked: string | undefined): PodState => ({
  pod: 'p (1.2.3.4:5 via r)',
  ackedVersion: acked,
  lastNack: undefined,
});

t.test('an accepted generation is recorded as lastAccepted and served', async (t) => {
  const spec = { domain: 'api', descriptors: [limit('k', 5)] };
  const { r, domains } = served([rlc('api', spec)]);
  t.same(domains, { api: ['k:5'] });
  const v = r.verdicts.get('default/api')!;
  t.equal(v.servedGeneration, 1);
  t.same(v.lastAccepted, { generation: 1, spec: JSON.stringify(spec) });
  const s = status(r, 'default/api', [pod('v1')]);
  t.equal(s.servedGeneration, 1);
  t.same(s.lastAccepted, v.lastAccepted);
  t.same(
    s.conditions!.map((c) => [c.type, c.status, c.reason]),
    [
      ['Accepted', 'True', 'Accepted'],
      ['Programmed', 'True', 'Programmed'],
      ['Ready', 'True', 'Ready'],
    ],
  );
});

t.test('an invalid edit keeps the last accepted generation served, and status says both', async (t) => {
  const good = { domain: 'api', descriptors: [limit('k', 5)] };
  const bad = { domain: 'api', descriptors: [limit('k', 7), duplicateNested] };
  const { r, domains } = served([
    rlc('api', bad, { generation: 2, lastAccepted: { generation: 1, spec: good } }),
  ]);
  t.same(domains, { api: ['k:5'] }, 'pods keep generation 1');
  t.same([...r.contents], [['default/api', 1]]);
  const v = r.verdicts.get('default/api')!;
  t.equal(v.accepted, false);
  t.equal(v.reason, 'Invalid');
  t.equal(
    v.message,
    "default/api: descriptors[1].descriptors[0].descriptors[1]: duplicate descriptor composite key 'api.n.a.x'",
  );
  t.equal(v.servedGeneration, 1);
  t.equal(v.lastAccepted, undefined, 'lastAccepted is kept as it is');
  const s = status(r, 'default/api', [pod('v1'), pod('v1')]);
  t.equal(s.observedGeneration, 2);
  t.equal(s.servedGeneration, 1);
  t.equal(s.podsAcked, '2/2', 'pods counted against the served generation');
  const [accepted, programmed, ready, stalled] = s.conditions!;
  t.same([accepted.status, accepted.reason], ['False', 'Invalid']);
  t.same([programmed.status, programmed.reason], ['False', 'NotAccepted']);
  t.equal(
    programmed.message,
    'generation 2 is not accepted; pods keep enforcing generation 1, the last accepted: 2/2 connected pods ACKed version v1',
  );
  t.same([ready.type, ready.status, ready.reason], ['Ready', 'False', 'Invalid']);
  t.same([stalled.type, stalled.status, stalled.reason], ['Stalled', 'True', 'Invalid']);
});

t.test('fixing the resource serves the new generation; without lastAccepted nothing is served', async (t) => {
  const good = { domain: 'api', descriptors: [limit('k', 5)] };
  const fixed = { domain: 'api', descriptors: [limit('k', 9)] };
  const { r, domains } = served([
    rlc('api', fixed, { generation: 3, lastAccepted: { generation: 1, spec: good } }),
  ]);
  t.same(domains, { api: ['k:9'] });
  t.equal(r.verdicts.get('default/api')?.servedGeneration, 3);
  t.equal(r.verdicts.get('default/api')?.lastAccepted?.generation, 3);

  const bad = { domain: 'api', descriptors: [duplicateNested] };
  const none = served([rlc('api', bad)]);
  t.same(none.domains, {}, 'never accepted: not served, as before');
  t.equal(none.r.verdicts.get('default/api')?.servedGeneration, undefined);
  const s = status(none.r, 'default/api');
  t.equal(s.servedGeneration, null, 'removed from status');
  t.equal(s.version, null);
  t.equal(s.conditions![1].message, 'not served: the resource is not accepted');
});

t.test('a domain conflict that appears on an edit: the serving owner keeps the domain', async (t) => {
  const specA = { domain: 'a', descriptors: [limit('k', 1)] };
  const specB = { domain: 'x', descriptors: [limit('k', 2)] };
  // The OLDER resource a is edited to claim x, which the younger b serves.
  const aEdited = rlc(
    'a',
    { domain: 'x', descriptors: [limit('k', 3)] },
    {
      generation: 2,
      lastAccepted: { generation: 1, spec: specA },
    },
  );
  const b = rlc('b', specB, {
    created: '2026-01-02T00:00:00Z',
    lastAccepted: { generation: 1, spec: specB },
  });
  const { r, domains } = served([aEdited, b]);
  t.same(domains, { a: ['k:1'], x: ['k:2'] }, 'b keeps x, a keeps serving its generation 1');
  const va = r.verdicts.get('default/a')!;
  t.same([va.accepted, va.reason, va.servedGeneration], [false, 'DomainConflict', 1]);
  t.equal(
    va.message,
    'domain "x" belongs to default/b (which serves it); to share a domain both must set spec.mergeDomain: true',
  );
  t.equal(r.verdicts.get('default/b')?.accepted, true);

  // The younger one edited into the older one's domain: the same, by age as before.
  const bEdited = rlc(
    'b',
    { domain: 'a', descriptors: [limit('k', 4)] },
    {
      created: '2026-01-02T00:00:00Z',
      generation: 2,
      lastAccepted: { generation: 1, spec: specB },
    },
  );
  const a = rlc('a', specA, { lastAccepted: { generation: 1, spec: specA } });
  const second = served([a, bEdited]);
  t.same(second.domains, { a: ['k:1'], x: ['k:2'] });
  t.equal(second.r.verdicts.get('default/b')?.reason, 'DomainConflict');
  t.equal(second.r.verdicts.get('default/b')?.servedGeneration, 1);

  // Without any status (a first start on old objects): the oldest claimant, as before.
  const fresh = served([
    rlc('a', { domain: 'x', descriptors: [limit('k', 3)] }),
    rlc('b', specB, { created: '2026-01-02T00:00:00Z' }),
  ]);
  t.same(fresh.domains, { x: ['k:3'] });
});

t.test(
  'tenant rule: a domain the namespace may not claim is DomainNotAllowed and never served',
  async (t) => {
    const policy = parseDomainPolicy('team-a=checkout,checkout-*;team-b=search;*={namespace}-*')!;
    const objs = [
      rlc(
        'co',
        { domain: 'checkout', mergeDomain: true, descriptors: [limit('k', 1)] },
        { namespace: 'team-a' },
      ),
      rlc('steal', { domain: 'checkout-eu', descriptors: [limit('k', 2)] }, { namespace: 'team-b' }),
      rlc('own', { domain: 'team-b-jobs', descriptors: [limit('k', 3)] }, { namespace: 'team-b' }),
      // A merge into another team's shared domain: refused by the rule before the merge rule applies.
      rlc(
        'extend',
        { domain: 'checkout', mergeDomain: true, descriptors: [limit('extra', 4)] },
        { namespace: 'team-b', created: '2026-01-02T00:00:00Z' },
      ),
      rlc('nobody', { domain: 'search', descriptors: [limit('k', 5)] }, { namespace: 'team-c' }),
    ];
    const { r, domains } = served(objs, { policy });
    t.same(domains, { checkout: ['k:1'], 'team-b-jobs': ['k:3'] });
    for (const [key, domain, ns, allowed] of [
      ['team-b/steal', 'checkout-eu', 'team-b', 'search, team-b-*'],
      ['team-b/extend', 'checkout', 'team-b', 'search, team-b-*'],
      ['team-c/nobody', 'search', 'team-c', 'team-c-*'],
    ]) {
      const v = r.verdicts.get(key)!;
      t.same([v.accepted, v.reason, v.servedGeneration], [false, 'DomainNotAllowed', undefined], key);
      t.equal(
        v.message,
        `namespace "${ns}" may not claim domain "${domain}" (--domain-policy allows it: ${allowed})`,
      );
    }
    // A last accepted generation the rule forbids is not served either.
    const taken = rlc(
      't',
      { domain: 'checkout', descriptors: [duplicateNested] },
      {
        namespace: 'team-b',
        generation: 2,
        lastAccepted: { generation: 1, spec: { domain: 'checkout', descriptors: [limit('k', 9)] } },
      },
    );
    const fb = served([taken], { policy });
    t.same(fb.domains, {});
    t.equal(fb.r.verdicts.get('team-b/t')?.reason, 'Invalid');
    // No rule configured: today's behaviour.
    t.same(served(objs).domains, {
      checkout: ['k:1', 'extra:4'],
      'checkout-eu': ['k:2'],
      'team-b-jobs': ['k:3'],
      search: ['k:5'],
    });
  },
);

t.test('the policy text: patterns, {namespace}, * namespaces, and errors naming the entry', async (t) => {
  const p = parseDomainPolicy(' team-a = a , b-* ; * = {namespace}.* ')!;
  t.ok(p.allows('team-a', 'a'));
  t.ok(p.allows('team-a', 'b-1'));
  t.notOk(p.allows('team-a', 'b'));
  t.ok(p.allows('x', 'x.y'));
  t.notOk(p.allows('x', 'y.x'));
  t.ok(parseDomainPolicy('n=*-mid-*')!.allows('n', 'a-mid-b'));
  t.notOk(parseDomainPolicy('n=*-mid-*')!.allows('n', '-mid'));
  t.equal(parseDomainPolicy(''), undefined);
  t.equal(parseDomainPolicy(undefined), undefined);
  t.throws(() => parseDomainPolicy('team-a'), /"team-a" is not <namespace>=<domain pattern>/);
  t.throws(() => parseDomainPolicy('Team=a'), /"Team=a" is not/);
  t.throws(() => parseDomainPolicy('a=b c'), /pattern "b c" of "a"/);
  t.throws(() => parseDomainPolicy('a={ns}'), /pattern "\{ns\}" of "a"/);
});

t.test(
  'kstatus: Reconciling while pods are to ACK, Stalled on a NACK, Ready only when programmed',
  async (t) => {
    const { r } = served([rlc('api', { domain: 'api', descriptors: [limit('k')] })]);
    const pending = status(r, 'default/api', [pod('v1'), pod('old')]);
    t.same(
      pending.conditions!.slice(2).map((c) => [c.type, c.status, c.reason]),
      [
        ['Ready', 'False', 'Pending'],
        ['Reconciling', 'True', 'Pending'],
      ],
    );
    const noPods = status(r, 'default/api', []);
    t.same(
      noPods.conditions!.slice(2).map((c) => [c.type, c.status, c.reason]),
      [
        ['Ready', 'False', 'NoPods'],
        ['Reconciling', 'True', 'NoPods'],
      ],
    );
    const nacked = status(r, 'default/api', [
      pod('v1'),
      { pod: 'q', ackedVersion: 'old', lastNack: { version: 'v1', message: 'no' } },
    ]);
    t.same(
      nacked.conditions!.slice(2).map((c) => [c.type, c.status, c.reason]),
      [
        ['Ready', 'False', 'Nacked'],
        ['Stalled', 'True', 'Nacked'],
      ],
    );
    for (const c of nacked.conditions!) t.equal(c.observedGeneration, 1);
  },
);

t.test('a spec too large to keep twice has no lastAccepted (removed from status)', async (t) => {
  const many = Array.from({ length: 128 }, (_, i) => ({
    key: `k${i}`,
    descriptors: Array.from({ length: 64 }, (_, j) => ({
      key: `${'x'.repeat(40)}-${j}`,
      rate_limit: { unit: 'second', requests_per_unit: 1 },
    })),
  }));
  const { r } = served([rlc('big', { domain: 'big', descriptors: many })]);
  t.equal(r.verdicts.get('default/big')?.accepted, true);
  t.equal(r.verdicts.get('default/big')?.lastAccepted, null);
  t.equal(status(r, 'default/big').lastAccepted, null);
});
