export * from './errors.js';
export * from './ratelimit-service.js';
export { toStruct, fromStruct, toValue, fromValue, type StructValue } from '../../proto/index.js';
