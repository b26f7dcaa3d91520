export * from './errors.js';
export * from './ratelimit-service.js';
export { OverLimitLog, IETF_DRAFT, REDACTED, type OverLimitLogOptions } from './named-limits.js';
export { toStruct, fromStruct, toValue, fromValue, type StructValue } from '../../proto/index.js';
