// Public face of settings/: one Settings object parsed once from the environment at startup (grouped
// by the part that reads it), and the environment reader with its typed, bounded values.
export * from './settings.js';
export {
  type BackendType,
  DEFAULT_MAX_OUTSTANDING_COMMANDS,
  type RedisGroupSettings,
  type RedisSettings,
  type RedisType,
  type SocketType,
  type TlsFiles,
} from './backend-settings.js';
export type { GrpcSettings } from './grpc-settings.js';
export type { NamedLimitsSettings } from './named-limits-settings.js';
export type { QuotaSettings } from './quota-settings.js';
export * from './env.js';
