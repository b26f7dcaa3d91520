// Decision semantics beyond the basic scenarios, on the in-memory store: shadow mode, replaces,
// headers, quota mode, STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT, the local over-limit cache, stats.
import t from 'tap';
import { descriptor, startTestApp, roomInWindow } from './test-support.js';

// Counting tests must not straddle a minute boundary (see roomInWindow).
t.beforeEach(() => roomInWindow());

const CONFIG = `
domain: d
descriptors:
  - key: shadow
    shadow_mode: true
    rate_limit: { unit: minute, requests_per_unit: 1 }
  - key: plain
    rate_limit: { unit: minute, requests_per_unit: 1 }
  - key: big
    rate_limit: { unit: minute, requests_per_unit: 100 }
  - key: named
    rate_limit:
      unit: minute
      requests_per_unit: 1
      name: base
  - key: special
    rate_limit:
      unit: minute
      requests_per_unit: 3
      replaces: [{ name: base }]
  - key: quota
    quota_mode: true
    rate_limit: { unit: minute, requests_per_unit: 1 }
  - key: quota2
    quota_mode: true
    rate_limit: { unit: minute, requests_per_unit: 5 }
  - key: near
    rate_limit: { unit: minute, requests_per_unit: 10 }
`;

t.test('per-rule shadow mode: evaluated and counted, but always OK', async (t) => {
  const svc = await startTestApp({ files: { 'd.yaml': CONFIG } });
  t.teardown(() => svc.close());
  await svc.call({ domain: 'd', descriptors: [descriptor(['shadow', 'a'])] });
  const r = await svc.call({ domain: 'd', descriptors: [descriptor(['shadow', 'a'])] });
  t.equal(r.overallCode, 'OK');
  t.equal(r.statuses[0].code, 'OK');
  t.equal(r.statuses[0].limitRemaining ?? 0, 0);
  const s = svc.app.stats.snapshot();
  t.equal(s['ratelimit.service.rate_limit.d.shadow.shadow_mode'], 1);
  t.equal(s['ratelimit.service.rate_limit.d.shadow.over_limit'], 1);
});

t.test('global SHADOW_MODE turns OVER_LIMIT into OK and counts it; statuses keep the truth', async (t) => {
  const svc = await startTestApp({ files: { 'd.yaml': CONFIG }, env: { SHADOW_MODE: 'true' } });
  t.teardown(() => svc.close());
  await svc.call({ domain: 'd', descriptors: [descriptor(['plain', 'a'])] });
  const r = await svc.call({ domain: 'd', descriptors: [descriptor(['plain', 'a'])] });
  t.equal(r.overallCode, 'OK');
  t.equal(r.statuses[0].code, 'OVER_LIMIT');
  t.equal(svc.app.stats.snapshot()['ratelimit.service.global_shadow_mode'], 1);
  const http = await svc.postJson({ domain: 'd', descriptors: [descriptor(['plain', 'a'])] });
  t.equal(http.status, 200, 'HTTP follows the overall code');
});

t.test('replaces: the replacing rule applies and the replaced one is not counted', async (t) => {
  const svc = await startTestApp({ files: { 'd.yaml': CONFIG } });
  t.teardown(() => svc.close());
  for (let i = 0; i < 3; i++) {
    const r = await svc.call({
      domain: 'd',
      descriptors: [descriptor(['named', 'x']), descriptor(['special', 'y'])],
    });
    t.equal(r.overallCode, 'OK', `hit ${i + 1} OK under the 3/min replacement`);
    t.notOk(r.statuses[0].currentLimit, 'the replaced rule has no status limit');
  }
  const s = svc.app.stats.snapshot();
  t.notOk(s['ratelimit.service.rate_limit.d.named.total_hits'], 'replaced rule not counted');
  const alone = await svc.call({ domain: 'd', descriptors: [descriptor(['named', 'x'])] });
  t.equal(
    alone.statuses[0].limitRemaining ?? 0,
    0,
    'the replaced rule still applies on its own, counter untouched (first hit)',
  );
  t.equal(alone.overallCode, 'OK');
});

t.test(
  'LIMIT_RESPONSE_HEADERS_ENABLED adds limit headers of the descriptor closest to its limit',
  async (t) => {
    const svc = await startTestApp({
      files: { 'd.yaml': CONFIG },
      env: { LIMIT_RESPONSE_HEADERS_ENABLED: 'true', LIMIT_REMAINING_HEADER: 'X-Left' },
    });
    t.teardown(() => svc.close());
    const r = await svc.call({
      domain: 'd',
      descriptors: [descriptor(['big', 'a']), descriptor(['near', 'a'])],
    });
    const h = Object.fromEntries((r.responseHeadersToAdd ?? []).map((x) => [x.key, x.value]));
    t.equal(h['RateLimit-Limit'], '10');
    t.equal(h['X-Left'], '9');
    t.ok(Number(h['RateLimit-Reset']) > 0 && Number(h['RateLimit-Reset']) <= 60);
  },
);

t.test('quota mode: OVER_LIMIT only when every quota descriptor is exhausted', async (t) => {
  const svc = await startTestApp({ files: { 'd.yaml': CONFIG } });
  t.teardown(() => svc.close());
  await svc.call({ domain: 'd', descriptors: [descriptor(['quota', 'a'])] });
  const r = await svc.call({
    domain: 'd',
    descriptors: [descriptor(['quota', 'a']), descriptor(['quota2', 'a'])],
  });
  t.equal(r.statuses[0].code, 'OVER_LIMIT');
  t.equal(r.overallCode, 'OK', 'quota2 still has room');
  const alone = await svc.call({ domain: 'd', descriptors: [descriptor(['quota', 'a'])] });
  t.equal(alone.overallCode, 'OVER_LIMIT', 'the only quota descriptor is exhausted');
});

t.test('near_limit, within_limit and over_limit statistics follow the reference arithmetic', async (t) => {
  const svc = await startTestApp({ files: { 'd.yaml': CONFIG } });
  t.teardown(() => svc.close());
  for (let i = 0; i < 12; i++) await svc.call({ domain: 'd', descriptors: [descriptor(['near', 'n'])] });
  const s = svc.app.stats.snapshot();
  const p = 'ratelimit.service.rate_limit.d.near.';
  t.equal(s[p + 'total_hits'], 12);
  t.equal(s[p + 'within_limit'], 10);
  t.equal(s[p + 'near_limit'], 2, 'hits 9 and 10 are above 0.8 * 10');
  t.equal(s[p + 'over_limit'], 2);
});

t.test(
  'STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT: other descriptors are not counted once one is over',
  async (t) => {
    const svc = await startTestApp({
      files: { 'd.yaml': CONFIG },
      env: { STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT: 'true' },
    });
    t.teardown(() => svc.close());
    await svc.call({ domain: 'd', descriptors: [descriptor(['plain', 's'])] });
    for (let i = 0; i < 3; i++) {
      await svc.call({ domain: 'd', descriptors: [descriptor(['plain', 's']), descriptor(['big', 's'])] });
    }
    const r = await svc.call({ domain: 'd', descriptors: [descriptor(['big', 's'])] });
    t.equal(r.statuses[0].limitRemaining, 99, 'big counted only by its own request');

    const ctl = await startTestApp({ files: { 'd.yaml': CONFIG } });
    t.teardown(() => ctl.close());
    await ctl.call({ domain: 'd', descriptors: [descriptor(['plain', 's'])] });
    for (let i = 0; i < 3; i++) {
      await ctl.call({ domain: 'd', descriptors: [descriptor(['plain', 's']), descriptor(['big', 's'])] });
    }
    const c = await ctl.call({ domain: 'd', descriptors: [descriptor(['big', 's'])] });
    t.equal(c.statuses[0].limitRemaining, 96, 'without the setting every descriptor counts');
  },
);

t.test('the local over-limit cache answers known over-limit keys without the store', async (t) => {
  const svc = await startTestApp({
    files: { 'd.yaml': CONFIG },
    env: { LOCAL_CACHE_SIZE_IN_BYTES: '100000' },
  });
  t.teardown(() => svc.close());
  await svc.call({ domain: 'd', descriptors: [descriptor(['plain', 'lc'])] });
  await svc.call({ domain: 'd', descriptors: [descriptor(['plain', 'lc'])] });
  const r = await svc.call({ domain: 'd', descriptors: [descriptor(['plain', 'lc'])] });
  t.equal(r.overallCode, 'OVER_LIMIT');
  const s = svc.app.stats.snapshot();
  t.equal(s['ratelimit.service.rate_limit.d.plain.over_limit_with_local_cache'], 1);
});
