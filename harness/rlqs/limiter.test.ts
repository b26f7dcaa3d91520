// The simulated Envoy's local enforcement (Limiter) on a fake clock: the token bucket as Envoy computes it
// (rate = tokens_per_fill per WHOLE seconds of fill_interval, starting full), the divergences used to
// measure what that costs, requests_per_time_unit and blanket rules.
import t from 'tap';
import { Limiter } from './envoy.js';

/** Requests admitted out of one per `everyMs` for `forMs`, starting at 0. */
function admitted(l: Limiter, everyMs: number, forMs: number): number {
  let n = 0;
  for (let now = 0; now < forMs; now += everyMs) if (l.take(now)) n++;
  return n;
}

const tb = (maxTokens: number, perFill: number, seconds: number, nanos = 0) => ({
  token_bucket: {
    max_tokens: maxTokens,
    tokens_per_fill: { value: perFill },
    fill_interval: { seconds, nanos },
  },
});

t.test('token bucket: starts full, refills tokens_per_fill per whole second of fill_interval', async (t) => {
  // 3 tokens per 1.5 s, offered 100 requests/s for 10 s: Envoy reads the interval as 1 s, so ~3/s.
  const envoy = admitted(new Limiter(tb(1, 3, 1, 500_000_000), 0), 10, 10_000);
  t.ok(envoy >= 30 && envoy <= 31, `Envoy's reading: ~3/s (got ${envoy} in 10 s)`);
  const exact = admitted(new Limiter(tb(1, 3, 1, 500_000_000), 0, { exactFillInterval: true }), 10, 10_000);
  t.ok(exact >= 20 && exact <= 21, `fractional reading: ~2/s (got ${exact} in 10 s)`);
  const full = new Limiter(tb(5, 1, 60), 0);
  t.same(
    Array.from({ length: 6 }, () => full.take(0)),
    [true, true, true, true, true, false],
    'a new bucket holds max_tokens',
  );
  const carried = new Limiter(tb(5, 1, 60), 0, { initialTokens: 2 });
  t.same(
    Array.from({ length: 3 }, () => carried.take(0)),
    [true, true, false],
    'initialTokens (the carryTokens divergence) starts with what was left',
  );
  const sub = new Limiter(tb(1, 1, 0, 500_000_000), 0);
  t.equal(admitted(sub, 10, 1000), 100, 'a fill interval under 1 s is 0 whole seconds: unbounded');
});

t.test('requests_per_time_unit and blanket rules', async (t) => {
  const rpu = new Limiter({ requests_per_time_unit: { requests_per_time_unit: 5, time_unit: 'SECOND' } }, 0);
  t.equal(admitted(rpu, 10, 3000), 15, '5 per second for 3 s');
  t.equal(admitted(new Limiter({ blanket_rule: 'DENY_ALL' }, 0), 10, 100), 0);
  t.equal(admitted(new Limiter({ blanket_rule: 'ALLOW_ALL' }, 0), 10, 100), 10);
});
