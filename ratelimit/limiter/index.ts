// Public face of limiter/: the decision for one request's descriptors, through one function.
//
//   new Limiter({ store, stats, ... }).doLimit(domain, matches, hits, notes?, negative?)
//     → Promise<WireDescriptorStatus[]>
//
// `matches` are the request's descriptors as the config matched them (undefined: no limit to count),
// `hits` their hits, `negative[i]` marks a refund (is_negative_hits). The answer holds one status per
// match, in order: OK with no limit for an undefined match, otherwise the rule's limit, what remains
// of it and the seconds to the window's end, counted in the counter store (counting/) once per
// descriptor, with the rule statistics recorded. A descriptor the store could not count is decided by
// its failure mode, noted in `notes.decidedBy[i]`; the promise rejects with CacheError when that mode is
// `error` and with KeyRejectedError when the store refuses a key (the caller's error).
// limitOf(match, status) says which of a rule's limits a status reports, moreQuotaMsOf(status) how
// long until a scripted limit has more quota.
//
// Inside: limiter.ts (doLimit, cache keys, fixed windows, the local over-limit cache's answers),
// scripted.ts (other algorithms, several limits), refunds.ts, stop-increment.ts, failure-mode.ts,
// local-cache.ts (the over-limit cache itself), verdict-status.ts (a scripted verdict as a status).
export {
  Limiter,
  limitOf,
  cacheKey,
  cacheKeyBase,
  windowStart,
  resetSeconds,
  REFUNDED_LOCAL_CACHE_SECONDS,
  type LimiterOptions,
} from './limiter.js';
export { LocalOverLimitCache } from './local-cache.js';
export { moreQuotaMsOf } from './verdict-status.js';
export type { FailureModeSettings, FailureNotes } from './failure-mode.js';
