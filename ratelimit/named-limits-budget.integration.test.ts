// The RateLimit header of a token budget, end to end on real Redis: `r` is the tokens left (hits_addend
// counts tokens, and the policy says so with qu), and `t` the seconds until more is available, computed per algorithm (a bucket's next
// token, a sliding window's previous weight falling, a fixed window's end); no `t` when waiting brings
// nothing.
import t from 'tap';
import { startRedis } from '../harness/redis/index.js';
import { descriptor, roomInWindow, startTestApp } from './test-support.js';
import type { WireHeader, WireRateLimitRequest } from '../proto/index.js';

const CONFIG = `
domain: llm
descriptors:
  - key: bucket
    rate_limit: { unit: day, requests_per_unit: 1000, algorithm: token_bucket, quota_unit: tokens }
  - key: sliding
    rate_limit: { unit: hour, requests_per_unit: 1000, algorithm: sliding_window }
  - key: fixed
    rate_limit: { unit: day, requests_per_unit: 100000 }
`;

const rateLimit = (headers: readonly WireHeader[] | undefined) =>
  headers?.find((h) => h.key === 'RateLimit')?.value;

t.test('RateLimit reports tokens left and the seconds until more, per algorithm', async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const svc = await startTestApp({
    files: { 'llm.yaml': CONFIG },
    env: {
      BACKEND_TYPE: 'redis',
      REDIS_SOCKET_TYPE: 'tcp',
      REDIS_URL: redis.url,
      NAMED_LIMITS_IETF_HEADERS: 'true',
    },
  });
  t.teardown(() => svc.close());
  await roomInWindow(3600, 120_000);
  await roomInWindow(86400, 120_000);
  const call = (key: string, hits: number, refund = false) => {
    const req: WireRateLimitRequest = {
      domain: 'llm',
      descriptors: [
        {
          ...descriptor([key, 'team-a']),
          hitsAddend: { value: hits },
          ...(refund ? { isNegativeHits: true } : {}),
        },
      ],
    };
    return svc.call(req);
  };

  // A bucket of 1000 tokens a day refills one every 86.4 s: after 300, 700 are left and the next in 87 s.
  const reserved = await call('bucket', 300);
  t.equal(reserved.overallCode, 'OK');
  t.equal(rateLimit(reserved.responseHeadersToAdd), '"llm.bucket";r=700;t=87');
  t.equal(
    reserved.responseHeadersToAdd?.find((h) => h.key === 'RateLimit-Policy')?.value,
    '"llm.bucket";q=1000;qu="tokens";w=86400',
  );
  // The bucket refills meanwhile: the next token comes a little sooner than 87 s after each call.
  const nextToken = /^"llm\.bucket";r=(\d+);t=(\d+)$/;
  const settled = nextToken.exec(rateLimit((await call('bucket', 100, true)).responseHeadersToAdd) ?? '');
  t.equal(settled?.[1], '800', 'a refund of 100: 800 left');
  t.ok(Number(settled?.[2]) >= 60 && Number(settled?.[2]) <= 87, `next token in ${settled?.[2]} s`);
  const rejected = await call('bucket', 900);
  t.equal(rejected.overallCode, 'OVER_LIMIT');
  const over = nextToken.exec(rateLimit(rejected.responseHeadersToAdd) ?? '');
  t.equal(over?.[1], '0', 'rejected: r is 0');
  t.ok(Number(over?.[2]) >= 60 && Number(over?.[2]) <= 87, `more than the 800 left in ${over?.[2]} s`);

  // A sliding window holding 300 in its current window: the same 300 weigh on the next window, and
  // fall below 300 (700 left becomes 701) 3600 / 300 = 12 s into it.
  const before = Date.now();
  const sliding = await call('sliding', 300);
  const after = Date.now();
  const m = /^"llm\.sliding";r=700;t=(\d+)$/.exec(rateLimit(sliding.responseHeadersToAdd) ?? '');
  t.ok(m, `sliding: ${rateLimit(sliding.responseHeadersToAdd)}`);
  const toEnd = (at: number) => 3_600_000 - (at % 3_600_000);
  const tSeconds = Number(m?.[1]);
  t.ok(
    tSeconds >= Math.ceil((toEnd(after) + 12_000) / 1000) &&
      tSeconds <= Math.ceil((toEnd(before) + 12_000) / 1000),
    `t=${tSeconds}: the window's end plus 12 s`,
  );

  // A fixed window: more at its end once anything is counted; a check of 0 tokens on a fresh one has
  // nothing to wait for, so no t.
  const check = await call('fixed', 0);
  t.equal(rateLimit(check.responseHeadersToAdd), '"llm.fixed";r=100000');
  const day = await call('fixed', 300);
  const d = /^"llm\.fixed";r=99700;t=(\d+)$/.exec(rateLimit(day.responseHeadersToAdd) ?? '');
  t.ok(d && Number(d[1]) > 0 && Number(d[1]) <= 86_400, `fixed: ${rateLimit(day.responseHeadersToAdd)}`);
});
