// Failure-mode inputs: the config field and the settings are validated with errors naming
// the field; the `local` share and its in-memory windows.
import t from 'tap';
import { flatKey, heapGrowth } from '../../harness/heap.js';
import { loadConfig } from '../config/index.js';
import { loadSettings } from '../settings/index.js';
import { LocalFallbackCounter, localShare } from './failure-mode.js';

const doc = (mode: string) => `
domain: d
descriptors:
  - key: k
    failure_mode: ${mode}
    rate_limit: { unit: minute, requests_per_unit: 10 }
`;

t.test('failure_mode on a descriptor is compiled into the rule', async (t) => {
  for (const mode of ['error', 'allow', 'deny', 'local']) {
    const config = loadConfig([{ name: 'd.yaml', yaml: doc(mode) }]);
    t.equal(config.getLimit('d', { entries: [{ key: 'k', value: 'v' }] })?.rule.failureMode, mode);
  }
  const plain = loadConfig([
    {
      name: 'd.yaml',
      yaml: 'domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: minute, requests_per_unit: 1 }\n',
    },
  ]);
  t.equal(plain.getLimit('d', { entries: [{ key: 'k', value: 'v' }] })?.rule.failureMode, undefined);
});

t.test('an unknown failure_mode is refused naming the field and the allowed values', async (t) => {
  t.throws(() => loadConfig([{ name: 'd.yaml', yaml: doc('maybe') }]), {
    message:
      /descriptors\[0\]\.failure_mode.*invalid failure_mode 'maybe' \(one of: error, allow, deny, local\)/,
  });
});

t.test('settings: defaults, values and errors naming the variable', async (t) => {
  const s = loadSettings({});
  t.same(
    s.failureMode,
    { mode: 'error', localPods: 1, localMaxBytes: 64 * 1024 * 1024 },
    'error by default: drop-in compatible',
  );
  t.same(s.redis.circuitBreaker, { enabled: true, failureThreshold: 5, probeIntervalMs: 500 });
  t.equal(s.redis.startupWaitMs, 10_000);
  const o = loadSettings({
    CACHE_FAILURE_MODE: 'LOCAL',
    CACHE_FAILURE_MODE_LOCAL_PODS: '3',
    CACHE_FAILURE_MODE_LOCAL_MAX_BYTES: '1000000',
    REDIS_CIRCUIT_BREAKER_FAILURES: '2',
    REDIS_CIRCUIT_BREAKER_PROBE_INTERVAL: '1s',
    REDIS_CIRCUIT_BREAKER_ENABLED: 'false',
    REDIS_STARTUP_WAIT: '0',
  });
  t.same(o.failureMode, { mode: 'local', localPods: 3, localMaxBytes: 1_000_000 });
  t.same(o.redis.circuitBreaker, { enabled: false, failureThreshold: 2, probeIntervalMs: 1000 });
  t.equal(o.redis.startupWaitMs, 0);
  t.throws(() => loadSettings({ CACHE_FAILURE_MODE: 'open' }), {
    message: /^CACHE_FAILURE_MODE: invalid value 'open'/,
  });
  t.throws(() => loadSettings({ CACHE_FAILURE_MODE_LOCAL_PODS: '0' }), {
    message: /^CACHE_FAILURE_MODE_LOCAL_PODS: must be >= 1/,
  });
  t.throws(() => loadSettings({ CACHE_FAILURE_MODE_LOCAL_MAX_BYTES: '100' }), {
    message: /^CACHE_FAILURE_MODE_LOCAL_MAX_BYTES: must be >= 4096/,
  });
  t.throws(() => loadSettings({ REDIS_CIRCUIT_BREAKER_FAILURES: '0' }), {
    message: /^REDIS_CIRCUIT_BREAKER_FAILURES: must be >= 1/,
  });
  t.throws(() => loadSettings({ REDIS_CIRCUIT_BREAKER_PROBE_INTERVAL: '1ms' }), {
    message: /^REDIS_CIRCUIT_BREAKER_PROBE_INTERVAL: must be at least 10ms/,
  });
});

t.test('local share: ceil(limit / pods), never rounded to zero; zero still blocks', async (t) => {
  t.equal(localShare(100, 1), 100);
  t.equal(localShare(100, 3), 34);
  t.equal(localShare(2, 3), 1);
  t.equal(localShare(0, 3), 0);
  t.ok(3 * localShare(100, 3) <= 100 + 3 - 1, 'the fleet bound: <= limit + pods - 1');
});

t.test('local counter: counts per key within its window, restarts after it', async (t) => {
  let now = 1_000_000;
  const c = new LocalFallbackCounter(() => now);
  t.equal(c.add('a', 1, 60), 1);
  t.equal(c.add('a', 2, 60), 3);
  t.equal(c.add('b', 1, 60), 1);
  now += 60_000;
  t.equal(c.add('a', 1, 60), 1, 'a new window starts from zero');
});

t.test('local counter: long distinct keys stay within its byte budget, oldest windows evicted', async (t) => {
  const budget = 8 * 1024 * 1024;
  const now = 1_000_000;
  const c = new LocalFallbackCounter(() => now, budget);
  const pad = 'v'.repeat(1000);
  let over = 0;
  // 200,000 keys of ~1 KB (200 MB unbounded).
  const grown = await heapGrowth(() => {
    for (let i = 0; i < 200_000; i++) {
      c.add(flatKey(`d_header_${i}_${pad}`), 1, 60);
      if (c.bytes > budget) over++;
    }
  });
  t.equal(over, 0, 'the accounted bytes never exceed the budget');
  t.ok(c.bytes > budget * 0.9, `the budget is used (${c.bytes} bytes, ${c.size} keys)`);
  t.ok(
    grown < c.bytes * 1.25 + 4 * 1024 * 1024,
    `heap grown ${(grown / 1048576).toFixed(1)} MB for ${(c.bytes / 1048576).toFixed(1)} MB accounted`,
  );
  // Short keys: the per-entry overhead is accounted too.
  const shortKeys = new LocalFallbackCounter(() => now, budget);
  const grownShort = await heapGrowth(() => {
    for (let i = 0; i < 200_000; i++) shortKeys.add(`d_k_${i}`, 1, 60);
  });
  t.ok(shortKeys.bytes <= budget, `short keys: ${shortKeys.size} kept within the budget`);
  t.ok(
    grownShort < shortKeys.bytes * 1.25 + 4 * 1024 * 1024,
    `short keys: heap grown ${(grownShort / 1048576).toFixed(1)} MB for ${(shortKeys.bytes / 1048576).toFixed(1)} MB accounted`,
  );
  // The newest keys are still counted; the oldest were evicted and start again.
  t.equal(c.add(`d_header_199999_${pad}`, 1, 60), 2, 'the newest key keeps its count');
  t.equal(c.add(`d_header_0_${pad}`, 1, 60), 1, 'the oldest key was evicted: its window restarts here');
  // A key larger than the whole budget is not kept: its count is the request's hits.
  const small = new LocalFallbackCounter(() => now, 4096);
  t.equal(small.add('x'.repeat(5000), 3, 60), 3);
  t.equal(small.add('x'.repeat(5000), 3, 60), 3);
  t.equal(small.size, 0);
});

t.test('local counter: expired windows are swept before live keys are evicted', async (t) => {
  let now = 1_000_000;
  const c = new LocalFallbackCounter(() => now, 4096);
  // 4096 bytes hold a handful of entries: fill with short-lived keys, then add live ones.
  for (let i = 0; i < 30; i++) c.add(`old_${i}`, 1, 1);
  const live = c.size;
  t.ok(live > 10 && live < 30 && c.bytes <= 4096, `${live} entries fill the budget`);
  now += 2000;
  c.add('live_a', 1, 60);
  t.equal(c.size, 1, 'the expired windows went first');
  t.equal(c.add('live_a', 1, 60), 2);
});
