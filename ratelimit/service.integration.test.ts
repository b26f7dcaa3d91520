// The reference's integration scenarios through real gRPC and HTTP, counting in a real redis-server.
import t from 'tap';
import { status as GrpcStatus } from '@grpc/grpc-js';
import { startRedis } from '../harness/redis/index.js';
import { descriptor, startTestApp, type TestApp, roomInWindow } from './test-support.js';

// Counting tests must not straddle a minute boundary (see roomInWindow).
t.beforeEach(() => roomInWindow());

const CONFIG = `
domain: basic
descriptors:
  - key: key1
    rate_limit:
      unit: second
      requests_per_unit: 50
  - key: key2
    rate_limit:
      unit: minute
      requests_per_unit: 20
  - key: key3
    rate_limit:
      unit: hour
      requests_per_unit: 10
  - key: blocked
    rate_limit:
      unit: minute
      requests_per_unit: 0
  - key: unlimited
    rate_limit:
      unlimited: true
`;

const redis = await startRedis();
t.teardown(() => redis.stop());
const prefix = `it${process.pid}_`;
const svc: TestApp = await startTestApp({
  files: { 'basic.yaml': CONFIG },
  env: {
    BACKEND_TYPE: 'redis',
    REDIS_SOCKET_TYPE: 'tcp',
    REDIS_URL: redis.url,
    CACHE_KEY_PREFIX: prefix,
    RUNTIME_WATCH_ROOT: 'false',
  },
});
t.teardown(() => svc.close());
const rc = redis.client();

t.test('an unknown domain answers OK for every descriptor, with no limit', async (t) => {
  const r = await svc.call({
    domain: 'nope',
    descriptors: [descriptor(['key1', 'x']), descriptor(['key2', 'y'])],
  });
  t.equal(r.overallCode, 'OK');
  t.equal(r.statuses.length, 2);
  for (const s of r.statuses) {
    t.equal(s.code, 'OK');
    t.notOk(s.currentLimit, 'no limit');
  }
});

t.test('the first hit leaves 49 of 50, and counts under the reference key format', async (t) => {
  const r = await svc.call({ domain: 'basic', descriptors: [descriptor(['key1', 'first'])] });
  t.equal(r.overallCode, 'OK');
  t.equal(r.statuses[0].code, 'OK');
  t.same(r.statuses[0].currentLimit, { requestsPerUnit: 50, unit: 'SECOND' });
  t.equal(r.statuses[0].limitRemaining, 49);
  const keys = await rc.keys(`${prefix}basic_key1_first_*`);
  t.equal(keys.length, 1, 'one counter key');
  t.match(keys[0], new RegExp(`^${prefix}basic_key1_first_\\d+$`));
  const ttl = await rc.ttl(keys[0]);
  t.ok(ttl > 0 && ttl <= 1, `expiry set to the unit (ttl ${ttl})`);
});

t.test('25 hits on a 20 per minute key: 20 OK counting down, then OVER_LIMIT', async (t) => {
  const value = `v${Date.now()}`;
  for (let i = 1; i <= 25; i++) {
    const r = await svc.call({ domain: 'basic', descriptors: [descriptor(['key2', value])] });
    if (i <= 20) {
      t.equal(r.overallCode, 'OK', `hit ${i} OK`);
      t.equal(r.statuses[0].limitRemaining ?? 0, 20 - i, `hit ${i} remaining`);
    } else {
      t.equal(r.overallCode, 'OVER_LIMIT', `hit ${i} over limit`);
      t.equal(r.statuses[0].code, 'OVER_LIMIT');
      t.equal(r.statuses[0].limitRemaining ?? 0, 0);
    }
  }
  const [key] = await rc.keys(`${prefix}basic_key2_${value}_*`);
  t.equal(await rc.get(key), '25', 'redis holds the exact count');
  const stats = svc.app.stats.snapshot();
  t.equal(stats['ratelimit.service.rate_limit.basic.key2.over_limit'], 5);
});

t.test('two descriptors in one request are decided separately and ORed', async (t) => {
  const v = `two${Date.now()}`;
  let last;
  for (let i = 0; i < 11; i++) {
    last = await svc.call({
      domain: 'basic',
      descriptors: [descriptor(['key2', v]), descriptor(['key3', v])],
    });
  }
  t.equal(last!.statuses[0].code, 'OK', 'key2 (20/min) still OK after 11');
  t.equal(last!.statuses[0].limitRemaining, 9);
  t.equal(last!.statuses[1].code, 'OVER_LIMIT', 'key3 (10/hour) over after 11');
  t.equal(last!.overallCode, 'OVER_LIMIT');
});

t.test('the reset countdown is the rest of the current window', async (t) => {
  const before = Math.floor(Date.now() / 1000);
  const r = await svc.call({ domain: 'basic', descriptors: [descriptor(['key3', `reset${before}`])] });
  const after = Math.floor(Date.now() / 1000);
  const secs = r.statuses[0].durationUntilReset!.seconds;
  t.ok(
    secs === 3600 - (before % 3600) || secs === 3600 - (after % 3600),
    `reset ${secs}s matches the hour window`,
  );
});

t.test('requests_per_unit 0 blocks every request; unlimited answers max uint32', async (t) => {
  const r = await svc.call({
    domain: 'basic',
    descriptors: [descriptor(['blocked', 'a']), descriptor(['unlimited', 'b'])],
  });
  t.equal(r.statuses[0].code, 'OVER_LIMIT');
  t.equal(r.statuses[1].code, 'OK');
  t.equal(r.statuses[1].limitRemaining, 4294967295);
  t.equal((await rc.keys(`${prefix}basic_unlimited_*`)).length, 0, 'unlimited never reaches redis');
});

t.test('HTTP /json: 200 when OK, 429 when over, proto3 JSON body', async (t) => {
  const ok = await svc.postJson({
    domain: 'basic',
    descriptors: [{ entries: [{ key: 'key1', value: 'http' }] }],
  });
  t.equal(ok.status, 200);
  const body = ok.json();
  t.equal(body.overallCode, 'OK');
  t.same(body.statuses[0].currentLimit, { requestsPerUnit: 50, unit: 'SECOND' });
  t.equal(body.statuses[0].limitRemaining, 49);
  t.match(body.statuses[0].durationUntilReset, /^\d+s$/);
  const over = await svc.postJson({
    domain: 'basic',
    descriptors: [{ entries: [{ key: 'blocked', value: 'x' }] }],
  });
  t.equal(over.status, 429);
  t.equal(over.json().overallCode, 'OVER_LIMIT');
});

t.test('HTTP /json: 400 for bad JSON, an empty domain, no descriptors, unknown fields', async (t) => {
  const bad = await svc.postJson('{"domain": ');
  t.equal(bad.status, 400);
  const empty = await svc.postJson({ domain: '', descriptors: [{ entries: [{ key: 'a', value: 'b' }] }] });
  t.equal(empty.status, 400);
  t.match(empty.body, 'rate limit domain must not be empty');
  const none = await svc.postJson({ domain: 'basic', descriptors: [] });
  t.equal(none.status, 400);
  t.match(none.body, 'rate limit descriptor list must not be empty');
  const form = await fetch(`${svc.httpUrl}/json`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: JSON.stringify({ domain: 'basic', descriptors: [{ entries: [{ key: 'key1', value: 'curl' }] }] }),
  });
  t.equal(form.status, 200, 'curl -d (form content type) is read as JSON, as the reference does');
  const plain = await fetch(`${svc.httpUrl}/json`, {
    method: 'POST',
    body: JSON.stringify({ domain: 'basic', descriptors: [{ entries: [{ key: 'key1', value: 'plain' }] }] }),
  });
  t.equal(plain.status, 200, 'text/plain (fetch with a string body) is read as JSON too');
  const unknown = await svc.postJson({ domain: 'basic', descriptors: [], bogus: 1 });
  t.equal(unknown.status, 400);
  t.match(unknown.body, "unknown field 'bogus'");
});

t.test('gRPC: protocol validation errors are INVALID_ARGUMENT with the field named', async (t) => {
  await t.rejects(svc.call({ domain: '', descriptors: [descriptor(['a', 'b'])] }), {
    code: GrpcStatus.INVALID_ARGUMENT,
    details: 'rate limit domain must not be empty',
  });
  await t.rejects(svc.call({ domain: 'basic', descriptors: [{ entries: [{ key: '', value: 'b' }] }] }), {
    code: GrpcStatus.INVALID_ARGUMENT,
    details: 'descriptors[0].entries[0].key: must not be empty',
  });
  await t.rejects(svc.call({ domain: 'basic', descriptors: [{ entries: [] }] }), {
    code: GrpcStatus.INVALID_ARGUMENT,
    details: 'descriptors[0].entries: must not be empty',
  });
  await t.rejects(
    svc.call({
      domain: 'basic',
      descriptors: [{ entries: [{ key: 'k', value: 'v' }], limit: { requestsPerUnit: 5, unit: 'UNKNOWN' } }],
    }),
    { code: GrpcStatus.INVALID_ARGUMENT, details: /descriptors\[0\]\.limit\.unit: unknown rate limit unit/ },
  );
  t.ok(svc.app.stats.snapshot()['ratelimit.service.call.should_rate_limit.service_error'] >= 4);
});

t.test(
  'an empty value (Envoy sends one for a present but empty header) takes the key-only rule',
  async (t) => {
    const r = await svc.call({ domain: 'basic', descriptors: [{ entries: [{ key: 'key2', value: '' }] }] });
    t.equal(r.overallCode, 'OK');
    t.same(r.statuses[0].currentLimit, { requestsPerUnit: 20, unit: 'MINUTE' });
    const keys = await rc.keys(`${prefix}basic_key2__*`);
    t.equal(keys.length, 1, 'counted under key2 with an empty value, as the reference keys it');
    const viaJson = await svc.postJson({ domain: 'basic', descriptors: [{ entries: [{ key: 'key2' }] }] });
    t.equal(viaJson.status, 200, '/json: an absent value is the empty string');
  },
);

t.test('a request-supplied limit override applies with its own unit', async (t) => {
  const v = `ovr${Date.now()}`;
  const req = {
    domain: 'basic',
    descriptors: [
      { entries: [{ key: 'key1', value: v }], limit: { requestsPerUnit: 2, unit: 'WEEK' as const } },
    ],
  };
  const r1 = await svc.call(req);
  t.same(r1.statuses[0].currentLimit, { requestsPerUnit: 2, unit: 'WEEK' });
  t.equal(r1.statuses[0].limitRemaining, 1);
  await svc.call(req);
  const r3 = await svc.call(req);
  t.equal(r3.overallCode, 'OVER_LIMIT');
});

t.test('hits_addend counts several hits at once, per request and per descriptor', async (t) => {
  const v = `hits${Date.now()}`;
  const r = await svc.call({ domain: 'basic', hitsAddend: 5, descriptors: [descriptor(['key2', v])] });
  t.equal(r.statuses[0].limitRemaining, 15);
  const r2 = await svc.call({
    domain: 'basic',
    descriptors: [{ ...descriptor(['key2', v]), hitsAddend: { value: 7 } }],
  });
  t.equal(r2.statuses[0].limitRemaining, 8);
});

t.test(
  'a redis outage is an error (gRPC UNAVAILABLE, HTTP 500), counted, and the process recovers',
  async (t) => {
    await redis.kill();
    await t.rejects(svc.call({ domain: 'basic', descriptors: [descriptor(['key1', 'down'])] }), {
      code: GrpcStatus.UNAVAILABLE,
    });
    const http = await svc.postJson({
      domain: 'basic',
      descriptors: [{ entries: [{ key: 'key1', value: 'down' }] }],
    });
    t.equal(http.status, 500);
    t.ok(
      svc.app.stats.snapshot()['ratelimit.service.call.should_rate_limit.redis_error'] >= 2,
      'redis_error counted',
    );
    await redis.restart();
    const until = Date.now() + 10_000;
    let recovered = false;
    while (Date.now() < until && !recovered) {
      try {
        const r = await svc.call({ domain: 'basic', descriptors: [descriptor(['key1', 'back'])] });
        recovered = r.overallCode === 'OK';
      } catch {
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    t.ok(recovered, 'decisions work again once redis is back');
  },
);
