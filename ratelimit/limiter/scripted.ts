// Rules with another algorithm or several limits (rule.scripted): one atomic evaluate per descriptor
// (counting/algorithms.ts), all of a request's sent together beside its fixed-window increments. A
// verdict becomes a status in verdict-status.ts; when the store could not evaluate, the failure modes
// decide, `local` counting a fixed window of the first limit's share in the pod (degraded, not the
// algorithm).
import type { LimitMatch } from '../config/index.js';
import type { WireDescriptorStatus } from '../../proto/index.js';
import {
  buildLimitCheck,
  CacheError,
  taggedKeyBase,
  type CounterOp,
  type CounterStore,
  type LimitCheck,
  type LimitVerdict,
} from '../counting/index.js';
import type { FailureModes, FailureNotes } from './failure-mode.js';
import type { FixedWindows } from './fixed-window.js';
import type { VerdictStatuses } from './verdict-status.js';

export class ScriptedRules {
  constructor(
    private readonly store: CounterStore,
    private readonly windows: FixedWindows,
    private readonly verdicts: VerdictStatuses,
    private readonly failures: FailureModes,
    private readonly nowMs: () => number,
  ) {}

  /**
   * The verdicts of the scripted descriptors (indexes into `matches`), or the store's failure: settled
   * into a value at once, so a failure never goes unhandled while the other counts are awaited.
   */
  evaluate(
    domain: string,
    matches: readonly (LimitMatch | undefined)[],
    scripted: readonly number[],
    storeHits: readonly number[],
  ): Promise<LimitVerdict[] | Error> {
    if (!this.store.evaluate) {
      // The service refuses such configurations for this store at load; never counted as fixed.
      return Promise.resolve(new CacheError('the counter store cannot evaluate this rate limit algorithm'));
    }
    const nowMs = this.nowMs();
    const checks: LimitCheck[] = new Array(scripted.length);
    for (let j = 0; j < scripted.length; j++) {
      const i = scripted[j]!;
      const m = matches[i]!;
      checks[j] = buildLimitCheck(
        taggedKeyBase(this.windows.prefix, domain, m.keyEntries),
        m.rule,
        storeHits[i]!,
        nowMs,
      );
    }
    return this.store
      .evaluate(checks)
      .then<LimitVerdict[], Error>(undefined, (err: unknown) =>
        err instanceof Error ? err : new Error(String(err)),
      );
  }

  /** The scripted descriptors' statuses, written into `statuses`. */
  statuses(
    statuses: WireDescriptorStatus[],
    domain: string,
    matches: readonly (LimitMatch | undefined)[],
    scripted: readonly number[],
    decided: LimitVerdict[] | Error,
    hits: readonly number[],
    now: number,
    notes: FailureNotes | undefined,
  ): void {
    if (decided instanceof Error) {
      for (const i of scripted) {
        const m = matches[i]!;
        const op: CounterOp = {
          key: this.windows.key(domain, m, now),
          hits: hits[i],
          expireSeconds: m.rule.unitSeconds,
          perSecond: m.rule.unit === 'SECOND',
        };
        statuses[i] = this.failures.decide(decided, m, op, hits[i], now, i, notes);
      }
      return;
    }
    for (let j = 0; j < scripted.length; j++) {
      const i = scripted[j]!;
      statuses[i] = this.verdicts.status(matches[i]!, decided[j]!, hits[i]);
    }
  }
}
