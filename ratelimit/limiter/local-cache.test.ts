// The local over-limit cache: exact hits (never a false one, even on a hash collision), expiry that
// never outlives the TTL, FIFO eviction within the byte budget, long and non-ASCII keys, and a
// property test against a Map model.
import fc from 'fast-check';
import t from 'tap';
import { LocalOverLimitCache, overLimitKeyHash } from './local-cache.js';

const MiB = 1024 * 1024;

t.test('a hit is exact: only the key that was set answers', async (t) => {
  const cache = new LocalOverLimitCache(MiB, () => 1_000_000);
  cache.set('d_k_v_1700000000', 60);
  t.ok(cache.has('d_k_v_1700000000'));
  for (const other of ['d_k_v_170000000', 'd_k_v_17000000000', 'd_k_w_1700000000', 'D_k_v_1700000000', '']) {
    t.notOk(cache.has(other), `not ${JSON.stringify(other)}`);
  }
  t.equal(cache.size, 1);
  cache.set('', 60);
  t.ok(cache.has(''), 'the empty key is a key like any other');
  t.equal(cache.size, 2);
});

t.test('two keys with the same 32-bit hash never answer for each other', async (t) => {
  const seen = new Map<number, string>();
  let pair: [string, string] | undefined;
  for (let i = 0; !pair && i < 2_000_000; i++) {
    const key = `domain_ip_10.${i}_1700000000`;
    const h = overLimitKeyHash(key);
    const earlier = seen.get(h);
    if (earlier !== undefined) pair = [earlier, key];
    else seen.set(h, key);
  }
  if (!pair) throw new Error('no collision among 2M keys');
  const [a, b] = pair;
  t.equal(overLimitKeyHash(a), overLimitKeyHash(b), `${a} and ${b} collide`);
  const cache = new LocalOverLimitCache(MiB, () => 1_000_000);
  cache.set(a, 60);
  t.ok(cache.has(a));
  t.notOk(cache.has(b), 'same hash, other key: a miss');
  cache.set(b, 60);
  t.ok(cache.has(a) && cache.has(b), 'both kept side by side');
  t.equal(cache.size, 2);
});

t.test('an entry expires within the second before its TTL ends, never after', async (t) => {
  let now = 0;
  const cache = new LocalOverLimitCache(MiB, () => now);
  for (const start of [1_000_000, 1_000_001, 1_000_500, 1_000_999]) {
    now = start;
    const key = `k${start}`;
    cache.set(key, 60);
    now = start + 59_000 - 1;
    t.ok(cache.has(key), `${key} still there 1 s before its TTL`);
    now = start + 60_000;
    t.notOk(cache.has(key), `${key} gone at its TTL`);
  }
  t.equal(cache.size, 0, 'expired entries met by a lookup are dropped');
});

t.test('a key set again is renewed and becomes the newest', async (t) => {
  let now = 1_000_000;
  const cache = new LocalOverLimitCache(MiB, () => now);
  cache.set('a', 1);
  now += 500;
  cache.set('a', 60);
  now += 5_000;
  t.ok(cache.has('a'), 'the later TTL counts');
  t.equal(cache.size, 1);
});

t.test('the oldest entries are evicted first and the budget is never exceeded', async (t) => {
  for (const budget of [100, 1000, 10_000, 100_000, 3 * MiB + 7]) {
    const cache = new LocalOverLimitCache(budget, () => 1_000_000);
    t.ok(cache.allocatedBytes <= budget, `allocated ${cache.allocatedBytes} <= ${budget}`);
    const n = Math.ceil(budget / 10) + 100;
    for (let i = 0; i < n; i++) {
      cache.set(`domain_key_value${i}_1700000000`, 3600);
      if (cache.approximateBytes > cache.allocatedBytes) {
        t.fail(`in use ${cache.approximateBytes} > allocated ${cache.allocatedBytes}`);
        break;
      }
    }
    const kept: boolean[] = [];
    for (let i = 0; i < n; i++) kept.push(cache.has(`domain_key_value${i}_1700000000`));
    const first = kept.indexOf(true);
    t.ok(first > 0, `${budget}: the oldest were evicted (first kept: ${first} of ${n})`);
    t.ok(
      kept.slice(first).every((k) => k),
      `${budget}: what is kept is the newest run of keys`,
    );
    t.equal(cache.size, n - first);
  }
});

t.test('a budget too small for any entry caches nothing and never throws', async (t) => {
  for (const budget of [0, 1, 40, 44]) {
    const cache = new LocalOverLimitCache(budget);
    cache.set('k', 60);
    t.notOk(cache.has('k'), `budget ${budget}`);
    t.ok(cache.allocatedBytes <= budget);
  }
});

t.test('long keys: kept when they fit, refused without evicting anything when they cannot', async (t) => {
  const cache = new LocalOverLimitCache(MiB, () => 1_000_000);
  const long = 'x'.repeat(100_000) + '_1700000000';
  cache.set('small', 60);
  cache.set(long, 60);
  t.ok(cache.has(long));
  t.notOk(cache.has(long.slice(1)), 'one character shorter: a miss');
  t.notOk(cache.has(long.slice(0, -1) + '1'), 'last character differs: a miss');
  const huge = 'y'.repeat(2 * MiB);
  cache.set(huge, 60);
  t.notOk(cache.has(huge), 'larger than the budget: not cached');
  t.ok(cache.has('small') && cache.has(long), 'and nothing was evicted for it');
});

t.test('non-ASCII keys are stored as UTF-8 and matched exactly', async (t) => {
  const cache = new LocalOverLimitCache(MiB, () => 1_000_000);
  const keys = ['d_user_ключ_1700000000', 'd_emoji_🙂_1700000000', 'd_é_1700000000', 'd_中文_1700000000'];
  for (const k of keys) cache.set(k, 60);
  for (const k of keys) t.ok(cache.has(k), k);
  t.notOk(cache.has('d_user_ключа_1700000000'));
  t.notOk(cache.has('d_emoji_🙃_1700000000'), 'another emoji of the same length');
  t.notOk(cache.has('d_e_1700000000'), 'the ASCII look-alike');
  t.notOk(cache.has('d_ée_1700000000'.slice(0, 4) + '1700000000'));
  // Same UTF-8 byte length as 'd_é_…' but a different string.
  t.notOk(cache.has('d_ab_1700000000'));
  const lone = 'd_\ud800_1700000000';
  cache.set(lone, 60);
  t.notOk(cache.has(lone), 'a lone surrogate has no exact UTF-8 form: not cached');
  t.notOk(cache.has('d_\ufffd_1700000000'), 'and never answers for its replacement character');
  t.equal(cache.size, keys.length);
});

// The model: a Map in insertion order (a key set again moves to the end), expiry in whole seconds.
const keyArb = fc.oneof(
  fc.constantFrom('a', 'b', 'c', 'ключ', '🙂', ''),
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 12 }),
  fc.string({ unit: 'binary', maxLength: 12 }),
  fc.nat(300).map((n) => `domain_ip_10.${n}_1700000000`),
);
const opArb = fc.oneof(
  fc.record({ op: fc.constant('set' as const), key: keyArb, ttl: fc.integer({ min: 0, max: 120 }) }),
  fc.record({ op: fc.constant('has' as const), key: keyArb }),
  fc.record({ op: fc.constant('tick' as const), ms: fc.integer({ min: 0, max: 30_000 }) }),
);

const wellFormed = (s: string) =>
  !/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(s);

t.test('property: with room for everything, the cache answers as a Map model does', async () => {
  fc.assert(
    fc.property(fc.array(opArb, { maxLength: 300 }), fc.integer({ min: 0, max: 999 }), (ops, startMs) => {
      let now = 1_700_000_000_000 + startMs;
      const cache = new LocalOverLimitCache(MiB, () => now);
      const model = new Map<string, number>(); // key -> expiry (ms)
      for (const o of ops) {
        if (o.op === 'tick') now += o.ms;
        else if (o.op === 'set') {
          if (!wellFormed(o.key)) continue;
          cache.set(o.key, o.ttl);
          model.delete(o.key);
          model.set(o.key, Math.floor((now + o.ttl * 1000) / 1000) * 1000);
        } else {
          const exp = model.get(o.key);
          const expected = exp !== undefined && exp > now;
          if (exp !== undefined && !expected) model.delete(o.key);
          if (cache.has(o.key) !== expected) return false;
        }
      }
      return cache.size === model.size;
    }),
    { numRuns: 300 },
  );
});

t.test('property: in a small budget a hit is always right and eviction keeps the newest run', async () => {
  fc.assert(
    fc.property(fc.array(opArb, { maxLength: 400 }), fc.integer({ min: 64, max: 4000 }), (ops, budget) => {
      let now = 1_700_000_000_000;
      const cache = new LocalOverLimitCache(budget, () => now);
      const model = new Map<string, number>();
      for (const o of ops) {
        if (o.op === 'tick') now += o.ms;
        else if (o.op === 'set') {
          if (!wellFormed(o.key)) continue;
          cache.set(o.key, o.ttl + 1000); // long TTLs: what goes is evicted, not expired
          model.delete(o.key);
          if (!cache.has(o.key)) {
            // Only an entry larger than the arena may be refused: the arena is at least half the budget,
            // and at least the budget less the smallest index (32 bytes) and 3 bytes of alignment.
            const entry = 12 + ((Buffer.byteLength(o.key) + 3) & ~3);
            if (entry <= Math.min(budget / 2, budget - 35)) return false;
            continue;
          }
          model.set(o.key, Math.floor((now + (o.ttl + 1000) * 1000) / 1000) * 1000);
        } else if (cache.has(o.key)) {
          const exp = model.get(o.key);
          if (exp === undefined || exp <= now) return false; // a false hit
        }
        if (cache.approximateBytes > cache.allocatedBytes || cache.allocatedBytes > budget) return false;
      }
      // Kept keys are the newest run of the model's order: no kept key is older than an evicted one.
      const kept = [...model.keys()].map((k) => cache.has(k));
      const first = kept.indexOf(true);
      return first === -1
        ? cache.size === 0
        : kept.slice(first).every((k) => k) && cache.size === kept.length - first;
    }),
    { numRuns: 300 },
  );
});
