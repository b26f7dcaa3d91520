// Turns a store verdict for one descriptor (counting/algorithms.ts) into its status and rule statistics.
// The reported limit is the one that rejected the hit, or when admitted the one with the least
// remaining: what X-RateLimit-* headers should show. Admission is all or nothing per hit, so unlike
// fixed windows a hit is either within_limit or over_limit, never split between them.
import type { LimitMatch, LimitSpec } from '../config/index.js';
import type { WireDescriptorStatus, WireRateLimit } from '../../proto/index.js';
import type { StatsStore } from '../stats/index.js';
import type { LimitVerdict } from '../counting/index.js';
import { limitCapacity, moreMsAt } from '../counting/index.js';

/** The reverse of each VerdictStatuses' wire limits: which limit a status reports (named limits). */
const specs = new WeakMap<WireRateLimit, LimitSpec>();
/** Per status made by a VerdictStatuses: the verdict's ms until its limit has more quota (RateLimit t). */
const moreMs = new WeakMap<WireDescriptorStatus, number>();

/** The limit a status of a VerdictStatuses reports, or undefined for another status. */
export function specOf(w: WireRateLimit): LimitSpec | undefined {
  return specs.get(w);
}

/**
 * For a status of a rule the limit script decided: ms until the reported limit has more quota than
 * the status's remaining with no other hit (0: nothing to wait for). Undefined for other statuses
 * (a reference fixed window, a failure mode, the local over-limit cache).
 */
export function moreQuotaMsOf(status: WireDescriptorStatus): number | undefined {
  return moreMs.get(status);
}

export class VerdictStatuses {
  private readonly wireLimits = new WeakMap<LimitSpec, WireRateLimit>();

  constructor(
    private readonly stats: StatsStore,
    /** Math.fround'ed NEAR_LIMIT_RATIO, as the fixed window uses it. */
    private readonly nearRatio: number,
  ) {}

  private wireLimit(m: LimitMatch, l: LimitSpec): WireRateLimit {
    let w = this.wireLimits.get(l);
    if (!w) {
      w = { requestsPerUnit: l.requestsPerUnit, unit: l.unit };
      // The single form keeps the rule's name (as fixed windows report it).
      if (m.rule.name && m.rule.limits.length === 1) w.name = m.rule.name;
      this.wireLimits.set(l, w);
      specs.set(w, l);
    }
    return w;
  }

  /**
   * A refund's status: OK, reporting the limit with the least remaining after the refund. A refund is
   * not a hit: no rule statistic but total_negative_hits (counted by the limiter) changes.
   */
  refundStatus(m: LimitMatch, verdict: LimitVerdict): WireDescriptorStatus {
    const limits = m.rule.limits;
    let at = 0;
    for (let i = 1; i < limits.length; i++) if (verdict[1 + 2 * i]! < verdict[1 + 2 * at]!) at = i;
    const status: WireDescriptorStatus = {
      code: 'OK',
      currentLimit: this.wireLimit(m, limits[at]!),
      limitRemaining: verdict[1 + 2 * at]!,
      durationUntilReset: { seconds: Math.ceil(verdict[2 + 2 * at]! / 1000) },
    };
    moreMs.set(status, verdict[moreMsAt(limits.length, at)]!);
    return status;
  }

  status(m: LimitMatch, verdict: LimitVerdict, hits: number): WireDescriptorStatus {
    const limits = m.rule.limits;
    const rs = this.stats.ruleStats(m.statKey);
    const rejectedBy = verdict[0]!;
    let at: number;
    if (rejectedBy > 0) {
      at = rejectedBy - 1;
    } else {
      at = 0;
      for (let i = 1; i < limits.length; i++) if (verdict[1 + 2 * i]! < verdict[1 + 2 * at]!) at = i;
    }
    const l = limits[at]!;
    const remaining = verdict[1 + 2 * at]!;
    const status: WireDescriptorStatus = {
      code: 'OK',
      currentLimit: this.wireLimit(m, l),
      limitRemaining: 0,
      durationUntilReset: { seconds: Math.ceil(verdict[2 + 2 * at]! / 1000) },
    };
    moreMs.set(status, verdict[moreMsAt(limits.length, at)]!);
    if (rejectedBy > 0) {
      status.code = 'OVER_LIMIT';
      rs.overLimit.inc(hits);
      if (m.rule.shadowMode) {
        status.code = 'OK';
        rs.shadowMode.inc(hits);
      }
      return status;
    }
    status.limitRemaining = remaining;
    const capacity = limitCapacity(l);
    const near = Math.floor(Math.fround(Math.fround(capacity) * this.nearRatio));
    const used = capacity - remaining;
    if (used > near) rs.nearLimit.inc(Math.min(hits, used - near));
    rs.withinLimit.inc(hits);
    return status;
  }
}
