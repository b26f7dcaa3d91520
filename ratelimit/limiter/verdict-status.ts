// Turns a store verdict for one descriptor (counting/algorithms.ts) into its status and rule statistics.
// The reported limit is the one that rejected the hit, or when admitted the one with the least
// remaining: what X-RateLimit-* headers should show. Admission is all or nothing per hit, so unlike
// fixed windows a hit is either within_limit or over_limit, never split between them.
import type { LimitMatch, LimitSpec } from '../config/index.js';
import type { WireDescriptorStatus, WireRateLimit } from '../../proto/index.js';
import type { StatsStore } from '../stats/index.js';
import type { LimitVerdict } from '../counting/index.js';
import { limitCapacity, moreMsAt } from '../counting/index.js';

export class VerdictStatuses {
  private readonly wireLimits = new WeakMap<LimitSpec, WireRateLimit>();
  /** The reverse of wireLimits: which limit a status reports (named limits). */
  private readonly specs = new WeakMap<WireRateLimit, LimitSpec>();
  /** Per status made here: the verdict's ms until its limit has more quota (named limits' RateLimit t). */
  private readonly moreMs = new WeakMap<WireDescriptorStatus, number>();

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
      this.specs.set(w, l);
    }
    return w;
  }

  /** The limit a status of this class reports, or undefined for another status. */
  specOf(w: WireRateLimit): LimitSpec | undefined {
    return this.specs.get(w);
  }

  /** The ms until more quota of a status made here (0: nothing to wait for); undefined for another status. */
  moreMsOf(s: WireDescriptorStatus): number | undefined {
    return this.moreMs.get(s);
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
    this.moreMs.set(status, verdict[moreMsAt(limits.length, at)]!);
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
    this.moreMs.set(status, verdict[moreMsAt(limits.length, at)]!);
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
