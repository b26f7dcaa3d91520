// The Rate Limit Quota Service (RLQS) on the wire, for the harness: the StreamRateLimitQuotas method as a
// grpc-js service definition whose messages are encoded and decoded with Envoy's own protos (the envoy-api
// tree loaded by EnvoyProtos), so the Envoy emulator, the static baseline server and any test stub speak
// exactly what an Envoy would, with no hand-written codec to drift.
import type * as grpc from '@grpc/grpc-js';
import type protobuf from 'protobufjs';
import { EnvoyProtos } from '../envoy-actions.js';

export const RLQS_REPORTS = 'envoy.service.rate_limit_quota.v3.RateLimitQuotaUsageReports';
export const RLQS_RESPONSE = 'envoy.service.rate_limit_quota.v3.RateLimitQuotaResponse';
export const RLQS_FILTER = 'envoy.extensions.filters.http.rate_limit_quota.v3.RateLimitQuotaFilterConfig';
export const RLQS_BUCKET_SETTINGS =
  'envoy.extensions.filters.http.rate_limit_quota.v3.RateLimitQuotaBucketSettings';
export const RLQS_METHOD = '/envoy.service.rate_limit_quota.v3.RateLimitQuotaService/StreamRateLimitQuotas';

/** A google.protobuf.Duration as protobufjs gives it (keepCase). */
export interface Duration {
  seconds?: number;
  nanos?: number;
}

export type BucketId = { bucket: Record<string, string> };

export interface BucketQuotaUsage {
  bucket_id: BucketId;
  time_elapsed: Duration;
  num_requests_allowed: number;
  num_requests_denied: number;
}

export interface UsageReports {
  domain?: string;
  bucket_quota_usages: BucketQuotaUsage[];
}

export interface TokenBucket {
  max_tokens: number;
  tokens_per_fill?: { value: number };
  fill_interval: Duration;
}

export interface RateLimitStrategy {
  blanket_rule?: 'ALLOW_ALL' | 'DENY_ALL';
  requests_per_time_unit?: { requests_per_time_unit: number; time_unit: string };
  token_bucket?: TokenBucket;
}

export interface BucketAction {
  bucket_id: BucketId;
  quota_assignment_action?: { assignment_time_to_live?: Duration; rate_limit_strategy?: RateLimitStrategy };
  abandon_action?: Record<string, never>;
}

export interface QuotaResponse {
  bucket_action: BucketAction[];
}

let protos: EnvoyProtos | undefined;
/** Envoy's protos, loaded once per process (loading the envoy-api tree takes a moment). */
export function envoyProtos(): EnvoyProtos {
  protos ??= new EnvoyProtos();
  return protos;
}

function mustLookup(name: string): protobuf.Type {
  const t = envoyProtos().lookup(name);
  if (!t) throw new Error(`${name} not found in the envoy-api protos`);
  return t;
}

const TO_OBJECT = { longs: Number, enums: String, defaults: false } as const;

function codec<T>(name: string): { serialize: (v: T) => Buffer; deserialize: (b: Buffer) => T } {
  const type = mustLookup(name);
  return {
    serialize: (v: T) => Buffer.from(type.encode(type.fromObject(v as object)).finish()),
    deserialize: (b: Buffer) => type.toObject(type.decode(b), TO_OBJECT) as T,
  };
}

/** The RateLimitQuotaService definition for grpc.Server.addService and makeGenericClientConstructor. */
export function rlqsServiceDefinition(): grpc.ServiceDefinition {
  const req = codec<UsageReports>(RLQS_REPORTS);
  const res = codec<QuotaResponse>(RLQS_RESPONSE);
  return {
    StreamRateLimitQuotas: {
      path: RLQS_METHOD,
      requestStream: true,
      responseStream: true,
      requestSerialize: req.serialize,
      requestDeserialize: req.deserialize,
      responseSerialize: res.serialize,
      responseDeserialize: res.deserialize,
    },
  };
}

/** Milliseconds of a Duration (0 when unset). */
export function durationMs(d: Duration | undefined): number {
  if (!d) return 0;
  return Number(d.seconds ?? 0) * 1000 + Number(d.nanos ?? 0) / 1e6;
}

/** A Duration of `ms` milliseconds. */
export function duration(ms: number): Duration {
  const seconds = Math.floor(ms / 1000);
  return { seconds, nanos: Math.round((ms - seconds * 1000) * 1e6) };
}

/** One canonical string per BucketId: key order does not matter (as the proto says). */
export function bucketKey(id: BucketId): string {
  return Object.keys(id.bucket)
    .sort()
    .map((k) => `${k}=${id.bucket[k]}`)
    .join('\u0000');
}
