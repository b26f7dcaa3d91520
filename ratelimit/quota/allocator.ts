// How a bucket's global budget is divided, as pure functions of the numbers (no I/O, no clock), so the
// rules in docs/rlqs.md can be read here line by line:
// - the budget is the rule's rate (requests_per_unit / unit; the lowest of several rate_limits);
// - a pod's part of it comes from a fleet window every pod reads (fleet.ts): an equal part for a pod
//   without a demand sample, the rest by demand, so the parts add up to at most the budget; its Envoys
//   share that part in proportion to their demand, a new subscriber weighing the average of the others;
// - shares are rounded to whole tokens per second that add up to the pod's part (Envoy reads fill
//   intervals in whole seconds), and a token bucket with a small max_tokens (Envoy starts a changed
//   bucket full).
import type { RateLimitRule } from '../config/index.js';
import type { WireRateLimitStrategy } from '../../proto/index.js';

/** Every subscriber weighs at least this fraction of the average weight (an idle Envoy keeps a trickle). */
export const MIN_WEIGHT_FRACTION = 0.01;

/** What a rule asks of its buckets: a rate to divide, or a blanket answer. */
export type Budget =
  { kind: 'allow' } | { kind: 'deny' } | { kind: 'rate'; perSecond: number; burst: number };

/** The rule's global budget; no rule (an unknown bucket), unlimited or shadow_mode: allow all. */
export function budgetOf(rule: RateLimitRule | undefined): Budget {
  if (rule === undefined || rule.unlimited || rule.shadowMode || rule.limits.length === 0)
    return { kind: 'allow' };
  let perSecond = Infinity;
  let burst = 0;
  for (const l of rule.limits) {
    const r = l.requestsPerUnit / l.unitSeconds;
    if (r < perSecond) {
      perSecond = r;
      burst = l.algorithm === 'token_bucket' ? l.burst : 0;
    }
  }
  return perSecond <= 0 ? { kind: 'deny' } : { kind: 'rate', perSecond, burst };
}

export interface Demand {
  /** Smoothed requests per second (allowed + denied over time elapsed). */
  readonly demand: number;
  /** False while the subscriber has no demand sample the server trusts (server.ts: its first one, a rate
   *  over at least a quarter of the reporting interval). */
  readonly established: boolean;
  /** At least one demand sample. */
  readonly sampled: boolean;
}

/**
 * Splits `total` among subscribers. Weight = demand capped at `cap` (the bucket's budget: nobody can use
 * more, so a report of absurd numbers weighs as one Envoy wanting the whole budget); a subscriber not yet
 * established weighs at least the mean of the established ones (of the sampled ones while none is
 * established); every weight at least MIN_WEIGHT_FRACTION of the mean.
 * - When the weights add up to `total` or less, each gets `total` in proportion to its weight (at least
 *   its weight: the spare room is spread).
 * - Otherwise the division is max-min fair: every subscriber gets min(weight, L), the level L chosen so
 *   that the shares add up to `total`. No weight, however large, takes anything from a subscriber below
 *   the level, so each gets at least min(its weight, total / subscribers).
 * The shares sum to `total` (equal shares when every weight is 0). Writes into `out` (one per subscriber).
 */
export function divide(total: number, subs: readonly Demand[], out: number[], cap = Infinity): void {
  const n = subs.length;
  out.length = n;
  if (n === 0) return;
  // The newcomers' reference: the mean demand of the established subscribers, else of those sampled once.
  let estSum = 0;
  let estCount = 0;
  let sampledSum = 0;
  let sampledCount = 0;
  for (const s of subs) {
    const d = Math.min(cap, s.demand);
    if (s.established) {
      estSum += d;
      estCount++;
    }
    if (s.sampled) {
      sampledSum += d;
      sampledCount++;
    }
  }
  const estMean = estCount > 0 ? estSum / estCount : sampledCount > 0 ? sampledSum / sampledCount : 0;
  let sum = 0;
  for (let i = 0; i < n; i++) {
    const s = subs[i]!;
    const d = Math.min(cap, s.demand);
    const w = s.established ? d : Math.max(d, estMean);
    out[i] = w;
    sum += w;
  }
  const floor = (MIN_WEIGHT_FRACTION * sum) / n;
  sum = 0;
  for (let i = 0; i < n; i++) {
    out[i] = Math.max(out[i]!, floor);
    sum += out[i]!;
  }
  if (sum <= total) {
    for (let i = 0; i < n; i++) out[i] = sum > 0 ? (total * out[i]!) / sum : total / n;
    return;
  }
  maxMinFill(total, out);
}

/** Replaces the weights in `w` by their max-min fair shares of `total` (their sum is above `total`). */
function maxMinFill(total: number, w: number[]): void {
  const n = w.length;
  const order = Array.from({ length: n }, (_, i) => i).sort((a, b) => w[a]! - w[b]!);
  let left = total;
  let k = 0;
  // Weights below the level are given whole; the level is what is left over the subscribers above it.
  while (k < n && w[order[k]!]! * (n - k) <= left) {
    left -= w[order[k]!]!;
    k++;
  }
  const level = k < n ? left / (n - k) : 0;
  for (let j = k; j < n; j++) w[order[j]!] = level;
}

/**
 * What a pod adds to the fleet as its "guaranteed" demand: the sum over its subscribers of
 * min(demand, `level`), where `level` is the budget over the fleet's subscribers. Every pod receives at
 * least that much of the budget when the fleet wants more than it (podFraction), so every subscriber
 * keeps at least min(its demand, budget / subscribers in the fleet), whatever another one reports.
 */
export function guaranteedDemand(demands: readonly number[], level: number): number {
  let g = 0;
  for (const d of demands) g += Math.min(d, level);
  return g;
}

/**
 * What a pod read of one bucket in a fleet window (fleet.ts): every pod that served the bucket then
 * added its demand and marked itself present, so every pod reading the same window sees the same numbers.
 */
export interface FleetView {
  /** Requests per second added to the window by the pods that had a demand sample. */
  readonly demand: number;
  /** Of that, the guaranteed demand (guaranteedDemand) those pods added. */
  readonly guaranteed: number;
  /** Subscribers the pods present counted (their Envoys, per stream). */
  readonly subscribers: number;
  /** Pods that marked themselves present in the window. */
  readonly pods: number;
  /** Of those, pods that had no demand sample yet (their Envoys only subscribed). */
  readonly unsampled: number;
  /** This pod in that window: what it added (requests per second), 'unsampled', or 'absent'. */
  readonly mine: number | 'unsampled' | 'absent';
  /** The guaranteed demand this pod added (0 unless `mine` is a number). */
  readonly mineGuaranteed: number;
}

/**
 * A pod's fraction of the budget (`budget` requests per second) from the window it read. Every pod
 * reading the same window gets parts that add up to at most 1, however the set of pods changes:
 * - a pod present without a demand sample (new to the bucket) gets an equal part, 1 / pods;
 * - the pods with a sample share the rest, `avail` = budget × (pods - unsampled) / pods: in proportion to
 *   their demand while the fleet's demand fits in it (each gets at least its demand); when the fleet
 *   wants more, each first gets its guaranteed demand, and what is left goes in proportion to the demand
 *   above that (so no pod gets more than its Envoys want, and no report takes another pod's guarantee);
 * - a pod absent from the window (it began serving the bucket after adding was over) gets nothing: the
 *   others did not make room for it; it is counted from the next window on.
 * Fleet unknown (no window read, the store failing, or an empty window): 1 / `expectedPods`.
 */
export function podFraction(view: FleetView | undefined, expectedPods: number, budget = Infinity): number {
  if (view === undefined || view.pods <= 0) return 1 / expectedPods;
  const { pods, unsampled, mine } = view;
  if (mine === 'absent') return 0;
  if (mine === 'unsampled') return 1 / pods;
  const sampledPart = Math.max(0, pods - unsampled) / pods;
  const demand = view.demand;
  if (demand <= 0) return pods > unsampled ? sampledPart / (pods - unsampled) : 0;
  const d = Math.min(Math.max(0, mine), demand);
  const avail = budget * sampledPart;
  if (demand <= avail || !(budget > 0)) return (sampledPart * d) / demand;
  const total = Math.min(view.guaranteed, demand);
  const g = Math.min(Math.max(0, view.mineGuaranteed), d, total);
  if (total >= avail) return total > 0 ? (sampledPart * g) / total : 0;
  return (g + ((avail - total) * (d - g)) / (demand - total)) / budget;
}

/** Longest fill interval of an assignment (a share below one request per hour is refilled hourly). */
const MAX_FILL_SECONDS = 3600;

/**
 * max_tokens of an assignment: a tenth of its tokens per second, at least MIN_MAX_TOKENS. Envoy starts
 * every changed token bucket full, so each change hands out max_tokens at once on top of the rate; a
 * tenth of a second's share keeps that gift small (docs/decisions/007-hot-path-shapes.md has what a
 * larger one cost). A load above the share empties the bucket whatever its size; one below it is
 * refused only in bursts larger than max_tokens.
 */
export const MAX_TOKENS_FRACTION = 0.1;
/** With 1, the tokens that accrue between two requests overflow and are lost: 10 tokens per second
 *  against 15 requests per second admitted 7.5. */
export const MIN_MAX_TOKENS = 2;

/**
 * Whole tokens per second for each share, summing to floor(sum of shares) (largest remainder). `held`
 * is what each subscriber was last given (-1: nothing): one holding the rounded-up value keeps it unless
 * another's remainder is larger by more than a half, so near-equal shares do not trade the extra token
 * back and forth (each trade would be a new bucket in Envoy). Writes into `out`.
 */
export function wholeShares(shares: readonly number[], held: readonly number[], out: number[]): void {
  const n = shares.length;
  out.length = n;
  let sum = 0;
  let floors = 0;
  for (let i = 0; i < n; i++) {
    const x = Math.max(0, shares[i]!);
    sum += x;
    out[i] = Math.floor(x + 1e-9);
    floors += out[i]!;
  }
  let extra = Math.floor(sum + 1e-6) - floors;
  if (extra <= 0) return;
  const order: number[] = [];
  const rank: number[] = [];
  for (let i = 0; i < n; i++) {
    order.push(i);
    const r = Math.max(0, shares[i]!) - out[i]!;
    rank.push(r + (held[i] === out[i]! + 1 ? 0.5 : 0));
  }
  order.sort((a, b) => rank[b]! - rank[a]! || a - b);
  for (let j = 0; j < n && extra > 0; j++, extra--) out[order[j]!]!++;
}

/**
 * The token bucket of a share given `tokens` whole tokens per second (wholeShares). Envoy reads
 * fill_interval in whole seconds, so it is always whole: `tokens` every second, or, for a share below
 * one per second (tokens 0), one token every ceil(1 / share) seconds. max_tokens is MAX_TOKENS_FRACTION
 * of a second's tokens (at least 1), or the share of the rule's burst for a token_bucket rule when that
 * is larger. The same `tokens` and share always give the same bucket, which Envoy keeps when resent.
 */
export function strategyFor(budget: Budget, tokens: number, share: number): WireRateLimitStrategy {
  if (budget.kind === 'allow') return { blanketRule: 'ALLOW_ALL' };
  if (budget.kind === 'deny' || share <= 0) return { blanketRule: 'DENY_ALL' };
  const burstShare = budget.burst > 0 ? Math.round((budget.burst * share) / budget.perSecond) : 0;
  if (tokens >= 1) {
    return {
      tokenBucket: {
        maxTokens: Math.max(MIN_MAX_TOKENS, Math.ceil(tokens * MAX_TOKENS_FRACTION - 1e-9), burstShare),
        tokensPerFill: { value: tokens },
        fillInterval: { seconds: 1, nanos: 0 },
      },
    };
  }
  const seconds = Math.min(MAX_FILL_SECONDS, Math.max(1, Math.ceil(1 / share - 1e-9)));
  return {
    tokenBucket: {
      maxTokens: Math.max(1, burstShare),
      tokensPerFill: { value: 1 },
      fillInterval: { seconds, nanos: 0 },
    },
  };
}

/**
 * Whether whole tokens per second `next` differ from those sent (`previous`) by more than
 * `thresholdPercent` of them (any change for a share that had none, or that gets none now).
 */
export function movedBeyond(previous: number, next: number, thresholdPercent: number): boolean {
  if (previous === next) return false;
  if (previous <= 0 || next <= 0) return true;
  return (Math.abs(next - previous) / previous) * 100 > thresholdPercent;
}
