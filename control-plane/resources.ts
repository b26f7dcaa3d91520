// Building xDS resources for the cache from rate limit configs.
import { documentToRateLimitConfig } from '../ratelimit/config/index.js';
import {
  encodeRateLimitConfig,
  featuresOfMessage,
  RATELIMIT_CONFIG_TYPE_URL,
  type RateLimitConfigInit,
} from '../proto/index.js';
import type { Resource } from './cache.js';

/** A RateLimitConfig resource; its name is the message's name (unique within a snapshot). */
export function rateLimitConfigResource(msg: RateLimitConfigInit & { name: string }): Resource {
  const requiredFeatures = featuresOfMessage(msg);
  return {
    name: msg.name,
    typeUrl: RATELIMIT_CONFIG_TYPE_URL,
    value: encodeRateLimitConfig(msg),
    ...(requiredFeatures.length > 0 ? { requiredFeatures } : {}),
  };
}

/** A RateLimitConfig resource from a ratelimit YAML document (already validated). */
export function resourceFromDocument(name: string, document: unknown): Resource {
  return rateLimitConfigResource(documentToRateLimitConfig(name, document));
}
