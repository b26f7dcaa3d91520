// The benchmark's `token-budget` phase on a real Redis and the built service, tiny: 10 streams, two
// measured windows, on a fixed and a sliding window. Checks the figures' shape and what they rest on:
// every admission call answered, the exact model never over the budget, and reserve-then-settle never
// over it by more than the refunds that a later window received for earlier decisions (each window's
// tokens counted only from calls that began and ended in it, refunds counted in every window they may
// have been applied in, so the bound holds however slow the machine is). No speed is asserted.
import t from 'tap';
import {
  BUDGET_TOKENS,
  MAX_ESTIMATE_ERROR,
  STRATEGIES,
  runTokenBudget,
  tokenBudgetTable,
} from './token-budget.js';

t.test('the token-budget phase measures three strategies against one budget', async (t) => {
  const r = await runTokenBudget({
    streams: [10],
    algorithms: ['fixed_window', 'sliding_window'],
    windows: 2,
    log: (m) => t.comment(m),
  });
  t.equal(r.cells.length, 6, 'two algorithms × three strategies');
  t.equal(r.maxEstimateError, MAX_ESTIMATE_ERROR);
  for (const algorithm of ['fixed_window', 'sliding_window'] as const) {
    const cells = r.cells.filter((c) => c.algorithm === algorithm);
    t.same(cells.map((c) => c.strategy).sort(), [...STRATEGIES].sort(), `${algorithm}: every strategy`);
    for (const c of cells) {
      const name = `${algorithm} ${c.strategy}`;
      t.equal(c.windows.length, 2, `${name}: two measured windows`);
      t.ok(c.decisions > 0 && c.admitted > 0, `${name}: decisions made, some admitted`);
      t.equal(c.errors, 0, `${name}: every admission call answered`);
      t.ok(c.median > 0 && c.max >= c.median, `${name}: median ${c.median} ≤ worst ${c.max}`);
      t.equal(
        c.overshoot,
        Math.max(0, Math.round(c.max * BUDGET_TOKENS) - BUDGET_TOKENS),
        `${name}: overshoot`,
      );
      if (c.strategy === 'exact') {
        t.equal(c.p99Ms, null, `${name}: decided in process`);
        t.ok(c.max <= 1, `${name}: never over the budget`);
      } else t.ok(c.p99Ms! > 0, `${name}: p99 decision latency measured`);
      if (c.strategy === 'reserve-then-settle')
        for (const [k, tokens] of c.certain.entries())
          t.ok(
            tokens <= BUDGET_TOKENS + c.carriedUpper[k]!,
            `${name}: window ${k}: ${tokens} tokens ≤ B + ${c.carriedUpper[k]} carried into it`,
          );
    }
  }
  const table = tokenBudgetTable(r);
  t.equal(table.split('\n').length, 2 + 6, 'a header, a rule and a row per cell');
});
