// Public face of quota/: the rate limit quota server (RLQS, docs/rlqs.md). Contract: the app builds one
// QuotaServer when RLQS_ENABLED; each config goes through prepare() (a ConfigError refuses a config that
// is ambiguous for buckets, before anything else swaps it in) and then apply(); the gRPC layer opens a
// QuotaStream per call, hands it each decoded report and closes it when the call ends; shutdown() sends
// the last (TTL 0) assignments before the listener closes. Nothing here runs on the ShouldRateLimit path.
export { QuotaServer, type QuotaServerOptions } from './server.js';
export { QuotaStream, type QuotaStreamOut } from './state.js';
export { BucketMatcher, bucketKey } from './bucket-match.js';
export { budgetOf, divide, podFraction, strategyFor, type Budget } from './allocator.js';
export { StreamError } from './stream.js';
