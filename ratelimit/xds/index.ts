// Public face of ratelimit/xds: the xDS (SotW ADS) config client of the rate limit service.
export * from './backoff.js';
export * from './client.js';
