// The v3 rate limit service definition and the plain-object shapes grpc-js hands us with LOADER_OPTIONS.
import type * as grpc from '@grpc/grpc-js';
import { loadPackageDefinition } from './loader.js';
import type { RateLimitUnitName } from './units.js';

export const RLS_PROTO_FILE = 'envoy/service/ratelimit/v3/rls.proto';
export const RLS_SERVICE_NAME = 'envoy.service.ratelimit.v3.RateLimitService';
/** The HTTP/2 :path of the one RPC. */
export const SHOULD_RATE_LIMIT_PATH = `/${RLS_SERVICE_NAME}/ShouldRateLimit`;

export type WireUnit = RateLimitUnitName;
export type WireCode = 'UNKNOWN' | 'OK' | 'OVER_LIMIT';

export interface WireEntry {
  key?: string;
  value?: string;
}
export interface WireDescriptor {
  entries?: WireEntry[];
  limit?: { requestsPerUnit?: number; unit?: WireUnit | number } | null;
  /** uint64: a bigint only when above 2^53-1 (exact; out of the service's range). */
  hitsAddend?: { value?: number | bigint } | null;
  /** The hits are a refund: returned to the limit instead of consumed (Envoy's is_negative_hits). */
  isNegativeHits?: boolean;
}
export interface WireRateLimitRequest {
  domain?: string;
  descriptors?: WireDescriptor[];
  hitsAddend?: number;
}
export interface WireRateLimit {
  name?: string;
  requestsPerUnit: number;
  unit: WireUnit;
}
export interface WireDuration {
  seconds: number;
  nanos?: number;
}
export interface WireDescriptorStatus {
  code: WireCode;
  currentLimit?: WireRateLimit | null;
  limitRemaining: number;
  durationUntilReset?: WireDuration | null;
}
export interface WireHeader {
  key: string;
  value: string;
}
export interface WireRateLimitResponse {
  overallCode: WireCode;
  statuses: WireDescriptorStatus[];
  responseHeadersToAdd?: WireHeader[];
  requestHeadersToAdd?: WireHeader[];
  dynamicMetadata?: unknown;
}

let cached: grpc.ServiceDefinition | undefined;

/** The RateLimitService definition for grpc.Server#addService and makeGenericClientConstructor. */
export function rateLimitServiceDefinition(): grpc.ServiceDefinition {
  if (!cached) {
    const pkg = loadPackageDefinition([RLS_PROTO_FILE]);
    cached = pkg[RLS_SERVICE_NAME] as grpc.ServiceDefinition;
  }
  return cached;
}
