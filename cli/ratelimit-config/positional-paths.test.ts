// explain and counters take the config's paths as arguments, as validate does, and --config still works
// (alone or together with them).
import t from 'tap';
import { startRedis } from '../../harness/redis/index.js';
import {
  COUNTERS_CONFIG as CONFIG,
  COUNTERS_DESCRIPTOR as DESCRIPTOR,
  readings,
  runInProcess,
} from './testing.js';

const request = [
  '--domain',
  'example',
  '--descriptor',
  DESCRIPTOR,
  '--format',
  'json',
  '--now',
  '1700000000',
];

t.test('explain: paths as arguments, as --config, or both', async (t) => {
  const flag = await runInProcess(['explain', '--config', CONFIG, ...request]);
  t.equal(flag.code, 0, flag.stderr);
  const positional = await runInProcess(['explain', CONFIG, ...request]);
  t.equal(positional.code, 0, positional.stderr);
  t.equal(positional.stdout, flag.stdout, 'the same explanation');
  t.match(JSON.parse(positional.stdout), { domain: 'example', descriptors: [{ matched: true }] });
  const none = await runInProcess(['explain', ...request]);
  t.equal(none.code, 2, 'no config: a usage error');
});

t.test('counters get: paths after the action, as --config', async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const env = { REDIS_SOCKET_TYPE: 'tcp', REDIS_URL: redis.url };
  const flag = await runInProcess(['counters', 'get', '--config', CONFIG, ...request], env);
  t.equal(flag.code, 0, flag.stderr);
  const positional = await runInProcess(['counters', 'get', CONFIG, ...request], env);
  t.equal(positional.code, 0, positional.stderr);
  const keys = (r: typeof flag) => readings(r).map((x) => [x.key, x.count]);
  t.equal(keys(flag).length, 1);
  t.same(keys(positional), keys(flag), 'the same counter read');
  const bad = await runInProcess(['counters', 'count', CONFIG, ...request], env);
  t.equal(bad.code, 2, 'the action comes first');
});
