// counters get and explain on a token budget charged by reserve, then settle: against a real Redis
// counted by the real service, each limit shows what it holds charged (a window's count, a sliding
// window's two windows and estimate, a bucket's debt), the net of the reservations and settlements.
import t from 'tap';
import { startRedis } from '../../harness/redis/index.js';
import { roomInWindow, startTestApp } from '../../ratelimit/test-support.js';
import { readings, runInProcess, tempFiles } from './testing.js';

const CONFIG = `domain: llm
descriptors:
  - key: fixed
    rate_limit: { unit: day, requests_per_unit: 1000 }
  - key: sliding
    rate_limit: { unit: hour, requests_per_unit: 1000, algorithm: sliding_window }
  - key: bucket
    rate_limit: { unit: hour, requests_per_unit: 1000, algorithm: token_bucket }
  - key: both
    rate_limits:
      - { unit: hour, requests_per_unit: 1000, algorithm: sliding_window }
      - { unit: day, requests_per_unit: 5000 }
`;

const descriptor = (key: string) => ({ entries: [{ key, value: 'team-a' }] });

t.test('counters get shows each limit charged with reservations and settlements net', async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const env = { REDIS_SOCKET_TYPE: 'tcp', REDIS_URL: redis.url };
  const files = tempFiles({ 'llm.yaml': CONFIG });
  t.teardown(() => files.remove());
  const app = await startTestApp({ env: { BACKEND_TYPE: 'redis', ...env }, files: { 'llm.yaml': CONFIG } });
  t.teardown(() => app.close());
  // Hours and a day: the checks must not straddle either's end.
  await roomInWindow(3600, 120_000);
  await roomInWindow(86400, 120_000);

  for (const key of ['fixed', 'sliding', 'bucket', 'both']) {
    // Reserve an estimate of 300, settle 180 used (a refund of 120); then 50 reserved and settled up by 30.
    const steps = [
      { ...descriptor(key), hitsAddend: { value: 300 } },
      { ...descriptor(key), hitsAddend: { value: 120 }, isNegativeHits: true },
      { ...descriptor(key), hitsAddend: { value: 50 } },
      { ...descriptor(key), hitsAddend: { value: 30 } },
    ];
    for (const d of steps) {
      const res = await app.call({ domain: 'llm', descriptors: [d] });
      t.equal(res.statuses[0]!.code, 'OK', `${key}: ${JSON.stringify(d.hitsAddend)} answered OK`);
    }
  }
  const get = (key: string) =>
    runInProcess(
      [
        'counters',
        'get',
        '--config',
        files.path('llm.yaml'),
        '--domain',
        'llm',
        '--descriptor',
        `${key}=team-a`,
      ],
      env,
    );
  const json = async (key: string) =>
    readings(
      await runInProcess(
        [
          'counters',
          'get',
          '--format',
          'json',
          '--config',
          files.path('llm.yaml'),
          '--domain',
          'llm',
          '--descriptor',
          `${key}=team-a`,
        ],
        env,
      ),
    )[0]!;

  const fixed = await json('fixed');
  t.same(fixed.charged, { window: 260 }, 'a fixed window holds 300 - 120 + 50 + 30');
  t.match((await get('fixed')).stdout, /charged 260 in this window/);

  const sliding = await json('sliding');
  t.same(sliding.limits![0]!.charged, { current: 260, previous: 0, estimate: 260 });
  t.match(
    (await get('sliding')).stdout,
    /charged 260 in the current window, 0 in the previous, estimate 260/,
  );

  // A bucket of 1000 per hour refills one hit every 3.6 s: 260 hits are a debt of 936 s, less the
  // time since they were charged.
  const bucket = (await json('bucket')).limits![0]!.charged as { debtMs: number; debtHits: number };
  t.ok(bucket.debtMs > 900_000 && bucket.debtMs <= 936_000, `debt ${bucket.debtMs} ms`);
  t.ok(bucket.debtHits > 250 && bucket.debtHits <= 260, `${bucket.debtHits} hits not yet refilled`);
  t.match((await get('bucket')).stdout, /debt \d+ ms = [\d.]+ hits not yet refilled/);

  const both = await json('both');
  t.same(
    both.limits!.map((l) => l.charged),
    [{ current: 260, previous: 0, estimate: 260 }, { window: 260 }],
    'every limit of a rate_limits list holds the same net',
  );

  const explained = await runInProcess(
    ['explain', '--config', files.path('llm.yaml'), '--domain', 'llm', '--descriptor', 'bucket=team-a'],
    env,
  );
  t.match(
    explained.stdout,
    /holds: the bucket's theoretical arrival time .*debt, the hits charged and not yet refilled/,
  );
  const fixedExplained = await runInProcess(
    [
      'explain',
      '--format',
      'json',
      '--config',
      files.path('llm.yaml'),
      '--domain',
      'llm',
      '--descriptor',
      'fixed=team-a',
    ],
    env,
  );
  const x = JSON.parse(fixedExplained.stdout) as { descriptors: { limitKeys: { holds: string }[] }[] };
  t.match(x.descriptors[0]!.limitKeys[0]!.holds, /every hit added, every refund taken off/);
});
