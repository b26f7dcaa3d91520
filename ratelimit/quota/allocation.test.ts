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
      { demand: 30, established: true, sampled: true },
      { demand: 10, established: true, sampled: true },
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
});

/** The fields of a fleet view that only matter when the fleet wants more than the budget. */
const UNDER = { guaranteed: 0, subscribers: 0, mineGuaranteed: 0 };

t.test("a pod's part of the budget comes from the fleet window every pod reads", async (t) => {
  const window = { ...UNDER, demand: 120, pods: 2, unsampled: 0 };
  t.equal(podFraction({ ...window, mine: 30 }, 1), 0.25, "this pod's demand over the fleet's");
  t.equal(podFraction(undefined, 4), 0.25, 'fleet unknown: 1 / RLQS_EXPECTED_PODS');
  t.equal(
    podFraction({ ...UNDER, demand: 0, pods: 0, unsampled: 0, mine: 'absent' }, 4),
    0.25,
    'empty window: unknown',
  );
  t.equal(
    podFraction({ ...UNDER, demand: 0, pods: 2, unsampled: 0, mine: 0 }, 1),
    0.5,
    'nobody wants any: equal parts',
  );
});

t.test('three pods, one new to the bucket: the parts never add up to more than the budget', async (t) => {
  // The last window: pod a's Envoys had demand samples (300/s); pods b and c were present but their
  // Envoys had only subscribed. Every pod reads that window.
  const window = { ...UNDER, demand: 300, pods: 3, unsampled: 2 };
  const a = podFraction({ ...window, mine: 300 }, 3);
  const b = podFraction({ ...window, mine: 'unsampled' }, 3);
  const c = podFraction({ ...window, mine: 'unsampled' }, 3);
  // Taking the others' silence as "they want nothing" gave a the whole budget, and b and c their demand
  // now against a's: twice the budget for a window.
  t.ok(a + b + c <= 1 + 1e-9, `a ${a.toFixed(3)} + b ${b.toFixed(3)} + c ${c.toFixed(3)} <= 1`);
  t.equal(b, 1 / 3, 'a newcomer gets an equal part');
  t.equal(a, 1 / 3, 'out of what the pods with demand share');
  // Two pods with demand 300 and 100, and a pod that began serving the bucket after the window was
  // added up: it is not counted there, so it gets nothing until the next window counts it.
  const w2 = { ...UNDER, demand: 400, pods: 2, unsampled: 0 };
  const parts = [
    podFraction({ ...w2, mine: 300 }, 3),
    podFraction({ ...w2, mine: 100 }, 3),
    podFraction({ ...w2, mine: 'absent' }, 3),
  ];
  t.same(parts, [0.75, 0.25, 0], 'the newest pod waits for the window it is counted in');
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

t.test('past the budget the division is max-min fair and a demand counts at most the budget', async (t) => {
  const out: number[] = [];
  const sub = (demand: number) => ({ demand, established: true, sampled: true });
  divide(100, [sub(2 ** 53), sub(50), sub(50)], out, 100);
  t.same(out, [100 / 3, 100 / 3, 100 / 3], 'a liar weighs as one Envoy wanting the whole budget');
  divide(100, [sub(1.8446744073709552e19), sub(10), sub(80)], out, 100);
  t.same(out, [45, 10, 45], 'below the level a demand is met whole; the others share the rest equally');
  divide(100, [sub(60), sub(20)], out, 100);
  t.same(out, [75, 25], 'within the budget: in proportion to demand, the room spread');
});

t.test('past the budget every pod first gets its guaranteed demand', async (t) => {
  // Budget 100; pod a: two honest Envoys wanting 50 and a liar (capped at 100); pod b: one honest
  // Envoy wanting 50 and a liar. Five subscribers: level 20, guaranteed a 60, b 40.
  const w = { demand: 350, guaranteed: 100, subscribers: 5, pods: 2, unsampled: 0 };
  const a = podFraction({ ...w, mine: 200, mineGuaranteed: 60 }, 1, 100);
  const b = podFraction({ ...w, mine: 150, mineGuaranteed: 40 }, 1, 100);
  t.same([a, b], [0.6, 0.4], 'in proportion to the guarantees, not to what the liars claim');
  // Guarantees below the budget: the rest goes by demand above the guarantee.
  const w2 = { demand: 200, guaranteed: 40, subscribers: 4, pods: 2, unsampled: 0 };
  const c = podFraction({ ...w2, mine: 150, mineGuaranteed: 20 }, 1, 100);
  const d = podFraction({ ...w2, mine: 50, mineGuaranteed: 20 }, 1, 100);
  t.ok(Math.abs(c + d - 1) < 1e-9, `the parts add up to the budget (${c} + ${d})`);
  t.ok(d * 100 >= 20 && d * 100 <= 50, `each pod at least its guarantee, at most its demand (${d * 100})`);
});
