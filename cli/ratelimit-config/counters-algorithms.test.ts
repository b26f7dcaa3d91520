// counters get|reset and explain on the scripted algorithms (sliding_window, token_bucket, several
// rate_limits), against a real Redis counted by the real service: the command line reads the state
// the service decides on, without counting, and reset deletes every key of every limit.
import t, { type Test } from 'tap';
import { startRedis } from '../../harness/redis/index.js';
import { roomInWindow, startTestApp, type TestApp } from '../../ratelimit/test-support.js';
import { readings, runBin, runInProcess, tempFiles, type RunResult } from './testing.js';

const CONFIG = `domain: algo
descriptors:
  - key: sliding
    rate_limit: { unit: hour, requests_per_unit: 3, algorithm: sliding_window }
  - key: bucket
    rate_limit: { unit: hour, requests_per_unit: 3, algorithm: token_bucket }
  - key: both
    rate_limits:
      - { unit: hour, requests_per_unit: 5, algorithm: sliding_window }
      - { unit: hour, requests_per_unit: 2, algorithm: token_bucket }
`;

interface Case {
  key: string;
  /** Hits the service admits before the first OVER_LIMIT. */
  admitted: number;
  algorithm: string;
  keys: number;
}

async function call(app: TestApp, key: string) {
  const res = await app.call({ domain: 'algo', descriptors: [{ entries: [{ key, value: 'client-1' }] }] });
  return res.statuses[0]!;
}

async function check(
  t: Test,
  app: TestApp,
  env: Record<string, string>,
  config: string,
  c: Case,
  run: (args: string[], env: Record<string, string>) => Promise<RunResult>,
): Promise<void> {
  const base = ['--config', config, '--domain', 'algo', '--descriptor', `${c.key}=client-1`];
  for (let i = 0; i < c.admitted; i++) t.equal((await call(app, c.key)).code, 'OK', `hit ${i + 1} admitted`);
  t.equal((await call(app, c.key)).code, 'OVER_LIMIT', 'the service answers OVER_LIMIT');

  const explained = await run(['explain', ...base], env);
  t.equal(explained.code, 0, explained.stderr);
  t.match(explained.stdout, `algorithm: ${c.algorithm.split('+')[0]}`, 'explain names the algorithm');
  const json = JSON.parse((await run(['explain', '--format', 'json', ...base], env)).stdout) as {
    descriptors: { rule: { algorithm: string }; limitKeys: { keys: string[] }[] }[];
  };
  t.equal(json.descriptors[0]!.rule.algorithm, c.algorithm);
  t.equal(json.descriptors[0]!.limitKeys.flatMap((l) => l.keys).length, c.keys, 'explain lists every key');

  const [got] = readings(await run(['counters', 'get', '--format', 'json', ...base], env));
  t.match(got, { algorithm: c.algorithm, overLimit: true, remaining: 0, deployment: 'REDIS' });
  t.equal(got!.keys.length, c.keys);
  t.ok(got!.nextOkInSeconds! > 0, `the next hit is OK in ${got!.nextOkInSeconds}s`);
  const text = await run(['counters', 'get', ...base], env);
  t.match(text.stdout, /next hit OVER_LIMIT, OK again in \d+s/);
  t.equal((await call(app, c.key)).code, 'OVER_LIMIT', 'reading counted nothing and reset nothing');

  const reset = await run(['counters', 'reset', '--yes', '--format', 'json', ...base], env);
  t.equal(reset.code, 0, reset.stderr);
  t.match(readings(reset)[0], { deleted: true, overLimit: true });
  t.equal((await call(app, c.key)).code, 'OK', 'after the reset the next request is OK');
  const [after] = readings(await run(['counters', 'get', '--format', 'json', ...base], env));
  t.match(after, { overLimit: false, nextOkInSeconds: 0 });
}

t.test(
  'sliding_window, token_bucket and rate_limits: get, explain and reset agree with the service',
  async (t) => {
    const redis = await startRedis();
    t.teardown(() => redis.stop());
    const env = { REDIS_SOCKET_TYPE: 'tcp', REDIS_URL: redis.url };
    const files = tempFiles({ 'algo.yaml': CONFIG });
    t.teardown(() => files.remove());
    const app = await startTestApp({
      env: { BACKEND_TYPE: 'redis', ...env },
      files: { 'algo.yaml': CONFIG },
    });
    t.teardown(() => app.close());
    // The sliding windows are hours: the checks must not straddle an hour's end.
    await roomInWindow(3600, 120_000);
    const config = files.path('algo.yaml');
    // Before the bucket's first hit: its next OK moment is 1200 s after that hit at the latest.
    const beforeBucket = Date.now();
    await check(
      t,
      app,
      env,
      config,
      { key: 'sliding', admitted: 3, algorithm: 'sliding_window', keys: 2 },
      runInProcess,
    );
    await check(
      t,
      app,
      env,
      config,
      { key: 'bucket', admitted: 3, algorithm: 'token_bucket', keys: 1 },
      runInProcess,
    );
    await check(
      t,
      app,
      env,
      config,
      { key: 'both', admitted: 2, algorithm: 'sliding_window+token_bucket', keys: 3 },
      runBin,
    );

    // A token bucket of 3 per hour refills one hit every 1200 s after the hit that emptied it; however
    // slow this machine, that is at most 1200 s away and at least 1200 s minus the time since.
    for (let i = 0; i < 4; i++) await call(app, 'bucket');
    const [bucket] = readings(
      await runInProcess(
        [
          'counters',
          'get',
          '--format',
          'json',
          '--config',
          config,
          '--domain',
          'algo',
          '--descriptor',
          'bucket=client-1',
        ],
        env,
      ),
    );
    const elapsed = Math.ceil((Date.now() - beforeBucket) / 1000);
    t.ok(
      bucket!.nextOkInSeconds! >= 1200 - elapsed - 1 && bucket!.nextOkInSeconds! <= 1200,
      `next OK in ${bucket!.nextOkInSeconds}s (${elapsed}s since the first hit)`,
    );
    t.match(bucket!.limits![0], { algorithm: 'token_bucket', limit: 3, burst: 3, remaining: 0 });
  },
);

t.test('reset exits 1 and says so when it deleted nothing', async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const env = { REDIS_SOCKET_TYPE: 'tcp', REDIS_URL: redis.url };
  const files = tempFiles({ 'algo.yaml': CONFIG });
  t.teardown(() => files.remove());
  for (const key of ['sliding', 'bucket', 'both']) {
    const r = await runInProcess(
      [
        'counters',
        'reset',
        '--yes',
        '--config',
        files.path('algo.yaml'),
        '--domain',
        'algo',
        '--descriptor',
        `${key}=nobody`,
      ],
      env,
    );
    t.equal(r.code, 1, `${key}: nothing to delete is not a success`);
    t.match(r.stderr, /nothing deleted: no counter of these descriptors exists/);
    t.match(r.stdout, /nothing to reset/);
  }
  const none = await runInProcess(
    [
      'counters',
      'reset',
      '--yes',
      '--config',
      files.path('algo.yaml'),
      '--domain',
      'algo',
      '--descriptor',
      'other=x',
    ],
    env,
  );
  t.equal(none.code, 1);
  t.match(none.stderr, /nothing deleted: none of these descriptors is counted/);
});
