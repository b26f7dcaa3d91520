// The RateLimitUnit numbers, the one table every codec and the config model use. They are the same in
// envoy.type.v3.RateLimitUnit, RateLimitResponse.RateLimit.Unit and ratelimit.config's RateLimitUnit.

/** Unit names of RateLimitUnit; numbers as in the published API (WEEK is 7). */
export const RATELIMIT_UNIT_NUMBER = {
  UNKNOWN: 0,
  SECOND: 1,
  MINUTE: 2,
  HOUR: 3,
  DAY: 4,
  MONTH: 5,
  YEAR: 6,
  WEEK: 7,
} as const;
export type RateLimitUnitName = keyof typeof RATELIMIT_UNIT_NUMBER;

/** Unit names by number (index = wire number). */
export const RATELIMIT_UNIT_NAMES: readonly RateLimitUnitName[] = Object.entries(RATELIMIT_UNIT_NUMBER)
  .sort((a, b) => a[1] - b[1])
  .map(([name]) => name as RateLimitUnitName);
