// The RateLimitConfig custom resource as the operator sees it (plain JSON from the API server).
export const GROUP = 'ratelimit.envoyproxy.io';
export const VERSION = 'v1alpha1';
export const KIND = 'RateLimitConfig';
export const PLURAL = 'ratelimitconfigs';
export const API_VERSION = `${GROUP}/${VERSION}`;

export type ConditionStatus = 'True' | 'False' | 'Unknown';

export interface Condition {
  type: string;
  status: ConditionStatus;
  observedGeneration?: number;
  lastTransitionTime: string;
  reason: string;
  message: string;
}

export interface RateLimitConfigStatus {
  observedGeneration?: number;
  version?: string | null;
  pods?: { connected: number; acked: number; nacked: number };
  podsAcked?: string;
  /** The generation pods are served (the last accepted one while a newer one is rejected). */
  servedGeneration?: number | null;
  /** The last accepted generation and its spec (JSON): served while a newer generation is rejected. */
  lastAccepted?: { generation: number; spec: string } | null;
  conditions?: Condition[];
}

export interface RateLimitConfigSpec {
  domain?: unknown;
  descriptors?: unknown;
  /** Operator field: opt in to merging into a shared domain. */
  mergeDomain?: unknown;
  [field: string]: unknown;
}

export interface RateLimitConfigObject {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name?: string;
    namespace?: string;
    uid?: string;
    generation?: number;
    resourceVersion?: string;
    creationTimestamp?: string | Date;
    deletionTimestamp?: string | Date;
    [field: string]: unknown;
  };
  spec?: RateLimitConfigSpec;
  status?: RateLimitConfigStatus;
}

/** `namespace/name`: the work queue key and the name used in messages. */
export function objectKey(o: { metadata: { namespace?: string; name?: string } }): string {
  return `${o.metadata.namespace ?? ''}/${o.metadata.name ?? ''}`;
}

export function splitKey(key: string): { namespace: string; name: string } {
  const i = key.indexOf('/');
  return { namespace: key.slice(0, i), name: key.slice(i + 1) };
}
