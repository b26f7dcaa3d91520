// Public face of service/: the RateLimitService, from a decoded request to its response (config
// lookup, the limiter, statistics, the over-limit log), and the kinds of error it answers with.
export * from './errors.js';
export * from './ratelimit-service.js';
export { OverLimitLog, IETF_DRAFT, REDACTED, type OverLimitLogOptions } from './named-limits.js';
export { toStruct, fromStruct, toValue, fromValue, type StructValue } from '../../proto/index.js';
