// Feature negotiation over xDS: what a RateLimitConfig needs beyond the reference's fields, and where
// a pod says what it enforces. The reference ignores fields it does not know, so a pod that does not
// announce a feature must never be sent a config that uses it.
import type { RateLimitConfigInit, RateLimitDescriptorInit, RateLimitPolicyInit } from './rls-conf.js';
import type { WireNode } from './xds.js';

/** Node metadata key (string value, comma-separated) listing the features a pod enforces. */
export const NODE_FEATURES_METADATA_KEY = 'ratelimit.features';

export type RateLimitFeature = 'sliding_window' | 'token_bucket' | 'rate_limits';
export const RATELIMIT_FEATURES: readonly RateLimitFeature[] = [
  'rate_limits',
  'sliding_window',
  'token_bucket',
];

/** The features a config message uses, sorted. */
export function featuresOfMessage(msg: RateLimitConfigInit): RateLimitFeature[] {
  const found = new Set<RateLimitFeature>();
  const policy = (p: RateLimitPolicyInit | null | undefined) => {
    if (p?.algorithm === 'SLIDING_WINDOW') found.add('sliding_window');
    else if (p?.algorithm === 'TOKEN_BUCKET') found.add('token_bucket');
  };
  const walk = (list: RateLimitDescriptorInit[] | undefined) => {
    for (const d of list ?? []) {
      policy(d.rateLimit);
      if (d.rateLimits && d.rateLimits.length > 0) found.add('rate_limits');
      for (const p of d.rateLimits ?? []) policy(p);
      walk(d.descriptors);
    }
  };
  walk(msg.descriptors);
  return RATELIMIT_FEATURES.filter((f) => found.has(f));
}

/** The features a node announced in its metadata (none when it announced nothing: a reference pod). */
export function announcedFeatures(node: WireNode | null | undefined): ReadonlySet<string> {
  const v = node?.metadata?.fields?.[NODE_FEATURES_METADATA_KEY]?.stringValue ?? '';
  return new Set(
    v
      .split(',')
      .map((x) => x.trim())
      .filter((x) => x !== ''),
  );
}
