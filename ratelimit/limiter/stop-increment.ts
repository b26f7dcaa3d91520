// STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT: once one descriptor of a request is over its limit (or is
// about to be, read with a zero-hit probe of the store), the request's other keys are not incremented
// (their ops carry 0 hits), so a request refused by one limit does not use up the others.
import type { LimitMatch } from '../config/index.js';
import { CacheError, type CounterOp, type CounterStore } from '../counting/index.js';
import type { FailureModes } from './failure-mode.js';

/**
 * The hits to send per descriptor: `hits`, or 0 for all but the one over its limit. `keys` are the
 * fixed-window keys (undefined for the other descriptors); `anyLocalOver` says the local over-limit
 * cache already answered one; `keyCount` counts the descriptors that go to the store.
 */
export async function stopIncrementProbe(
  store: CounterStore,
  failures: FailureModes,
  matches: readonly (LimitMatch | undefined)[],
  keys: readonly (string | undefined)[],
  hits: readonly number[],
  anyLocalOver: boolean,
  keyCount: number,
): Promise<readonly number[]> {
  const n = matches.length;
  const changed = hits.slice();
  if (anyLocalOver) {
    for (let i = 0; i < n; i++) changed[i] = 0;
  } else if (keyCount > 1) {
    const probe: CounterOp[] = [];
    const probeIndex: number[] = [];
    for (let i = 0; i < n; i++) {
      const m = matches[i];
      if (!m || m.rule.scripted || keys[i] === undefined) continue;
      probe.push({ key: keys[i]!, hits: 0, expireSeconds: 0, perSecond: m.rule.unit === 'SECOND' });
      probeIndex.push(i);
    }
    let current: number[] = [];
    if (probe.length > 0) {
      try {
        current = await store.get(probe);
      } catch (err) {
        // Without the store the probe is skipped; the counts that follow fall to the failure modes.
        if (!(err instanceof CacheError) || failures.anyError(matches)) throw err;
      }
    }
    for (let j = 0; j < probeIndex.length; j++) {
      const i = probeIndex[j];
      if (current.length > 0 && current[j] + hits[i] > matches[i]!.rule.requestsPerUnit) {
        for (let k = 0; k < n; k++) if (k !== i) changed[k] = 0;
        break;
      }
    }
  }
  return changed;
}
