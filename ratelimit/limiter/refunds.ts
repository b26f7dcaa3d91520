// A refund (is_negative_hits) returns its hits to the descriptor's limits, clamped to what they hold,
// and is always answered OK. It goes through the store's evaluate where the store has one (a rule with
// another algorithm by its own check, a fixed window as a one-limit check on the reference's key), and
// otherwise as a counter op with negative hits (memcache's decr). All of a request's refunds go in one
// store call, beside its other counts.
import type { LimitMatch } from '../config/index.js';
import type { WireDescriptorStatus } from '../../proto/index.js';
import {
  buildFixedWindowRefund,
  buildLimitCheck,
  CacheError,
  storeCall,
  taggedKeyBase,
  type CounterOp,
  type CounterStore,
  type LimitCheck,
  type LimitVerdict,
} from '../counting/index.js';
import type { FailureModes, FailureNotes } from './failure-mode.js';
import type { FixedWindows } from './fixed-window.js';
import type { VerdictStatuses } from './verdict-status.js';

/** Per refund: its verdict (evaluate), its count after the refund (an op), or its error. */
export type RefundResult = LimitVerdict | number | Error;

export class Refunds {
  constructor(
    private readonly store: CounterStore,
    private readonly windows: FixedWindows,
    private readonly verdicts: VerdictStatuses,
    private readonly failures: FailureModes,
    private readonly nowMs: () => number,
  ) {}

  /** The refunds (indexes into `matches`) sent, in one store call; settled per refund, never rejected. */
  send(
    domain: string,
    matches: readonly (LimitMatch | undefined)[],
    hits: readonly number[],
    refunds: readonly number[],
    now: number,
  ): Promise<RefundResult[]> {
    const store = this.store;
    const prefix = this.windows.prefix;
    if (store.evaluate !== undefined) {
      const nowMs = this.nowMs();
      const checks: LimitCheck[] = new Array(refunds.length);
      for (let j = 0; j < refunds.length; j++) {
        const i = refunds[j]!;
        const m = matches[i]!;
        const rule = m.rule;
        checks[j] = rule.scripted
          ? buildLimitCheck(taggedKeyBase(prefix, domain, m.keyEntries), rule, -hits[i]!, nowMs)
          : buildFixedWindowRefund(
              this.windows.key(domain, m, now),
              rule.requestsPerUnit,
              rule.unitSeconds,
              rule.unit === 'SECOND',
              hits[i]!,
              nowMs,
            );
      }
      return storeCall(() => store.evaluate!(checks)).then(
        (v) => v,
        (err: unknown) => checks.map(() => (err instanceof Error ? err : new Error(String(err)))),
      );
    }
    const ops: CounterOp[] = new Array(refunds.length);
    for (let j = 0; j < refunds.length; j++) {
      const i = refunds[j]!;
      const m = matches[i]!;
      if (m.rule.scripted) {
        // The service refuses such configurations for this store at load.
        return Promise.resolve(
          refunds.map(() => new CacheError('the counter store cannot evaluate this rate limit algorithm')),
        );
      }
      ops[j] = {
        key: this.windows.key(domain, m, now),
        hits: -hits[i]!,
        expireSeconds: m.rule.unitSeconds,
        perSecond: m.rule.unit === 'SECOND',
      };
    }
    return this.windows.count(ops);
  }

  /**
   * The refunds' statuses, written into `statuses`: always OK, with what remains after the refund. A
   * refund the store could not make is decided by the failure modes (FailureModes.decideRefund).
   */
  statuses(
    statuses: WireDescriptorStatus[],
    domain: string,
    matches: readonly (LimitMatch | undefined)[],
    refunds: readonly number[],
    results: readonly RefundResult[],
    now: number,
    notes: FailureNotes | undefined,
  ): void {
    for (let j = 0; j < refunds.length; j++) {
      const i = refunds[j]!;
      const m = matches[i]!;
      const rule = m.rule;
      const r = results[j]!;
      if (r instanceof Error) {
        statuses[i] = this.failures.decideRefund(r, m, now, i, notes);
        continue;
      }
      if (rule.scripted) {
        statuses[i] = this.verdicts.refundStatus(m, r as LimitVerdict);
        continue;
      }
      const remaining =
        typeof r === 'number' ? Math.max(rule.requestsPerUnit - r, 0) : (r as LimitVerdict)[1]!;
      statuses[i] = this.windows.withLimit(rule, now, remaining);
      this.windows.refunded(domain, m, now, remaining);
    }
  }
}
