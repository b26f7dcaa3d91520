// Named limits end to end: a service on real Redis, called over real gRPC and /json with several
// descriptors (one of them a rule with several rate_limits), must say in the response alone which
// limit rejected: the IETF RateLimit-Policy / RateLimit headers list it first, the dynamic metadata
// names it, a log line and a per-name statistic count it. With the settings off, none of it appears.
import t from 'tap';
import { startRedis } from '../harness/redis/index.js';
import { createLogger } from '../common/index.js';
import { descriptor, roomInWindow, startTestApp } from './test-support.js';
import { fromStruct } from './service/index.js';
import type { WireHeader, WireRateLimitRequest } from '../proto/index.js';

const CONFIG = `
domain: shop
descriptors:
  - key: tenant
    value: acme
    rate_limit: { name: acme-tenant, unit: minute, requests_per_unit: 1 }
  - key: path
    descriptors:
      - key: user
        rate_limits:
          - { unit: second, requests_per_unit: 1000 }
          - { unit: minute, requests_per_unit: 2 }
  - key: client
    rate_limit: { unit: minute, requests_per_unit: 50 }
`;

const ON = {
  NAMED_LIMITS_IETF_HEADERS: 'true',
  NAMED_LIMITS_DYNAMIC_METADATA: 'true',
  RESPONSE_DYNAMIC_METADATA: 'true',
  LIMIT_RESPONSE_HEADERS_ENABLED: 'true',
};

function header(headers: readonly WireHeader[] | undefined, key: string): string | undefined {
  return headers?.find((h) => h.key === key)?.value;
}

/** The members of a structured-field list, as written by the service (no commas inside names here). */
const members = (v: string | undefined): string[] => (v ?? '').split(', ').filter((m) => m !== '');

t.test('the named limit that rejected is named by gRPC headers, metadata and statistics', async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const svc = await startTestApp({
    files: { 'shop.yaml': CONFIG },
    env: { BACKEND_TYPE: 'redis', REDIS_SOCKET_TYPE: 'tcp', REDIS_URL: redis.url, ...ON },
  });
  t.teardown(() => svc.close());
  await roomInWindow(60, 10_000);

  // client (50/min), path+user (1000/s and 2/min): the third call is rejected by the per-minute limit.
  const req: WireRateLimitRequest = {
    domain: 'shop',
    descriptors: [descriptor(['client', 'c1']), descriptor(['path', '/api'], ['user', 'bob'])],
  };
  const first = await svc.call(req);
  t.equal(first.overallCode, 'OK');
  t.same(members(header(first.responseHeadersToAdd, 'RateLimit-Policy')), [
    '"shop.client";q=50;w=60',
    '"shop.path.user[1]";q=2;w=60',
  ]);
  await svc.call(req);
  const third = await svc.call(req);
  t.equal(third.overallCode, 'OVER_LIMIT');
  const policy = members(header(third.responseHeadersToAdd, 'RateLimit-Policy'));
  t.same(policy, ['"shop.path.user[1]";q=2;w=60', '"shop.client";q=50;w=60'], 'the rejecting limit first');
  const state = members(header(third.responseHeadersToAdd, 'RateLimit'));
  t.match(state[0], /^"shop\.path\.user\[1\]";r=0;t=\d+$/);
  t.match(state[1], /^"shop\.client";r=47;t=\d+$/);
  // The reference's headers are still there, unchanged (its least-remaining limit).
  t.equal(header(third.responseHeadersToAdd, 'RateLimit-Limit'), '2');
  t.equal(header(third.responseHeadersToAdd, 'RateLimit-Remaining'), '0');

  const md = fromStruct(third.dynamicMetadata as never) as Record<string, any>;
  t.equal(md.domain, 'shop', "the reference's metadata is kept");
  t.same(md.descriptors[1], { entries: ['path=/api', 'user=bob'] });
  t.equal(md.namedLimit, 'shop.path.user[1]');
  t.match(md.namedLimits, [
    { descriptor: 0, name: 'shop.client', domain: 'shop', limit: 50, remaining: 47, code: 'OK' },
    {
      descriptor: 1,
      name: 'shop.path.user[1]',
      domain: 'shop',
      limit: 2,
      unit: 'MINUTE',
      remaining: 0,
      algorithm: 'fixed_window',
      code: 'OVER_LIMIT',
    },
  ]);
  t.equal(svc.app.stats.snapshot()['ratelimit.service.named_limit.shop.path.user[1].over_limit'], 1);
  t.equal(svc.app.stats.snapshot()['ratelimit.service.named_limit.shop.client.over_limit'], undefined);

  // Two descriptors over their limits: the first in request order is the one named.
  await svc.call({ domain: 'shop', descriptors: [descriptor(['tenant', 'acme'])] });
  const both = await svc.call({
    domain: 'shop',
    descriptors: [
      descriptor(['client', 'c2']),
      descriptor(['tenant', 'acme']),
      descriptor(['path', '/api'], ['user', 'bob']),
    ],
  });
  t.equal(both.overallCode, 'OVER_LIMIT');
  t.match(members(header(both.responseHeadersToAdd, 'RateLimit'))[0], /^"acme-tenant";r=0;t=\d+$/);
  t.equal((fromStruct(both.dynamicMetadata as never) as Record<string, any>).namedLimit, 'acme-tenant');

  // /rlconfig names every limit when a named output is on.
  const rlconfig = await (await fetch(`${svc.debugUrl}/rlconfig`)).text();
  t.match(
    rlconfig,
    'shop.tenant_acme: unit=MINUTE requests_per_unit=1, shadow_mode: false, quota_mode: false, name: acme-tenant\n',
  );
  t.match(rlconfig, 'requests_per_unit=2, shadow_mode: false, quota_mode: false, name: shop.path.user[1]\n');
});

t.test('/json says which named limit rejected, in its headers and metadata', async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const svc = await startTestApp({
    files: { 'shop.yaml': CONFIG },
    env: { BACKEND_TYPE: 'redis', REDIS_SOCKET_TYPE: 'tcp', REDIS_URL: redis.url, ...ON },
  });
  t.teardown(() => svc.close());
  await roomInWindow(60, 10_000);
  const body = {
    domain: 'shop',
    descriptors: [descriptor(['tenant', 'acme']), descriptor(['client', 'j'])],
  };
  t.equal((await svc.postJson(body)).status, 200);
  const over = await svc.postJson(body);
  t.equal(over.status, 429);
  const json = over.json();
  const headers = json.responseHeadersToAdd as WireHeader[];
  t.same(members(header(headers, 'RateLimit-Policy')), ['"acme-tenant";q=1;w=60', '"shop.client";q=50;w=60']);
  t.match(members(header(headers, 'RateLimit'))[0], /^"acme-tenant";r=0;t=\d+$/);
  t.equal(json.dynamicMetadata.namedLimit, 'acme-tenant');
  t.match(json.dynamicMetadata.namedLimits[0], { name: 'acme-tenant', code: 'OVER_LIMIT', remaining: 0 });
});

t.test('an over-limit decision is logged at info with the name, domain and redacted values', async (t) => {
  const lines: string[] = [];
  const logger = createLogger({ level: 'info', format: 'json' }, { write: (s: string) => lines.push(s) });
  const svc = await startTestApp({
    files: { 'shop.yaml': CONFIG },
    env: {
      NAMED_LIMITS_LOG_ENABLED: 'true',
      NAMED_LIMITS_LOG_REDACT_KEYS: 'user',
      LOG_LEVEL: 'info',
    },
    appOptions: { logger },
  });
  t.teardown(() => svc.close());
  await roomInWindow(60, 10_000);
  const req = {
    domain: 'shop',
    descriptors: [descriptor(['path', '/secret'], ['user', 'alice@example.com'])],
  };
  for (let i = 0; i < 3; i++) await svc.call(req);
  const over = lines
    .map((l) => JSON.parse(l) as Record<string, string>)
    .filter((l) => /over limit/.test(l['@message']!));
  t.equal(over.length, 1, 'one line for the one over-limit decision');
  t.equal(over[0]!.level, 'info');
  const msg = over[0]!['@message']!;
  t.match(msg, 'limit="shop.path.user[1]"');
  t.match(msg, 'domain="shop"');
  t.match(msg, 'descriptor="path=/secret,user=<redacted>"');
  t.notMatch(msg, 'alice');
  // The settings that are off add nothing to the response.
  const r = await svc.call(req);
  t.equal(r.responseHeadersToAdd, undefined);
  t.equal(r.dynamicMetadata, undefined);
});

t.test(
  'with the named-limit settings off, responses and /rlconfig are the reference-compatible ones',
  async (t) => {
    const svc = await startTestApp({
      files: { 'shop.yaml': CONFIG },
      env: { LIMIT_RESPONSE_HEADERS_ENABLED: 'true', RESPONSE_DYNAMIC_METADATA: 'true' },
    });
    t.teardown(() => svc.close());
    await roomInWindow(60, 10_000);
    const req = { domain: 'shop', descriptors: [descriptor(['tenant', 'acme'])] };
    await svc.call(req);
    const r = await svc.call(req);
    t.equal(r.overallCode, 'OVER_LIMIT');
    t.same(
      r.responseHeadersToAdd?.map((h) => h.key),
      ['RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset'],
    );
    t.same(Object.keys(fromStruct(r.dynamicMetadata as never) as object).sort(), ['descriptors', 'domain']);
    const rlconfig = await (await fetch(`${svc.debugUrl}/rlconfig`)).text();
    t.notMatch(rlconfig, 'name:');
    // The per-name statistic is on by default (bounded by NAMED_LIMITS_STATS_MAX_SERIES).
    t.equal(svc.app.stats.snapshot()['ratelimit.service.named_limit.acme-tenant.over_limit'], 1);
  },
);
