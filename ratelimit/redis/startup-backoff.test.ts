// The wait between connection attempts at startup under REDIS_STARTUP_INITIAL_INTERVAL and
// REDIS_STARTUP_MAX_INTERVAL: the initial interval doubling per attempt up to the maximum, jittered
// between the initial interval and that, as the reference waits.
import t from 'tap';
import fc from 'fast-check';
import { startupDelayMs } from './client-options.js';

t.test('doubles from the initial interval up to the maximum', async (t) => {
  const b = { initialMs: 1000, maxMs: 30_000 };
  const top = [1, 2, 3, 4, 5, 6, 7, 20].map((a) => startupDelayMs(a, b, 1));
  t.same(top, [1000, 2000, 4000, 8000, 16_000, 30_000, 30_000, 30_000]);
  t.equal(startupDelayMs(5, b, 0), 1000, 'the jitter never goes below the initial interval');
});

t.test('every wait lies between the initial interval and the capped doubling', async (t) => {
  t.doesNotThrow(() =>
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 10_000 }),
        fc.integer({ min: 0, max: 120_000 }),
        fc.integer({ min: 1, max: 2000 }),
        fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
        (initialMs, maxMs, attempt, r) => {
          const d = startupDelayMs(attempt, { initialMs, maxMs }, r);
          const cap = Math.max(
            initialMs,
            Math.min(Math.max(maxMs, initialMs), initialMs * 2 ** (attempt - 1)),
          );
          return Number.isFinite(d) && d >= initialMs && d <= cap;
        },
      ),
    ),
  );
});
