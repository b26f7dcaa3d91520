// One caller's extreme input must never change another caller's answer or the circuit breaker. A
// property test on real redis-server through the real stack (coalescing layer, circuit breaker, Redis
// store, with and without the direct connection): random turns interleave hostile requests (hits near
// or past 2^53 and 2^63, up to 1,100 identical descriptors, keys already near Redis's 64-bit limit) with a
// victim's ordinary ones, and the victim's counts must be exactly those of the same turns without the
// hostile traffic, with every circuit closed and no call refused.
import t from 'tap';
import fc from 'fast-check';
import { startRedis } from '../../harness/redis/index.js';
import {
  CoalescingCounterStore,
  CounterRefusedError,
  MAX_OP_HITS,
  type CounterOp,
  type LimitCheck,
  CircuitBreakerStore,
} from '../counting/index.js';
import { loadSettings } from '../settings/index.js';
import { RedisCounterStore } from './redis-store.js';

const noTls = { caCert: '', clientCert: '', clientKey: '', skipHostnameVerification: false };

interface Req {
  readonly victim: boolean;
  /** Index of the key (victim keys and hostile keys are apart). */
  readonly key: number;
  readonly hits: number;
  /** Identical descriptors in the request. */
  readonly copies: number;
}

const HUGE = [2 ** 53 - 1, 2 ** 53, 2 ** 63, 1.8e19, 2 ** 32, 2 ** 62, Number.MAX_SAFE_INTEGER];
const victimReq = fc.record({
  victim: fc.constant(true),
  key: fc.integer({ min: 0, max: 2 }),
  hits: fc.integer({ min: 1, max: 5 }),
  copies: fc.integer({ min: 1, max: 3 }),
});
const hostileReq = fc.record({
  victim: fc.constant(false),
  key: fc.integer({ min: 0, max: 3 }),
  hits: fc.oneof(fc.constantFrom(...HUGE), fc.integer({ min: 2 ** 40, max: Number.MAX_SAFE_INTEGER })),
  copies: fc.oneof(fc.constant(1), fc.integer({ min: 2, max: 1100 })),
});
/** Turns of requests sent together (one event-loop turn each), in arrival order. */
const schedule = fc.array(fc.array(fc.oneof(victimReq, hostileReq), { minLength: 1, maxLength: 8 }), {
  minLength: 1,
  maxLength: 6,
});

for (const direct of [true, false]) {
  t.test(
    `hostile requests never change a victim's counts or the breaker (direct counting ${direct})`,
    async (t) => {
      const redis = await startRedis();
      t.teardown(() => redis.stop());
      const admin = redis.client();
      t.teardown(() => admin.disconnect());
      const settings = loadSettings({
        REDIS_SOCKET_TYPE: 'tcp',
        REDIS_URL: redis.url,
        REDIS_DIRECT_COUNTING: String(direct),
      });
      const redisStore = new RedisCounterStore({ settings: settings.redis.main, tlsFiles: noTls });
      const breaker = new CircuitBreakerStore(redisStore, {
        enabled: true,
        failureThreshold: 1,
        probeIntervalMs: 60_000,
      });
      const store = new CoalescingCounterStore(breaker);
      t.teardown(() => store.close());
      await store.start();
      let run = 0;

      /** Sends the schedule's turns; the victim's results per request, and every hostile result. */
      async function play(turns: Req[][], prefix: string, withHostile: boolean) {
        const victim: (number | Error)[][] = [];
        const hostile: (number | Error)[] = [];
        for (const turn of turns) {
          const sent: Promise<(number | Error)[]>[] = [];
          const isVictim: boolean[] = [];
          for (const r of turn) {
            if (!r.victim && !withHostile) continue;
            const key = `${prefix}${r.victim ? 'v' : 'h'}${r.key}`;
            const op: CounterOp = { key, hits: r.hits, expireSeconds: 600, perSecond: false };
            sent.push(store.incrementEach(new Array<CounterOp>(r.copies).fill(op)));
            isVictim.push(r.victim);
          }
          const results = await Promise.all(sent);
          results.forEach((res, i) => (isVictim[i] ? victim.push(res) : hostile.push(...res)));
        }
        return { victim, hostile };
      }

      await fc.assert(
        fc.asyncProperty(schedule, async (turns) => {
          const id = run++;
          // Hostile key 3 starts a hair below 2^63 - 1: any increment past it overflows in Redis.
          await admin.set(`iso${id}:h3`, '9223372036854775000', 'EX', 600);
          const alone = await play(turns, `alone${id}:`, false);
          const mixed = await play(turns, `iso${id}:`, true);
          t.same(mixed.victim, alone.victim, 'the victim counts exactly as alone');
          for (const h of mixed.hostile) {
            // Every hostile op is counted (no error), and over any limit (requests_per_unit < 2^32).
            if (typeof h !== 'number' || h < MAX_OP_HITS) t.fail(`hostile result ${String(h)}`);
          }
          t.ok(breaker.allClosed(), 'every circuit closed');
          t.equal(breaker.refused, 0, 'no call refused');
          return true;
        }),
        { numRuns: 40 },
      );
    },
  );
}

for (const direct of [true, false]) {
  t.test(
    `a limit-script check Redis refuses fails only its own request, never the breaker (direct counting ${direct})`,
    async (t) => {
      const redis = await startRedis();
      t.teardown(() => redis.stop());
      const admin = redis.client();
      t.teardown(() => admin.disconnect());
      const settings = loadSettings({
        REDIS_SOCKET_TYPE: 'tcp',
        REDIS_URL: redis.url,
        REDIS_DIRECT_COUNTING: String(direct),
      });
      const redisStore = new RedisCounterStore({ settings: settings.redis.main, tlsFiles: noTls });
      const breaker = new CircuitBreakerStore(redisStore, {
        enabled: true,
        failureThreshold: 1,
        probeIntervalMs: 60_000,
      });
      const store = new CoalescingCounterStore(breaker);
      t.teardown(() => store.close());
      await store.start();
      // A key of the wrong type: the script's GET on it is refused (WRONGTYPE) inside Redis.
      await admin.hset('{bad}fw', 'f', '1');
      const now = Date.now();
      const fixed = (key: string, hits: number): LimitCheck => ({
        keys: [key],
        args: [now, hits, 0, 10, 60_000, 0],
        perSecond: false,
      });
      for (let round = 1; round <= 3; round++) {
        // One turn: the victim's checks before and after the refused one, and a huge-hits one.
        const [before, bad, huge, after] = await Promise.allSettled([
          store.evaluate!([fixed('{v1}fw', 1)]),
          store.evaluate!([fixed('{v2}fw', 1), fixed('{bad}fw', 1)]),
          store.evaluate!([fixed('{h}fw', 2 ** 63)]),
          store.evaluate!([fixed('{v3}fw', 2)]),
        ]);
        const verdict = (r: PromiseSettledResult<number[][]>) =>
          r.status === 'fulfilled' ? r.value[0]![0] : `rejected: ${(r.reason as Error).message}`;
        t.equal(verdict(before), 0, `round ${round}: a victim's check before it admitted`);
        t.equal(verdict(after), 0, `round ${round}: a victim's check after it admitted`);
        t.equal(verdict(huge), 1, 'huge hits: over the limit, for that check only');
        t.equal(bad.status, 'rejected', 'the request with the refused check fails');
        t.ok(
          (bad as PromiseRejectedResult).reason instanceof CounterRefusedError,
          'as its own refusal, not a shard failure',
        );
      }
      t.equal(await admin.get('{v1}fw'), '3', 'the victim counted once per round');
      t.equal(await admin.get('{v3}fw'), '6');
      t.ok(breaker.allClosed(), 'the circuit stays closed');
      t.equal(breaker.refused, 0);
    },
  );
}
