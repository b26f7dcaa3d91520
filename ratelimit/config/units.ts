// proto/ratelimit-config.ts, proto/'s light entry: index.ts loads @grpc/grpc-js, and the config parse
// worker, which loads config/, must start without it.
import { RATELIMIT_UNIT_NUMBER } from '../../proto/ratelimit-config.js';
import type { Unit } from './types.js';

/** Every unit, in wire order. */
export const UNITS: readonly Unit[] = ['SECOND', 'MINUTE', 'HOUR', 'DAY', 'WEEK', 'MONTH', 'YEAR'];

/** Wire numbers of envoy.service.ratelimit.v3.RateLimitResponse.RateLimit.Unit (0 is UNKNOWN). */
export const UNIT_NUMBER: Readonly<Record<Unit, number>> = Object.fromEntries(
  UNITS.map((u) => [u, RATELIMIT_UNIT_NUMBER[u]]),
) as Record<Unit, number>;

/**
 * Window length in seconds, as the reference's UnitToDivider: fixed lengths, so a month is 30 days
 * and a year 365 days (no calendar alignment).
 */
export const UNIT_SECONDS: Readonly<Record<Unit, number>> = {
  SECOND: 1,
  MINUTE: 60,
  HOUR: 60 * 60,
  DAY: 60 * 60 * 24,
  WEEK: 60 * 60 * 24 * 7,
  MONTH: 60 * 60 * 24 * 30,
  YEAR: 60 * 60 * 24 * 365,
};

const BY_NUMBER: ReadonlyMap<number, Unit> = new Map(UNITS.map((u) => [UNIT_NUMBER[u], u]));

/** The unit for a wire number, undefined for UNKNOWN (0) and numbers outside the enum. */
export function unitFromNumber(n: number): Unit | undefined {
  return BY_NUMBER.get(n);
}

/** The unit named in YAML, matched case-insensitively as the reference does; undefined when invalid. */
export function parseUnit(text: string): Unit | undefined {
  const upper = text.toUpperCase();
  return (UNITS as readonly string[]).includes(upper) ? (upper as Unit) : undefined;
}
