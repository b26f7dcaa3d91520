// Failure-mode inputs (issue 14): the config field and the settings are validated with errors naming
// the field; the `local` share and its in-memory windows.
import t from 'tap';
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
  t.same(s.failureMode, { mode: 'error', localPods: 1 }, 'error by default: drop-in compatible');
  t.same(s.redisCircuitBreaker, { enabled: true, failureThreshold: 5, probeIntervalMs: 500 });
  t.equal(s.redisStartupWaitMs, 10_000);
  const o = loadSettings({
    CACHE_FAILURE_MODE: 'LOCAL',
    CACHE_FAILURE_MODE_LOCAL_PODS: '3',
    REDIS_CIRCUIT_BREAKER_FAILURES: '2',
    REDIS_CIRCUIT_BREAKER_PROBE_INTERVAL: '1s',
    REDIS_CIRCUIT_BREAKER_ENABLED: 'false',
    REDIS_STARTUP_WAIT: '0',
  });
  t.same(o.failureMode, { mode: 'local', localPods: 3 });
  t.same(o.redisCircuitBreaker, { enabled: false, failureThreshold: 2, probeIntervalMs: 1000 });
  t.equal(o.redisStartupWaitMs, 0);
  t.throws(() => loadSettings({ CACHE_FAILURE_MODE: 'open' }), {
    message: /^CACHE_FAILURE_MODE: invalid value 'open'/,
  });
  t.throws(() => loadSettings({ CACHE_FAILURE_MODE_LOCAL_PODS: '0' }), {
    message: /^CACHE_FAILURE_MODE_LOCAL_PODS: must be >= 1/,
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
