// STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT: once one descriptor of a request is over its limit (or is
// about to be, read with a zero-hit probe of the store), the request's other keys are not incremented
// (their ops carry 0 hits), so a request refused by one limit does not use up the others.
import type { LimitMatch } from '../config/index.js';
import { CacheError, type CounterOp, type CounterStore } from '../counting/index.js';
import type { FailureModes } from './failure-mode.js';

/**
 * The hits to send per descriptor: `hits`, or 0 for all but the one over its limit. `ops` are the
 * fixed-window ops (`opIndex[j]` the descriptor of op j), `anyLocalOver` says the local over-limit
 * cache already answered one descriptor, `keyCount` counts the descriptors that go to the store.
 */
export async function stopIncrementProbe(
  store: CounterStore,
  failures: FailureModes,
  matches: readonly (LimitMatch | undefined)[],
  ops: readonly CounterOp[],
  opIndex: readonly number[],
  hits: readonly number[],
  anyLocalOver: boolean,
  keyCount: number,
): Promise<readonly number[]> {
  const n = matches.length;
  const changed = hits.slice();
  if (anyLocalOver) {
    for (let i = 0; i < n; i++) changed[i] = 0;
  } else if (keyCount > 1) {
    let current: number[] = [];
    if (ops.length > 0) {
      const probe = ops.map((op) => ({ key: op.key, hits: 0, expireSeconds: 0, perSecond: op.perSecond }));
      try {
        current = await store.get(probe);
      } catch (err) {
        // Without the store the probe is skipped; the counts that follow fall to the failure modes.
        if (!(err instanceof CacheError) || failures.anyError(matches)) throw err;
      }
    }
    for (let j = 0; j < opIndex.length; j++) {
      const i = opIndex[j];
      if (current.length > 0 && current[j] + hits[i] > matches[i]!.rule.requestsPerUnit) {
        for (let k = 0; k < n; k++) if (k !== i) changed[k] = 0;
        break;
      }
    }
  }
  return changed;
}
