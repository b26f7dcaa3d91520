// counters get|reset against real Redis (single, cluster, sentinel), compared with the answers of a
// real service counting in the same deployment with the same environment variables.
import { readFileSync } from 'node:fs';
import t, { type Test } from 'tap';
import { startRedis, startRedisCluster, startRedisSentinel } from '../../harness/redis/index.js';
import { roomInWindow, startTestApp } from '../../ratelimit/test-support.js';
import {
  COUNTERS_CONFIG as CONFIG,
  COUNTERS_DESCRIPTOR as DESCRIPTOR,
  hitCounter as hit,
  readings,
  runBin,
  runInProcess,
  type RunResult,
} from './testing.js';

/** One deployment: the service and the command line get the same environment. */
async function checkDeployment(
  t: Test,
  env: Record<string, string>,
  run: (args: string[], env: Record<string, string>) => Promise<RunResult>,
): Promise<void> {
  const app = await startTestApp({
    env: { BACKEND_TYPE: 'redis', ...env },
    files: { 'example.yaml': readFileSync(CONFIG, 'utf8') },
  });
  t.teardown(() => app.close());
  const args = (action: string, ...more: string[]) => [
    'counters',
    action,
    '--format',
    'json',
    '--config',
    CONFIG,
    '--domain',
    'example',
    '--descriptor',
    DESCRIPTOR,
    ...more,
  ];
  // Counters roll over each minute: the whole check must fit in one window (subprocesses are slow here).
  await roomInWindow(60, run === runBin ? 25_000 : 8_000);
  const first = await run(args('reset', '--yes'), env);
  t.equal(first.code, 1, 'a fresh deployment: nothing to delete, and reset says so');
  t.match(first.stderr, /nothing deleted/);

  const status = await hit(app, 3);
  const answeredAt = Date.now();
  t.equal(status.limitRemaining, 2, 'the service: 3 of 5 used');
  const [got] = readings(await run(args('get'), env));
  t.match(got, { count: 3, limit: 5, unit: 'MINUTE', remaining: status.limitRemaining, deployment: 'REDIS' });
  t.ok(got!.key.startsWith('example_remote_address_10.1.2.3_'), got!.key);
  // The service's durationUntilReset, less the time the command took to start and read.
  const said = Number(status.durationUntilReset?.seconds ?? 0);
  const elapsed = Math.ceil((Date.now() - answeredAt) / 1000);
  t.ok(
    got!.resetsInSeconds <= said && got!.resetsInSeconds >= said - elapsed - 1,
    `time to reset ${got!.resetsInSeconds}s; the service said ${said}s ${elapsed}s earlier`,
  );
  t.ok(got!.ttlMs > 0 && got!.ttlMs <= 60_000, `the key expires (${got!.ttlMs} ms)`);

  const refused = await run(args('reset'), env);
  t.equal(refused.code, 2, 'reset without --yes is refused');
  t.match(refused.stderr, /--yes/);
  t.equal((await hit(app, 1)).limitRemaining, 1, 'the refused reset left the counter alone');

  const [reset] = readings(await run(args('reset', '--yes'), env));
  t.match(reset, { count: 4, deleted: true });
  t.equal((await hit(app, 1)).limitRemaining, 4, 'after the reset the service counts from zero');
  const [after] = readings(await run(args('get'), env));
  t.equal(after!.count, 1);
}

t.test('single: get and reset agree with the service (the executable as a subprocess)', async (t) => {
  const redis = await startRedis({ password: 's3cret' });
  t.teardown(() => redis.stop());
  await checkDeployment(t, { REDIS_SOCKET_TYPE: 'tcp', REDIS_URL: redis.url, REDIS_AUTH: 's3cret' }, runBin);
});

t.test('cluster: get and reset agree with the service', async (t) => {
  const cluster = await startRedisCluster();
  t.teardown(() => cluster.stop());
  await checkDeployment(
    t,
    { REDIS_SOCKET_TYPE: 'tcp', REDIS_TYPE: 'cluster', REDIS_URL: cluster.urls },
    runBin,
  );
});

t.test('sentinel: get and reset agree with the service', async (t) => {
  const sentinel = await startRedisSentinel();
  t.teardown(() => sentinel.stop());
  await checkDeployment(
    t,
    {
      REDIS_SOCKET_TYPE: 'tcp',
      REDIS_TYPE: 'sentinel',
      REDIS_URL: `${sentinel.masterName},${sentinel.sentinelUrls}`,
    },
    runInProcess,
  );
});
