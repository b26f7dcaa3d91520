// Phase `token-budget` (standalone): N concurrent LLM-like streams against ONE token budget (B tokens per
// 1 s window) on the built service and a real redis-server, three ways of admitting them:
//
// - check-then-report: the request is checked with hits_addend 0 (consumes nothing), admitted unless the
//   budget is already spent; the tokens used are reported as hits when the stream ends (Envoy's
//   `apply_on_stream_done`);
// - reserve-then-settle: the request carries its estimate as hits_addend (admitted only if it fits, and
//   then held); when the stream ends the difference is sent: `is_negative_hits` for less, hits for more;
//   a refused reservation on a fixed window is settled like a stream that used nothing (a fixed window
//   counts refused hits), on a sliding window it is not (a refused hit is not counted there);
// - exact: a single-threaded model in this process that admits in arrival order iff used + actual ≤ B,
//   knowing each stream's actual cost up front (no service call).
//
// Every stream loops: draw a request (estimate = max_tokens uniform in [ESTIMATE_MIN, ESTIMATE_MAX],
// actual = ceil(estimate × uniform[0.2, 1.0]), from a per-stream seeded PRNG), ask, and if admitted stream
// for a uniform [STREAM_MS_MIN, STREAM_MS_MAX] ms, then settle (not awaited, as Envoy's stream-done call is
// fire-and-forget) and ask again; if refused, back off a uniform [BACKOFF_MS_MIN, BACKOFF_MS_MAX] ms.
// Admitted tokens (the actual costs of admitted streams) are counted per wall-clock second, by the window
// the decision fell in (the midpoint of the call). Per cell: admitted ÷ B, median and worst of the
// measured windows, the worst window's overshoot in tokens, the p99 decision latency (the admission call
// only). The table goes to <out>/token-budget.md (docs/token-budgets.md has the current one).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { makeTempDir, removeTempDir } from '../../harness/net.js';
import { startRedis } from '../../harness/redis/index.js';
import { startPods } from '../../harness/rlqs/index.js';
import { RlsClient } from '../../harness/system.js';
import type { WireDescriptor, WireRateLimitRequest } from '../../proto/index.js';
import { rng } from '../load/workloads.js';
import { BUDGET_ALGORITHMS, type BudgetAlgorithm } from '../options.js';
import type { Phase } from './phase.js';

export const BUDGET_DOMAIN = 'token-budget';
/** B: tokens per 1 s window. */
export const BUDGET_TOKENS = 5_000;
export const WINDOW_MS = 1000;
export const ESTIMATE_MIN = 100;
export const ESTIMATE_MAX = 1000;
export const ACTUAL_SHARE_MIN = 0.2;
export const STREAM_MS_MIN = 20;
export const STREAM_MS_MAX = 100;
export const BACKOFF_MS_MIN = 500;
export const BACKOFF_MS_MAX = 1500;
/** The largest estimate error one request can have (estimate − actual): the goal's tolerance. */
export const MAX_ESTIMATE_ERROR = ESTIMATE_MAX - Math.ceil(ESTIMATE_MAX * ACTUAL_SHARE_MIN);
/** HTTP/2 connections the streams' calls are spread over (Envoy keeps a few per rate limit cluster). */
const CONNECTIONS = 2;

export const STRATEGIES = ['check-then-report', 'reserve-then-settle', 'exact'] as const;
export type BudgetStrategy = (typeof STRATEGIES)[number];

export interface TokenBudgetCell {
  algorithm: BudgetAlgorithm;
  streams: number;
  strategy: BudgetStrategy;
  /** Admitted tokens in each measured window (each decision in the window of its call's midpoint). */
  windows: number[];
  /** The same, counting only decisions whose call began and ended in that window (a lower bound). */
  certain: number[];
  /** Tokens that refunds returned to each window for decisions of an earlier window (by midpoints). */
  carried: number[];
  /** An upper bound of the same: a refund counted in every window its call may have been applied in. */
  carriedUpper: number[];
  /** Admitted tokens ÷ B: median and worst (highest) window. */
  median: number;
  max: number;
  /** Tokens above B in the worst window (0 when none went over). */
  overshoot: number;
  /** `carried` of the worst window, and the part of it that refunded refused reservations. */
  carriedIntoWorst: number;
  carriedRefusedIntoWorst: number;
  /** p99 of the admission call, ms (null for the in-process exact model). */
  p99Ms: number | null;
  decisions: number;
  admitted: number;
  /** Admission calls that failed (counted as refused). */
  errors: number;
  /** Admitted calls whose send and answer fell in different windows (attributed by their midpoint). */
  straddling: number;
}

export interface TokenBudgetResult {
  budget: number;
  windowMs: number;
  estimate: [number, number];
  actualShareMin: number;
  streamMs: [number, number];
  backoffMs: [number, number];
  maxEstimateError: number;
  warmupWindows: number;
  cells: TokenBudgetCell[];
}

export interface TokenBudgetOptions {
  streams: number[];
  algorithms: readonly BudgetAlgorithm[];
  /** Measured windows per cell (after one warm-up window). */
  windows: number;
  seed?: number;
  log: (msg: string) => void;
}

/** The service config: one rule per algorithm, B tokens per second. */
export function budgetConfig(budget = BUDGET_TOKENS): string {
  const lines = [`domain: ${BUDGET_DOMAIN}`, 'descriptors:'];
  for (const a of BUDGET_ALGORITHMS)
    lines.push(
      '  - key: budget',
      `    value: ${a}`,
      `    rate_limit: { unit: second, requests_per_unit: ${budget}, algorithm: ${a} }`,
    );
  return lines.join('\n') + '\n';
}

function call(client: RlsClient, algorithm: BudgetAlgorithm, hits: number, refund = false): Promise<boolean> {
  const d: WireDescriptor = { entries: [{ key: 'budget', value: algorithm }], hitsAddend: { value: hits } };
  if (refund) d.isNegativeHits = true;
  const req: WireRateLimitRequest = { domain: BUDGET_DOMAIN, descriptors: [d] };
  return client.call(req, 5000).then((r) => r.overallCode !== 'OVER_LIMIT');
}

interface Admission {
  /** Whether the request may start; rejects when the call failed. */
  admit(estimate: number, actual: number, now: number): Promise<boolean> | boolean;
  /** At stream end (admitted) or at once (refused): what the gateway sends then, if anything, and the
   *  tokens it returns to the budget (0 for hits). */
  settle(
    estimate: number,
    actual: number,
    admitted: boolean,
  ): { sent: Promise<unknown>; refund: number } | undefined;
}

function admission(
  strategy: BudgetStrategy,
  algorithm: BudgetAlgorithm,
  client: RlsClient,
  budget: number,
  used: Map<number, number>,
): Admission {
  switch (strategy) {
    case 'check-then-report':
      return {
        admit: () => call(client, algorithm, 0),
        settle: (_e, actual, admitted) =>
          admitted ? { sent: call(client, algorithm, actual), refund: 0 } : undefined,
      };
    case 'reserve-then-settle':
      return {
        admit: (estimate) => call(client, algorithm, estimate),
        settle: (estimate, actual, admitted) => {
          if (!admitted)
            return algorithm === 'fixed_window'
              ? { sent: call(client, algorithm, estimate, true), refund: estimate }
              : undefined;
          if (actual === estimate) return undefined;
          return actual < estimate
            ? { sent: call(client, algorithm, estimate - actual, true), refund: estimate - actual }
            : { sent: call(client, algorithm, actual - estimate), refund: 0 };
        },
      };
    case 'exact':
      return {
        admit: (_e, actual, now) => {
          const w = Math.floor(now / WINDOW_MS);
          const u = used.get(w) ?? 0;
          if (u + actual > budget) return false;
          used.set(w, u + actual);
          return true;
        },
        settle: () => undefined,
      };
  }
}

function quantile(sorted: number[], q: number): number {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  if (!s.length) return NaN;
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

const windowOf = (t: number) => Math.floor(t / WINDOW_MS);

/** One cell: `streams` concurrent streams against the rule of `algorithm`, admitted by `strategy`. */
async function runCell(
  clients: RlsClient[],
  algorithm: BudgetAlgorithm,
  strategy: BudgetStrategy,
  streams: number,
  windows: number,
  budget: number,
  seed: number,
  warmupWindows: number,
): Promise<TokenBudgetCell> {
  // Start just after a window boundary; the first window(s) are warm-up (streams starting at once).
  const now0 = Date.now();
  const first = Math.ceil(now0 / WINDOW_MS) * WINDOW_MS;
  await sleep(first - now0 + 5);
  const from = windowOf(first) + warmupWindows;
  const end = (from + windows) * WINDOW_MS;
  const admitted = new Array<number>(windows).fill(0);
  const certain = new Array<number>(windows).fill(0);
  const carried = new Array<number>(windows).fill(0);
  const carriedUpper = new Array<number>(windows).fill(0);
  const carriedRefused = new Array<number>(windows).fill(0);
  const add = (arr: number[], w: number, x: number) => {
    if (w >= from && w < from + windows) arr[w - from]! += x;
  };
  const used = new Map<number, number>();
  const latencies: number[] = [];
  const pending = new Set<Promise<unknown>>();
  let decisions = 0;
  let admittedCount = 0;
  let errors = 0;
  let straddling = 0;
  const runStream = async (i: number) => {
    const r = rng(seed * 100_003 + i);
    const adm = admission(strategy, algorithm, clients[i % clients.length]!, budget, used);
    // Spread the streams' first requests over the first half of the warm-up.
    await sleep(r() * WINDOW_MS * warmupWindows * 0.5);
    while (Date.now() < end) {
      const estimate = ESTIMATE_MIN + Math.floor(r() * (ESTIMATE_MAX - ESTIMATE_MIN + 1));
      const actual = Math.max(1, Math.ceil(estimate * (ACTUAL_SHARE_MIN + (1 - ACTUAL_SHARE_MIN) * r())));
      const streamMs = STREAM_MS_MIN + r() * (STREAM_MS_MAX - STREAM_MS_MIN);
      const backoffMs = BACKOFF_MS_MIN + r() * (BACKOFF_MS_MAX - BACKOFF_MS_MIN);
      const t0 = Date.now();
      const p0 = performance.now();
      let ok: boolean;
      try {
        ok = await adm.admit(estimate, actual, t0);
      } catch {
        ok = false;
        errors++;
      }
      const p1 = performance.now();
      const t1 = Date.now();
      if (strategy !== 'exact') latencies.push(p1 - p0);
      decisions++;
      // The service decided somewhere in [t0, t1]: attributed to the midpoint's window, and counted as
      // certain only when both ends are in one window.
      const wMid = windowOf((t0 + t1) / 2);
      if (ok) {
        admittedCount++;
        add(admitted, wMid, actual);
        if (windowOf(t0) === windowOf(t1)) add(certain, wMid, actual);
        else straddling++;
        await sleep(streamMs);
      }
      const settle = adm.settle(estimate, actual, ok);
      if (settle) {
        const s0 = Date.now();
        const q: Promise<unknown> = settle.sent
          .then(() => {
            // A refund applied in a later window than its own decision returns budget to that window.
            if (!settle.refund) return;
            const s1 = Date.now();
            if (windowOf((s0 + s1) / 2) > wMid) {
              add(carried, windowOf((s0 + s1) / 2), settle.refund);
              if (!ok) add(carriedRefused, windowOf((s0 + s1) / 2), settle.refund);
            }
            for (let w = Math.max(windowOf(s0), windowOf(t0) + 1); w <= windowOf(s1); w++)
              add(carriedUpper, w, settle.refund);
          })
          .catch(() => undefined)
          .finally(() => pending.delete(q));
        pending.add(q);
      }
      if (!ok) await sleep(backoffMs);
    }
  };
  await Promise.all(Array.from({ length: streams }, (_, i) => runStream(i)));
  while (pending.size) await Promise.all([...pending]);
  const worstAt = admitted.indexOf(Math.max(...admitted));
  latencies.sort((a, b) => a - b);
  return {
    algorithm,
    streams,
    strategy,
    windows: admitted,
    certain,
    carried,
    carriedUpper,
    median: median(admitted) / budget,
    max: admitted[worstAt]! / budget,
    overshoot: Math.max(0, admitted[worstAt]! - budget),
    carriedIntoWorst: carried[worstAt]!,
    carriedRefusedIntoWorst: carriedRefused[worstAt]!,
    p99Ms: strategy === 'exact' ? null : quantile(latencies, 0.99),
    decisions,
    admitted: admittedCount,
    errors,
    straddling,
  };
}

/** Runs every (algorithm, N, strategy) cell against one service process and one Redis it starts. */
export async function runTokenBudget(o: TokenBudgetOptions): Promise<TokenBudgetResult> {
  const warmupWindows = 1;
  const result: TokenBudgetResult = {
    budget: BUDGET_TOKENS,
    windowMs: WINDOW_MS,
    estimate: [ESTIMATE_MIN, ESTIMATE_MAX],
    actualShareMin: ACTUAL_SHARE_MIN,
    streamMs: [STREAM_MS_MIN, STREAM_MS_MAX],
    backoffMs: [BACKOFF_MS_MIN, BACKOFF_MS_MAX],
    maxEstimateError: MAX_ESTIMATE_ERROR,
    warmupWindows,
    cells: [],
  };
  const redis = await startRedis({ args: ['--save', '', '--appendonly', 'no'] });
  const flush = redis.client();
  const root = makeTempDir('bench-token-budget');
  try {
    const pods = await startPods({ count: 1, redisUrl: redis.url, configYaml: budgetConfig(), root });
    const clients = Array.from({ length: CONNECTIONS }, () => new RlsClient(pods.targets[0]!));
    try {
      await Promise.all(clients.map((c) => c.connect()));
      // The rules must be loaded and counting: B + 1 hits are refused on each.
      for (const a of o.algorithms) {
        if (await call(clients[0]!, a, BUDGET_TOKENS + 1))
          throw new Error(`${a}: the budget rule is not applied`);
      }
      let seed = o.seed ?? 1;
      for (const algorithm of o.algorithms)
        for (const n of o.streams) {
          // Alternate the order of the strategies between cells, so none always runs first.
          const order = seed % 2 ? [...STRATEGIES] : [...STRATEGIES].reverse();
          for (const strategy of order) {
            await flush.flushall();
            const cell = await runCell(
              clients,
              algorithm,
              strategy,
              n,
              o.windows,
              BUDGET_TOKENS,
              seed,
              warmupWindows,
            );
            result.cells.push(cell);
            o.log(
              `token-budget: ${algorithm} N=${n} ${strategy}: median ${pct(cell.median)} max ${pct(cell.max)} ` +
                `overshoot ${cell.overshoot} carried ${cell.carriedIntoWorst} (refused ${cell.carriedRefusedIntoWorst}) p99 ${cell.p99Ms?.toFixed(1) ?? '–'} ms ` +
                `(${cell.decisions} decisions, ${cell.errors} failed, ${cell.straddling} straddling)`,
            );
          }
          seed++;
        }
    } finally {
      for (const c of clients) c.close();
      await pods.stop();
    }
  } finally {
    flush.disconnect();
    await redis.stop();
    removeTempDir(root);
  }
  return result;
}

const pct = (x: number) => (Number.isNaN(x) ? '–' : `${(x * 100).toFixed(1)} %`);

const carriedCell = (c: TokenBudgetCell) =>
  c.carriedRefusedIntoWorst
    ? `${c.carriedIntoWorst} (${c.carriedRefusedIntoWorst} of refused reservations)`
    : String(c.carriedIntoWorst);

/** The markdown table of a result. */
export function tokenBudgetTable(r: TokenBudgetResult): string {
  const lines = [
    '| algorithm | streams | strategy | admitted ÷ budget, median window | worst window | overshoot (tokens) | refunds from the previous window into the worst (tokens) | p99 decision |',
    '|---|---|---|---|---|---|---|---|',
  ];
  for (const c of r.cells) {
    const failed = c.errors ? ` (${c.errors} calls failed)` : '';
    const p99 = c.p99Ms === null ? 'in process' : `${c.p99Ms.toFixed(1)} ms`;
    lines.push(
      `| ${c.algorithm} | ${c.streams} | ${c.strategy} | ${pct(c.median)}${failed} | ${pct(c.max)} | ${c.overshoot} | ${c.strategy === 'reserve-then-settle' ? carriedCell(c) : ''} | ${p99} |`,
    );
  }
  return lines.join('\n');
}

export const tokenBudgetPhase: Phase = {
  name: 'token-budget',
  needs: 'standalone',
  run: async (ctx) => {
    try {
      const r = await runTokenBudget({
        streams: ctx.o.budget.streams,
        algorithms: ctx.o.budget.algorithms,
        windows: ctx.o.budget.windows,
        log: ctx.log,
      });
      ctx.results.extra['token-budget'] = r;
      const md = [
        `Budget ${r.budget} tokens per ${r.windowMs / 1000} s window; estimate (max_tokens) uniform in ` +
          `[${r.estimate[0]}, ${r.estimate[1]}], actual uniform in [${r.actualShareMin}, 1] × the estimate ` +
          `(largest estimate error ${r.maxEstimateError}); streams last ${r.streamMs[0]}–${r.streamMs[1]} ms, ` +
          `a refused stream retries after ${r.backoffMs[0]}–${r.backoffMs[1]} ms.`,
        '',
        tokenBudgetTable(r),
        '',
      ].join('\n');
      writeFileSync(join(ctx.o.outDir, 'token-budget.md'), md);
      ctx.log(`token-budget table written to ${join(ctx.o.outDir, 'token-budget.md')}`);
    } catch (err) {
      ctx.log(`token-budget failed: ${(err as Error).message}`);
    }
  },
};
