// How a bucket's global budget is divided, as pure functions of the numbers (no I/O, no clock), so the
// rules in docs/rlqs.md can be read here line by line:
// - the budget is the rule's rate (requests_per_unit / unit; the lowest of several rate_limits);
// - a pod's part of it is its Envoys' demand over the fleet's (fleet.ts); its Envoys share that part in
//   proportion to their smoothed demand, a new subscriber weighing at least the average of the others;
// - a share becomes a token bucket refilled at exactly the share's rate.
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
  /** False until the subscriber's second demand sample: one sample may be a partial interval's. */
  readonly established: boolean;
  /** At least one demand sample. */
  readonly sampled: boolean;
}

/**
 * Splits `total` among subscribers: weight = demand, a subscriber not yet established at least the mean
 * of the established ones (of the sampled ones while none is established), every weight at least MIN_WEIGHT_FRACTION of the mean. The shares sum to
 * `total` (equal shares when every weight is 0). Writes into `out` (one per subscriber).
 */
export function divide(total: number, subs: readonly Demand[], out: number[]): void {
  const n = subs.length;
  out.length = n;
  if (n === 0) return;
  // The newcomers' reference: the mean demand of the established subscribers, else of those sampled once.
  let estSum = 0;
  let estCount = 0;
  let sampledSum = 0;
  let sampledCount = 0;
  for (const s of subs) {
    if (s.established) {
      estSum += s.demand;
      estCount++;
    }
    if (s.sampled) {
      sampledSum += s.demand;
      sampledCount++;
    }
  }
  const estMean = estCount > 0 ? estSum / estCount : sampledCount > 0 ? sampledSum / sampledCount : 0;
  let sum = 0;
  for (let i = 0; i < n; i++) {
    const s = subs[i]!;
    const w = s.established ? s.demand : Math.max(s.demand, estMean);
    out[i] = w;
    sum += w;
  }
  const floor = (MIN_WEIGHT_FRACTION * sum) / n;
  sum = 0;
  for (let i = 0; i < n; i++) {
    out[i] = Math.max(out[i]!, floor);
    sum += out[i]!;
  }
  for (let i = 0; i < n; i++) out[i] = sum > 0 ? (total * out[i]!) / sum : total / n;
}

/** A pod's fraction of the budget: its demand now over the others' (last fleet window) plus its own. */
export function podFraction(
  myDemand: number,
  othersDemand: number | undefined,
  expectedPods: number,
): number {
  if (othersDemand === undefined) return 1 / expectedPods;
  const all = othersDemand + myDemand;
  if (all <= 0) return 1 / expectedPods;
  return myDemand / all;
}

/** Longest fill interval of an assignment (a share below one request per hour is refilled hourly). */
const MAX_FILL_SECONDS = 3600;

/**
 * The token bucket of a share: tokens_per_fill = ceil(rate) (at least 1), fill_interval = that / rate,
 * so the refill rate is the share exactly; max_tokens is one fill, or the share of the rule's burst for
 * a token_bucket rule when that is larger.
 */
export function strategyFor(budget: Budget, share: number): WireRateLimitStrategy {
  if (budget.kind === 'allow') return { blanketRule: 'ALLOW_ALL' };
  if (budget.kind === 'deny' || share <= 0) return { blanketRule: 'DENY_ALL' };
  const perFill = Math.max(1, Math.ceil(share - 1e-9));
  const fillSeconds = Math.min(perFill / share, MAX_FILL_SECONDS);
  const burstShare = budget.burst > 0 ? Math.round((budget.burst * share) / budget.perSecond) : 0;
  const nanos = Math.round(fillSeconds * 1e9);
  return {
    tokenBucket: {
      maxTokens: Math.max(perFill, burstShare),
      tokensPerFill: { value: perFill },
      fillInterval: { seconds: Math.floor(nanos / 1e9), nanos: nanos % 1e9 },
    },
  };
}

/** Whether a new share differs from the last one sent by more than `thresholdPercent`. */
export function movedBeyond(previous: number, next: number, thresholdPercent: number): boolean {
  if (previous === next) return false;
  if (previous <= 0 || next <= 0) return true;
  return (Math.abs(next - previous) / previous) * 100 > thresholdPercent;
}
