// Role changes and partial refusals on real redis-server. A `single` Redis made a replica (REPLICAOF)
// must not make every decision wait for REDIS_TIMEOUT: its READONLY replies open the circuit, and the
// demotion is reported once in the log, on /healthcheck and as ratelimit.redis.REDIS.all.replica. And
// when only part of a request is refused (READONLY in a REPLICAOF race, NOSCRIPT in a SCRIPT FLUSH race),
// only the refused commands are resent: every counter in Redis holds exactly the hits that were
// answered as counted, never a request counted twice.
import t, { type Test } from 'tap';
import { pino } from 'pino';
import type { Redis } from 'ioredis';
import { startRedis, type RedisServer } from '../../harness/redis/index.js';
import { freePort } from '../../harness/net.js';
import type { CounterOp, LimitCheck, CircuitBreakerStore } from '../counting/index.js';
import { loadSettings } from '../settings/index.js';
import { descriptor, eventually, roomInWindow, startTestApp } from '../test-support.js';
import { RedisDeployment } from './index.js';

const noTls = { caCert: '', clientCert: '', clientKey: '', skipHostnameVerification: false };

async function deployment(
  t: Test,
  redis: RedisServer,
  env: Record<string, string> = {},
): Promise<RedisDeployment> {
  const s = loadSettings({ REDIS_SOCKET_TYPE: 'tcp', REDIS_URL: redis.url, ...env }).redis.main;
  const d = new RedisDeployment('REDIS', s, noTls);
  t.teardown(() => d.close());
  await d.connect(5000);
  return d;
}

function adminOf(t: Test, redis: RedisServer): Redis {
  const c = redis.client();
  t.teardown(() => c.disconnect());
  return c;
}

t.test(
  'a single Redis made a replica: decisions stop waiting, the circuit opens, health and the replica gauge report it, one log line; all back when it is a master again',
  async (t) => {
    const [a, b] = await Promise.all([startRedis(), startRedis()]);
    t.teardown(() => Promise.all([a.stop(), b.stop()]));
    const admin = adminOf(t, a);
    const lines: string[] = [];
    const logger = pino({ level: 'warn' }, { write: (s: string) => void lines.push(s) });
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(`${w.name}: ${w.message}`);
    process.on('warning', onWarning);
    t.teardown(() => void process.off('warning', onWarning));
    const svc = await startTestApp({
      env: {
        BACKEND_TYPE: 'redis',
        REDIS_SOCKET_TYPE: 'tcp',
        REDIS_URL: a.url,
        REDIS_TIMEOUT: '10s',
        CACHE_KEY_PREFIX: 'rc_',
        CACHE_FAILURE_MODE: 'allow',
        REDIS_CIRCUIT_BREAKER_FAILURES: '5',
        REDIS_CIRCUIT_BREAKER_PROBE_INTERVAL: '200ms',
        COALESCE_INCREMENTS: 'true',
        USE_PROMETHEUS: 'true',
        PROMETHEUS_ADDR: '127.0.0.1:0',
      },
      files: {
        'rc.yaml':
          'domain: rc\ndescriptors:\n  - key: k\n    rate_limit: { unit: hour, requests_per_unit: 1000 }\n',
      },
      appOptions: { logger },
    });
    t.teardown(() => svc.close());
    const call = () => svc.call({ domain: 'rc', descriptors: [descriptor(['k', 'v'])] });
    const gauge = () => svc.app.stats.snapshot()['ratelimit.redis.REDIS.all.replica'];
    const health = async () => (await fetch(`${svc.httpUrl}/healthcheck`)).status;
    const breaker = svc.app.store as CircuitBreakerStore;
    t.equal((await call()).overallCode, 'OK');
    t.equal(gauge(), 0, 'gauge present: a master');
    t.equal(await health(), 200);

    await admin.call('REPLICAOF', b.host, String(b.port));
    // REDIS_TIMEOUT is 10 s: every decision must be answered far sooner (generous for a busy machine).
    let slowest = 0;
    for (let i = 0; i < 30; i++) {
      const at = performance.now();
      const r = await call();
      slowest = Math.max(slowest, performance.now() - at);
      t.equal(r.overallCode, 'OK', `decision ${i + 1}: answered by the failure mode (allow)`);
    }
    t.ok(slowest < 3000, `no decision waited for REDIS_TIMEOUT (slowest ${Math.round(slowest)} ms)`);
    t.comment(`replica: slowest of 30 decisions ${Math.round(slowest)} ms`);
    t.equal(breaker.states()['REDIS'], 'open', 'READONLY counted against the shard: circuit open');
    t.equal(gauge(), 1, 'ratelimit.redis.REDIS.all.replica = 1');
    t.equal(await health(), 500, '/healthcheck not OK while a replica');
    const scrape = async () =>
      (await fetch(`http://127.0.0.1:${svc.app.statsPipeline.prometheus!.port}/metrics`)).text();
    await eventually(
      async () => /ratelimit_redis_replica\{deployment="REDIS",shard="all"\} 1/.test(await scrape()),
      15_000,
      'ratelimit_redis_replica 1 on /metrics',
    );
    t.equal(
      lines.filter((l) => l.includes('answers READONLY')).length,
      1,
      'the demotion is logged once, not per request',
    );

    await admin.call('REPLICAOF', 'NO', 'ONE');
    await eventually(async () => (await health()) === 200, 15_000, '/healthcheck OK again');
    await eventually(() => breaker.states()['REDIS'] === 'closed', 15_000, 'circuit closed');
    t.equal(gauge(), 0, 'gauge back to 0');
    t.equal(
      lines.filter((l) => l.includes('_URL is a master again')).length,
      1,
      'the recovery is logged once',
    );
    await roomInWindow(3600);
    const counter = async () => {
      const keys = await admin.keys('rc_rc_k_v_*');
      return keys.length ? Number(await admin.get(keys[0]!)) : 0;
    };
    const before = await counter();
    await call();
    const after = await counter();
    t.equal(after, before + 1, 'counted in Redis again');
    t.same(
      warnings.filter((w) => w.startsWith('MaxListenersExceededWarning')),
      [],
      'no MaxListenersExceededWarning',
    );
  },
);

t.test(
  'direct counting under REPLICAOF races: only refused INCRBYs fail, none is sent twice, every count exact',
  async (t) => {
    const redis = await startRedis();
    t.teardown(() => redis.stop());
    const admin = adminOf(t, redis);
    // A master nobody listens on: the server becomes a replica and keeps its data (no sync happens).
    const nowhere = await freePort();
    const d = await deployment(t, redis, { REDIS_TIMEOUT: '5s' });
    // Requests of 2,000 ops (~100 KB): Redis reads them in several parts, so a REPLICAOF lands between
    // the part that ran and the part that is refused, as in a coalesced turn of thousands of keys.
    const KEYS = 2000;
    const counted = new Array<number>(KEYS).fill(0);
    let refused = 0;
    let partial = 0;
    let stop = false;
    const flipper = (async () => {
      while (!stop) {
        await admin.call('REPLICAOF', '127.0.0.1', String(nowhere));
        await new Promise((r) => setTimeout(r, 5 + Math.random() * 20));
        await admin.call('REPLICAOF', 'NO', 'ONE');
        await new Promise((r) => setTimeout(r, 5 + Math.random() * 40));
      }
    })();
    const worker = async (w: number) => {
      for (let n = 0; n < 25; n++) {
        const ops: CounterOp[] = new Array(KEYS);
        for (let k = 0; k < KEYS; k++) {
          ops[k] = { key: `race_${k}`, hits: 1 + ((w + k) % 3), expireSeconds: 600, perSecond: false };
        }
        const results = await d.incrementEach(ops);
        let ok = 0;
        for (let k = 0; k < KEYS; k++) {
          const r = results[k];
          if (typeof r === 'number') {
            ok++;
            counted[k]! += ops[k]!.hits;
          } else refused++;
        }
        if (ok > 0 && ok < KEYS) partial++;
      }
    };
    try {
      await Promise.all([0, 1, 2, 3].map(worker));
    } finally {
      stop = true;
      await flipper;
    }
    await admin.call('REPLICAOF', 'NO', 'ONE');
    t.comment(`REPLICAOF race: ${refused} ops refused, ${partial} requests partly refused`);
    t.ok(refused > 0, 'the race happened: some ops were refused');
    const inRedis = await Promise.all(counted.map((_, k) => admin.get(`race_${k}`)));
    t.same(
      inRedis.map((v) => Number(v ?? 0)),
      counted,
      'each counter holds exactly the hits answered as counted',
    );
  },
);

t.test(
  'limit script checks under SCRIPT FLUSH races: only NOSCRIPT checks are resent, every count exact',
  async (t) => {
    const redis = await startRedis();
    t.teardown(() => redis.stop());
    const admin = adminOf(t, redis);
    const d = await deployment(t, redis, { REDIS_TIMEOUT: '5s' });
    const KEYS = 40;
    const counted = new Array<number>(KEYS).fill(0);
    let stop = false;
    let flushes = 0;
    let rejected = 0;
    const flusher = (async () => {
      while (!stop) {
        await admin.call('SCRIPT', 'FLUSH');
        flushes++;
        await new Promise((r) => setTimeout(r, 2 + Math.random() * 10));
      }
    })();
    const worker = async (w: number) => {
      for (let n = 0; n < 100; n++) {
        const now = Date.now();
        const picked: number[] = [];
        const checks: LimitCheck[] = [];
        for (let i = 0; i < 8; i++) {
          const k = (w * 7 + n + i * 5) % KEYS;
          picked.push(k);
          // A fixed window with a limit never reached: every check is admitted and counted once.
          checks.push({ keys: [`{s${k}}fw`], args: [now, 1, 0, 1e9, 3_600_000, 0], perSecond: false });
        }
        const verdicts = await d.evaluate(checks);
        for (let i = 0; i < checks.length; i++) {
          if (verdicts[i]![0] === 0) counted[picked[i]!]!++;
          else rejected++;
        }
      }
    };
    const at = Date.now();
    try {
      await Promise.all([0, 1, 2, 3, 4, 5, 6, 7].map(worker));
    } finally {
      stop = true;
      await flusher;
    }
    t.comment(`SCRIPT FLUSH race: ${flushes} flushes in ${Date.now() - at} ms`);
    t.ok(flushes > 3, 'the race happened');
    t.equal(rejected, 0, 'every check admitted (the limit is never reached)');
    const inRedis = await Promise.all(counted.map((_, k) => admin.get(`{s${k}}fw`)));
    t.same(
      inRedis.map((v) => Number(v ?? 0)),
      counted,
      'each counter holds exactly the checks answered as counted',
    );
  },
);
