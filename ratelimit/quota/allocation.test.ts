// The allocation rules and the bucket matching of docs/rlqs.md, as pure functions.
import t from 'tap';
import { loadConfig } from '../config/index.js';
import { BucketMatcher, budgetOf, divide, podFraction, strategyFor } from './index.js';
import { wholeShares } from './allocator.js';

const config = (yaml: string) => loadConfig([{ name: 'test.yaml', yaml }]);

t.test('a bucket is matched in the tree order whatever the map order; ambiguity is refused', async (t) => {
  const m = new BucketMatcher(
    config(`domain: d
descriptors:
  - key: a
    descriptors:
      - key: b
        value: x
        rate_limit: { unit: second, requests_per_unit: 5 }
  - key: a
    value: special
    rate_limit: { unit: minute, requests_per_unit: 7 }
  - key: c
    descriptors:
      - key: c
        rate_limit: { unit: second, requests_per_unit: 1 }
`),
  );
  t.equal(m.match('d', { b: 'x', a: '1' })?.rule.requestsPerUnit, 5, 'b, a read as a -> b');
  t.equal(m.match('d', { a: 'special' })?.rule.requestsPerUnit, 7, 'exact value first, as ShouldRateLimit');
  t.equal(m.match('d', { b: 'y', a: '1' }), undefined, 'value not matched: no rule');
  t.equal(m.match('d', { a: '1', b: 'x', z: '1' }), undefined, 'an extra key: no rule');
  t.equal(m.match('other', { a: '1' }), undefined, 'unknown domain: no rule');
  t.same(m.orderOf('d', ['b', 'a']), ['a', 'b']);
  t.throws(
    () =>
      new BucketMatcher(
        config(`domain: d
descriptors:
  - key: a
    descriptors:
      - key: b
        rate_limit: { unit: second, requests_per_unit: 5 }
  - key: b
    descriptors:
      - key: a
        rate_limit: { unit: second, requests_per_unit: 5 }
`),
      ),
    /ambiguous for rate limit quota buckets: the paths a -> b and b -> a/,
  );
});

t.test('shares follow demand, a newcomer weighs the average, every share sums to the total', async (t) => {
  const out: number[] = [];
  divide(
    100,
    [
      { demand: 300, established: true, sampled: true },
      { demand: 100, established: true, sampled: true },
    ],
    out,
  );
  t.same(out, [75, 25]);
  divide(
    90,
    [
      { demand: 30, established: true, sampled: true },
      { demand: 30, established: true, sampled: true },
      { demand: 1, established: false, sampled: false },
    ],
    out,
  );
  t.same(out, [30, 30, 30], 'a new subscriber gets budget / (n + 1) while the others are equal');
  divide(
    100,
    [
      { demand: 100, established: true, sampled: true },
      { demand: 0, established: true, sampled: true },
    ],
    out,
  );
  t.ok(
    out[1]! > 0 && out[1]! < 1 && Math.abs(out[0]! + out[1]! - 100) < 1e-9,
    'an idle subscriber keeps a trickle',
  );
  divide(
    10,
    [
      { demand: 0, established: true, sampled: true },
      { demand: 0, established: true, sampled: true },
    ],
    out,
  );
  t.same(out, [5, 5], 'no demand anywhere: equal shares');
  divide(
    100,
    [
      { demand: 30, established: false, sampled: true },
      { demand: 0, established: false, sampled: false },
    ],
    out,
  );
  t.same(out, [50, 50], 'nobody established yet: a newcomer weighs as the sampled ones');
  t.equal(podFraction(30, 90, 1), 0.25, "this pod's demand over the fleet's");
  t.equal(podFraction(30, undefined, 4), 0.25, 'fleet unknown: 1 / RLQS_EXPECTED_PODS');
});

t.test('a share is a token bucket of whole tokens per whole second with a small max_tokens', async (t) => {
  const budget = budgetOf({
    unlimited: false,
    shadowMode: false,
    limits: [{ algorithm: 'fixed_window', requestsPerUnit: 60, unit: 'MINUTE', unitSeconds: 60, burst: 0 }],
  } as never);
  t.same(budget, { kind: 'rate', perSecond: 1, burst: 0 });
  // Envoy reads fill_interval in whole seconds: never a fraction of one.
  t.same(strategyFor(budget, 33, 33.4).tokenBucket, {
    maxTokens: 4,
    tokensPerFill: { value: 33 },
    fillInterval: { seconds: 1, nanos: 0 },
  });
  t.same(strategyFor(budget, 1, 1.5).tokenBucket, {
    maxTokens: 2,
    tokensPerFill: { value: 1 },
    fillInterval: { seconds: 1, nanos: 0 },
  });
  t.same(strategyFor(budget, 0, 0.3).tokenBucket, {
    maxTokens: 1,
    tokensPerFill: { value: 1 },
    fillInterval: { seconds: 4, nanos: 0 },
  });
  t.same(strategyFor(budget, 0, 0), { blanketRule: 'DENY_ALL' });
  t.same(strategyFor({ kind: 'allow' }, 5, 5), { blanketRule: 'ALLOW_ALL' });
  t.same(budgetOf(undefined), { kind: 'allow' }, 'no rule: allow all');
});

t.test('whole shares add up to the total and do not trade the extra token back and forth', async (t) => {
  const out: number[] = [];
  wholeShares([33.4, 33.3, 33.3], [-1, -1, -1], out);
  t.same(out, [34, 33, 33], 'largest remainder: 100 in all, never more');
  wholeShares([33.3, 33.4, 33.3], [34, 33, 33], out);
  t.same(out, [34, 33, 33], 'a slightly larger remainder elsewhere does not move the held extra token');
  wholeShares([33.0, 33.9, 33.1], [34, 33, 33], out);
  t.same(out, [33, 34, 33], 'a clearly larger one does');
  wholeShares([0.4, 0.4, 0.2], [-1, -1, -1], out);
  t.same(out, [1, 0, 0], 'a total of 1 is 1 token in all');
  wholeShares([250.5, 249.5], [-1, -1], out);
  t.equal(out[0]! + out[1]!, 500);
});
