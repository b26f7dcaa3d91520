// A reply that is not a count where a count is expected is a cache error for that operation, on every
// path the service sends counting commands on: ioredis commands (with and without a pipeline window),
// the direct counting connection, and the limit script through ioredis and through the direct
// connection. Only a fake server can send these replies (harness/redis/fake.ts): a RESP3 double,
// a map, a status, a bulk string, a null, a negative count, an integer past 64 bits, and for the script
// arrays of the wrong length or with values out of range. Each store call must fail as a CacheError,
// never yield a number read from the reply; a negative count fails its op only (the key's own data, as
// a real Redis can hold it) and leaves the circuit closed, any other shape counts against the shard.
import t from 'tap';
import { status as GrpcStatus } from '@grpc/grpc-js';
import { startFakeRedis, type FakeRedis } from '../../harness/redis/index.js';
import {
  CacheError,
  CircuitBreakerStore,
  CounterRefusedError,
  type CounterOp,
  type LimitCheck,
} from '../counting/index.js';
import { loadSettings } from '../settings/index.js';
import { RedisCounterStore } from './redis-store.js';
import { descriptor, startTestApp } from '../test-support.js';

const noTls = { caCert: '', clientCert: '', clientKey: '', skipHostnameVerification: false };

const COUNT_PATHS: Record<string, Record<string, string>> = {
  'ioredis commands': { REDIS_DIRECT_COUNTING: 'false' },
  'ioredis commands, with a pipeline window': {
    REDIS_DIRECT_COUNTING: 'false',
    REDIS_PIPELINE_WINDOW: '1ms',
  },
  'direct connection': { REDIS_DIRECT_COUNTING: 'true' },
};
const SCRIPT_PATHS: Record<string, Record<string, string>> = {
  'script through ioredis': { REDIS_DIRECT_COUNTING: 'false' },
  'script on the direct connection': { REDIS_DIRECT_COUNTING: 'true' },
};

/** Replies that are no count, for INCRBY; the negative one is the op's own data. */
const NOT_COUNTS: Record<string, string> = {
  'RESP3 double': ',1.5\r\n',
  'RESP3 map': '%1\r\n+a\r\n:1\r\n',
  'RESP3 null': '_\r\n',
  'RESP3 big number': '(12345678901234567890123\r\n',
  status: '+OK\r\n',
  'bulk string': '$3\r\nabc\r\n',
  'bulk string of digits': '$1\r\n7\r\n',
  'null bulk string': '$-1\r\n',
  array: '*1\r\n:1\r\n',
  'negative integer': ':-5\r\n',
  'integer past 64 bits': ':123456789012345678901\r\n',
};

/** One fixed-window limit of 10 per minute: the verdict is [rejectedBy, remaining, ms]. */
const CHECK: LimitCheck = { keys: ['k'], args: [Date.now(), 1, 0, 10, 60_000, 0], perSecond: false };
const NOT_VERDICTS: Record<string, string> = {
  ...NOT_COUNTS,
  'integer instead of an array': ':0\r\n',
  'array too short': '*3\r\n:0\r\n:9\r\n:1000\r\n',
  'array too long': '*5\r\n:0\r\n:9\r\n:1\r\n:9\r\n:1\r\n',
  'rejectedBy past the limits': '*4\r\n:2\r\n:9\r\n:1000\r\n:1000\r\n',
  'negative remaining': '*4\r\n:0\r\n:-1\r\n:1000\r\n:1000\r\n',
  'remaining above the limit': '*4\r\n:0\r\n:11\r\n:1000\r\n:1000\r\n',
  'negative ms': '*4\r\n:0\r\n:9\r\n:-1\r\n:1000\r\n',
  'ms past any period': '*4\r\n:0\r\n:9\r\n:99999999999999\r\n:1000\r\n',
  'ms past 2^53': '*4\r\n:0\r\n:9\r\n:9007199254740993\r\n:1000\r\n',
  'negative ms until more': '*4\r\n:0\r\n:9\r\n:1000\r\n:-1\r\n',
  'ms until more past any period': '*4\r\n:0\r\n:9\r\n:1000\r\n:99999999999999\r\n',
};
delete NOT_VERDICTS['array'];
// ioredis reads a RESP3 boolean as the integer 1 or 0, so only the direct connection can tell it apart.
const DIRECT_ONLY: Record<string, string> = { 'RESP3 boolean': '#t\r\n' };

const OP: CounterOp = { key: 'k', hits: 1, expireSeconds: 60, perSecond: false };

async function open(env: Record<string, string>, reply: () => string, commands: string[]) {
  const fake: FakeRedis = await startFakeRedis((args) =>
    commands.includes(args[0]!.toUpperCase()) ? reply() : undefined,
  );
  const settings = loadSettings({
    REDIS_SOCKET_TYPE: 'tcp',
    REDIS_URL: fake.url,
    REDIS_TIMEOUT: '2s',
    ...env,
  }).redis.main;
  const redis = new RedisCounterStore({ settings, tlsFiles: noTls });
  const store = new CircuitBreakerStore(redis, {
    enabled: true,
    failureThreshold: 1,
    probeIntervalMs: 60_000,
  });
  await store.start(5000);
  return {
    fake,
    store,
    close: async () => {
      await store.close();
      await fake.close();
    },
  };
}

/** The connection INFO came on: ioredis'. */
function ioredisConn(fake: FakeRedis): number {
  return fake.commands.find((c) => c.args[0] === 'info')?.conn ?? fake.commands[0]!.conn;
}

for (const [path, env] of Object.entries(COUNT_PATHS)) {
  t.test(`INCRBY on the ${path}: a reply that is no count is a cache error`, async (t) => {
    const ok = await open(env, () => ':3\r\n', ['INCRBY']);
    t.same(await ok.store.incrementEach([OP, OP]), [3, 3], 'a count is a count (the fake answers)');
    const sentDirect = ok.fake.commands.some(
      (c) => c.args[0] === 'INCRBY' && c.conn !== ioredisConn(ok.fake),
    );
    t.equal(sentDirect, path === 'direct connection', 'sent on the path under test');
    await ok.close();
    const direct = path === 'direct connection';
    for (const [name, bytes] of Object.entries({ ...NOT_COUNTS, ...(direct ? DIRECT_ONLY : {}) })) {
      const s = await open(env, () => bytes, ['INCRBY']);
      const each = await s.store.incrementEach([OP]);
      t.ok(each[0] instanceof CacheError, `${name}: incrementEach gives a CacheError (${String(each[0])})`);
      if (name === 'negative integer') {
        t.ok(each[0] instanceof CounterRefusedError, `${name}: refused for that op only`);
        t.same(s.store.states(), { REDIS: 'closed' }, `${name}: the circuit stays closed`);
      } else {
        t.same(s.store.states(), { REDIS: 'open' }, `${name}: counted against the shard`);
      }
      await s.close();
    }
  });
}

for (const [path, env] of Object.entries(SCRIPT_PATHS)) {
  t.test(`the limit script via the ${path}: a reply that is no verdict is a cache error`, async (t) => {
    const ok = await open(env, () => '*4\r\n:0\r\n:9\r\n:1000\r\n:1000\r\n', ['EVALSHA', 'EVAL']);
    t.same(await ok.store.evaluate!([CHECK]), [[0, 9, 1000, 1000]], 'a verdict is a verdict');
    t.same(await ok.store.evaluateEach!([CHECK]), [[0, 9, 1000, 1000]]);
    const direct = ok.fake.commands.some((c) => c.args[0] === 'EVALSHA' && c.conn !== ioredisConn(ok.fake));
    t.equal(direct, path === 'script on the direct connection', 'sent on the path under test');
    await ok.close();
    for (const [name, bytes] of Object.entries(NOT_VERDICTS)) {
      const s = await open(env, () => bytes, ['EVALSHA', 'EVAL']);
      const each = await s.store.evaluateEach!([CHECK]);
      t.ok(each[0] instanceof CacheError, `${name}: evaluateEach gives a CacheError (${String(each[0])})`);
      await s.close();
      const w = await open(env, () => bytes, ['EVALSHA', 'EVAL']);
      const whole = await w.store.evaluate!([CHECK]).then(
        (v) => v,
        (err: unknown) => err,
      );
      t.ok(whole instanceof CacheError, `${name}: evaluate rejects with a CacheError (${String(whole)})`);
      t.same(w.store.states(), { REDIS: 'open' }, `${name}: counted against the shard`);
      await w.close();
    }
  });
}

t.test('the service: a malformed count is answered by the failure mode (error, allow)', async (t) => {
  // `k` has the default failure mode (error), `a` says allow; the value picks the reply.
  const CONFIG = `domain: d
descriptors:
  - key: k
    rate_limit: { unit: minute, requests_per_unit: 3 }
  - key: a
    failure_mode: allow
    rate_limit: { unit: minute, requests_per_unit: 3 }
`;
  const REPLIES = { negative: ':-5\r\n', nullbulk: '$-1\r\n', double: ',1.5\r\n', status: '+OK\r\n' };
  const fake = await startFakeRedis((args) => {
    if (args[0] !== 'INCRBY') return undefined;
    const value = Object.keys(REPLIES).find((v) => args[1]!.includes(`_${v}_`));
    return value ? REPLIES[value as keyof typeof REPLIES] : ':1\r\n';
  });
  t.teardown(() => fake.close());
  const svc = await startTestApp({
    files: { 'd.yaml': CONFIG },
    env: { BACKEND_TYPE: 'redis', REDIS_SOCKET_TYPE: 'tcp', REDIS_URL: fake.url, REDIS_TIMEOUT: '2s' },
  });
  t.teardown(() => svc.close());
  const good = await svc.call({ domain: 'd', descriptors: [descriptor(['k', 'fine'])] });
  t.equal(good.statuses[0]!.limitRemaining, 2, 'a count is counted');
  let errors = 0;
  for (const value of Object.keys(REPLIES)) {
    const req = { domain: 'd', descriptors: [descriptor(['k', value])] };
    await t.rejects(svc.call(req), { code: GrpcStatus.UNAVAILABLE }, `${value}, error mode: UNAVAILABLE`);
    t.equal((await svc.postJson(req)).status, 500, `${value}, error mode: HTTP 500`);
    errors += 2;
    const r = await svc.call({ domain: 'd', descriptors: [descriptor(['a', value])] });
    t.equal(r.overallCode, 'OK', `${value}, allow mode: OK`);
    t.equal(r.statuses[0]!.limitRemaining, 3, `${value}, allow mode: the limit remains (nothing counted)`);
  }
  const snap = svc.app.stats.snapshot();
  t.equal(
    snap['ratelimit.service.call.should_rate_limit.redis_error'],
    errors,
    'each failed call a redis_error',
  );
  t.equal(snap['ratelimit.service.failure_mode.allow'], 4, 'the allowed ones counted in failure_mode.allow');
  t.equal(snap['ratelimit.service.failure_mode.error'], errors, 'the failed ones in failure_mode.error');
});
