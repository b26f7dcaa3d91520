// Refunds (a descriptor's is_negative_hits) through the whole service on the memory store, over gRPC
// and /json: the hits are returned instead of consumed, always OK, clamped at zero, counted in
// total_negative_hits (not total_hits); on shadow-mode and unlimited rules, with hits_addend 0, from
// the request's hits_addend, and past the local over-limit cache.
import t from 'tap';
import { descriptor, startTestApp, roomInWindow } from './test-support.js';

t.beforeEach(() => roomInWindow());

const CONFIG = `
domain: d
descriptors:
  - key: plain
    rate_limit: { unit: minute, requests_per_unit: 5 }
  - key: shadow
    shadow_mode: true
    rate_limit: { unit: minute, requests_per_unit: 2 }
  - key: free
    rate_limit: { unlimited: true }
  - key: sw
    rate_limit: { unit: minute, requests_per_unit: 4, algorithm: sliding_window }
`;

const refund = (pair: [string, string], hits?: number) => ({
  ...descriptor(pair),
  isNegativeHits: true,
  ...(hits === undefined ? {} : { hitsAddend: { value: hits } }),
});
const hit = (pair: [string, string], hits: number) => ({ ...descriptor(pair), hitsAddend: { value: hits } });

t.test('a refund returns hits to a fixed window, clamped at zero, always OK', async (t) => {
  const svc = await startTestApp({ files: { 'd.yaml': CONFIG } });
  t.teardown(() => svc.close());
  const over = await svc.call({ domain: 'd', descriptors: [hit(['plain', 'a'], 6)] });
  t.equal(over.overallCode, 'OVER_LIMIT', '6 of 5: over');
  const back = await svc.call({ domain: 'd', descriptors: [refund(['plain', 'a'], 3)] });
  t.equal(back.overallCode, 'OK');
  t.equal(back.statuses[0]!.code, 'OK');
  t.equal(back.statuses[0]!.limitRemaining, 2, 'count 6 - 3 = 3: 2 remain');
  t.same(back.statuses[0]!.currentLimit, { requestsPerUnit: 5, unit: 'MINUTE' });
  const more = await svc.call({ domain: 'd', descriptors: [refund(['plain', 'a'], 100)] });
  t.equal(more.statuses[0]!.limitRemaining, 5, 'clamped at zero: the whole limit remains, not more');
  const again = await svc.call({ domain: 'd', descriptors: [hit(['plain', 'a'], 5)] });
  t.equal(again.overallCode, 'OK', 'exactly the budget fits again');
  t.equal(again.statuses[0]!.limitRemaining ?? 0, 0);
  const s = svc.app.stats.snapshot();
  t.equal(s['ratelimit.service.rate_limit.d.plain.total_negative_hits'], 103, 'requested refunds counted');
  t.equal(s['ratelimit.service.rate_limit.d.plain.total_hits'], 11, 'refunds are not hits');
  t.equal(s['ratelimit.service.rate_limit.d.plain.within_limit'], 5);
});

t.test("a refund without its own hits_addend returns the request's (or 1)", async (t) => {
  const svc = await startTestApp({ files: { 'd.yaml': CONFIG } });
  t.teardown(() => svc.close());
  await svc.call({ domain: 'd', descriptors: [hit(['plain', 'r'], 5)] });
  const r = await svc.call({ domain: 'd', hitsAddend: 2, descriptors: [refund(['plain', 'r'])] });
  t.equal(r.statuses[0]!.limitRemaining, 2, "the request's hits_addend 2 returned");
  const one = await svc.call({ domain: 'd', descriptors: [refund(['plain', 'r'])] });
  t.equal(one.statuses[0]!.limitRemaining, 3, 'no hits_addend anywhere: 1 returned');
});

t.test(
  'hits_addend 0: nothing returned, OK; a refund beside a hit leaves the hit its own answer',
  async (t) => {
    const svc = await startTestApp({ files: { 'd.yaml': CONFIG } });
    t.teardown(() => svc.close());
    await svc.call({ domain: 'd', descriptors: [hit(['plain', 'z'], 6)] });
    const zero = await svc.call({ domain: 'd', descriptors: [refund(['plain', 'z'], 0)] });
    t.equal(zero.overallCode, 'OK', 'a zero refund of an over-limit key is still OK');
    t.equal(zero.statuses[0]!.limitRemaining ?? 0, 0, 'and changes nothing');
    const mixed = await svc.call({
      domain: 'd',
      descriptors: [hit(['plain', 'z'], 1), refund(['sw', 'z'], 1)],
    });
    t.equal(mixed.overallCode, 'OVER_LIMIT', 'the hit is over limit');
    t.same(
      mixed.statuses.map((s) => s.code),
      ['OVER_LIMIT', 'OK'],
    );
    t.equal(svc.app.stats.snapshot()['ratelimit.service.rate_limit.d.plain.total_negative_hits'] ?? 0, 0);
  },
);

t.test('shadow mode: the refund is applied as on any rule; unlimited: answered locally', async (t) => {
  const svc = await startTestApp({ files: { 'd.yaml': CONFIG } });
  t.teardown(() => svc.close());
  await svc.call({ domain: 'd', descriptors: [hit(['shadow', 's'], 3)] });
  const r = await svc.call({ domain: 'd', descriptors: [refund(['shadow', 's'], 2)] });
  t.equal(r.statuses[0]!.code, 'OK');
  t.equal(r.statuses[0]!.limitRemaining, 1, 'count 3 - 2 = 1 of 2');
  const next = await svc.call({ domain: 'd', descriptors: [hit(['shadow', 's'], 1)] });
  t.equal(next.statuses[0]!.limitRemaining ?? 0, 0, 'the refunded hit fits');
  const s1 = svc.app.stats.snapshot();
  t.equal(s1['ratelimit.service.rate_limit.d.shadow.shadow_mode'], 3, 'only the first request was shadowed');

  const free = await svc.call({ domain: 'd', descriptors: [refund(['free', 'f'], 4)] });
  t.equal(free.statuses[0]!.code, 'OK');
  t.equal(free.statuses[0]!.limitRemaining, 4294967295, 'unlimited: as for a hit');
  const s2 = svc.app.stats.snapshot();
  t.equal(s2['ratelimit.service.rate_limit.d.free.total_negative_hits'], 4);
  t.equal(s2['ratelimit.service.rate_limit.d.free.total_hits'] ?? 0, 0);
});

t.test('a refund on a sliding window: budget returned within the limit', async (t) => {
  const svc = await startTestApp({ files: { 'd.yaml': CONFIG } });
  t.teardown(() => svc.close());
  await svc.call({ domain: 'd', descriptors: [hit(['sw', 'w'], 4)] });
  t.equal((await svc.call({ domain: 'd', descriptors: [hit(['sw', 'w'], 1)] })).overallCode, 'OVER_LIMIT');
  const r = await svc.call({ domain: 'd', descriptors: [refund(['sw', 'w'], 9)] });
  t.equal(r.statuses[0]!.limitRemaining, 4, 'all of the window returned, never more than the limit');
});

t.test('/json: is_negative_hits and isNegativeHits, as protobuf JSON reads them', async (t) => {
  const svc = await startTestApp({ files: { 'd.yaml': CONFIG } });
  t.teardown(() => svc.close());
  await svc.postJson({ domain: 'd', descriptors: [{ ...descriptor(['plain', 'j']), hits_addend: 5 }] });
  for (const [name, n] of [
    ['is_negative_hits', 1],
    ['isNegativeHits', 2],
  ] as const) {
    const res = await svc.postJson({
      domain: 'd',
      descriptors: [{ ...descriptor(['plain', 'j']), hits_addend: 1, [name]: true }],
    });
    t.equal(res.status, 200, name);
    t.equal(res.json().statuses[0].limitRemaining, n, `${name}: one hit returned`);
  }
  const off = await svc.postJson({
    domain: 'd',
    descriptors: [{ ...descriptor(['plain', 'j']), hits_addend: 1, isNegativeHits: false }],
  });
  t.equal(off.json().statuses[0].limitRemaining, 1, 'false: a hit');
  const bad = await svc.postJson({
    domain: 'd',
    descriptors: [{ ...descriptor(['plain', 'j']), is_negative_hits: 'yes' }],
  });
  t.equal(bad.status, 400, 'not a bool: the caller’s error');
  t.match(bad.body, /is_negative_hits: expected true or false/);
});

t.test('a refund brings a key out of the local over-limit cache at once', async (t) => {
  const svc = await startTestApp({
    files: { 'd.yaml': CONFIG },
    env: { LOCAL_CACHE_SIZE_IN_BYTES: '100000' },
  });
  t.teardown(() => svc.close());
  await svc.call({ domain: 'd', descriptors: [hit(['plain', 'lc'], 6)] });
  const cached = await svc.call({ domain: 'd', descriptors: [hit(['plain', 'lc'], 1)] });
  t.equal(cached.overallCode, 'OVER_LIMIT');
  t.equal(svc.app.stats.snapshot()['ratelimit.service.rate_limit.d.plain.over_limit_with_local_cache'], 1);
  const r = await svc.call({ domain: 'd', descriptors: [refund(['plain', 'lc'], 3)] });
  t.equal(r.statuses[0]!.limitRemaining, 2, 'the refund reached the store (count 6 - 3)');
  const after = await svc.call({ domain: 'd', descriptors: [hit(['plain', 'lc'], 1)] });
  t.equal(after.overallCode, 'OK', 'the next hit is decided by the store again');
  t.equal(after.statuses[0]!.limitRemaining, 1);
});
