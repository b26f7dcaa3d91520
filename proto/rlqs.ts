// The Rate Limit Quota Service (envoy.service.rate_limit_quota.v3, RLQS) definition from the shipped Envoy
// protos and the plain-object shapes protobufjs gives with LOADER_OPTIONS. The quota server is off the
// request path (one long-lived stream per Envoy, a report every few seconds), so it uses the generated
// codecs rather than hand-written ones.
import type * as grpc from '@grpc/grpc-js';
import { loadPackageDefinition } from './loader.js';

export const RLQS_PROTO_FILE = 'envoy/service/rate_limit_quota/v3/rlqs.proto';
export const RLQS_SERVICE_NAME = 'envoy.service.rate_limit_quota.v3.RateLimitQuotaService';
/** The HTTP/2 :path of the one RPC (bidirectional streaming). */
export const RLQS_STREAM_PATH = `/${RLQS_SERVICE_NAME}/StreamRateLimitQuotas`;

export interface WireProtoDuration {
  seconds?: number;
  nanos?: number;
}

export interface WireBucketId {
  bucket?: Record<string, string>;
}

export interface WireBucketQuotaUsage {
  bucketId?: WireBucketId | null;
  timeElapsed?: WireProtoDuration | null;
  numRequestsAllowed?: number;
  numRequestsDenied?: number;
}

export interface WireUsageReports {
  domain?: string;
  bucketQuotaUsages?: WireBucketQuotaUsage[];
}

export interface WireTokenBucket {
  maxTokens: number;
  tokensPerFill?: { value: number } | null;
  fillInterval: WireProtoDuration;
}

export interface WireRateLimitStrategy {
  blanketRule?: 'ALLOW_ALL' | 'DENY_ALL';
  tokenBucket?: WireTokenBucket;
  strategy?: 'blanketRule' | 'tokenBucket' | 'requestsPerTimeUnit';
}

export interface WireBucketAction {
  bucketId: WireBucketId;
  quotaAssignmentAction?: {
    assignmentTimeToLive: WireProtoDuration;
    rateLimitStrategy: WireRateLimitStrategy;
  };
  abandonAction?: Record<string, never>;
  bucketAction?: 'quotaAssignmentAction' | 'abandonAction';
}

export interface WireQuotaResponse {
  bucketAction: WireBucketAction[];
}

let cached: grpc.ServiceDefinition | undefined;

/** The RateLimitQuotaService definition (codecs for the server, and a client constructor for tests). */
export function rateLimitQuotaServiceDefinition(): grpc.ServiceDefinition {
  if (!cached) {
    const pkg = loadPackageDefinition([RLQS_PROTO_FILE]);
    cached = pkg[RLQS_SERVICE_NAME] as grpc.ServiceDefinition;
  }
  return cached;
}
