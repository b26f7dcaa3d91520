// What a Redis reply must be where the service reads numbers from it. A count (INCRBY's answer, a
// counter read with GET) is a non-negative integer; the limit script's verdict is an array of
// 1 + 2 per limit integers, each in its range (limit-script.ts, algorithms.ts). Anything else — a
// RESP3 double, a map, a status or bulk string, a null, a count below zero — never comes from Redis
// running these commands: it is a misbehaving server or proxy, and the operation fails as a cache
// error (its failure mode decides it) instead of a number being guessed from the reply. A negative
// count is the one shape a real Redis can give (a key some other writer set below zero): that op's
// own data, so it fails that op only (CounterRefusedError) and never counts against the shard. Every
// other malformed reply is the server's failure, counted by the circuit breaker as a timeout would be.
import {
  CacheError,
  CounterRefusedError,
  SATURATED_COUNT,
  type LimitCheck,
  type LimitVerdict,
} from '../counting/index.js';

/**
 * The largest "ms until replenished" a verdict carries: the script clamps a token bucket's at 1e13,
 * and a window's is at most two periods of at most a year.
 */
const MAX_RESET_MS = 1e13;

/** A short description of a reply for an error message (never its whole content). */
function shapeOf(value: unknown): string {
  if (value === null || value === undefined) return 'a null';
  if (typeof value === 'number') return String(value);
  if (typeof value === 'string') return `the string ${JSON.stringify(value.slice(0, 32))}`;
  if (Array.isArray(value)) return `an array of ${value.length}`;
  if (typeof value === 'bigint') return `the big number ${String(value).slice(0, 32)}`;
  return `a ${typeof value === 'object' ? (value.constructor?.name ?? 'map') : typeof value}`;
}

/**
 * INCRBY's reply as a count, or the CacheError of a reply that is not one. A count past 2^53 (a real
 * Redis counts to 2^63 - 1, read as a double near it) is over any limit: SATURATED_COUNT, as an
 * overflow is.
 */
export function countOf(value: unknown, what = 'INCRBY'): number | CacheError {
  if (typeof value === 'number' && value >= 0 && value <= Number.MAX_SAFE_INTEGER) {
    // Integer replies are integers; a RESP3 double such as 1.5 is not a count.
    if (Number.isInteger(value)) return value;
  } else if (typeof value === 'number' && value > 0 && value < 1e19 && Number.isInteger(value)) {
    return SATURATED_COUNT;
  }
  const text = `redis ${what} answered ${shapeOf(value)}, not a count`;
  if (typeof value === 'number' && Number.isInteger(value) && value < 0) {
    return new CounterRefusedError(`${text}: the key holds a negative value`);
  }
  return new CacheError(`${text}: malformed reply`);
}

/** GET's reply (a counter read without counting) as a count: absent is 0. */
export function storedCountOf(value: unknown): number | CacheError {
  if (value === null) return 0;
  if (typeof value === 'string' && /^-?\d{1,19}$/.test(value)) return countOf(Number(value), 'GET');
  return countOf(value, 'GET');
}

const isCount = (x: unknown): x is number => Number.isSafeInteger(x) && (x as number) >= 0;

/**
 * The limit script's reply for `check` as a verdict, or the CacheError of a reply of another shape:
 * [rejectedBy in 0..n, then per limit remaining in 0..max(limit, burst) and ms in 0..MAX_RESET_MS,
 * then per limit ms until more in 0..MAX_RESET_MS], n the check's limits (its args: now, hits, then four
 * per limit).
 */
export function verdictOf(value: unknown, check: LimitCheck): LimitVerdict | CacheError {
  const args = check.args;
  const n = (args.length - 2) >> 2;
  if (Array.isArray(value) && value.length === 1 + 3 * n && isCount(value[0]) && value[0] <= n) {
    let i = 0;
    for (; i < n; i++) {
      const remaining: unknown = value[1 + 2 * i];
      const reset: unknown = value[2 + 2 * i];
      const a = 2 + 4 * i;
      // args[a .. a + 3]: algorithm code, requests per unit, period ms, burst.
      const most = args[a + 1]! > args[a + 3]! ? args[a + 1]! : args[a + 3]!;
      const more: unknown = value[1 + 2 * n + i];
      if (!isCount(remaining) || remaining > most || !isCount(reset) || reset > MAX_RESET_MS) break;
      if (!isCount(more) || more > MAX_RESET_MS) break;
    }
    if (i === n) return value as LimitVerdict;
  }
  const at = Array.isArray(value) ? ` (${value.slice(0, 7).map(shapeOf).join(', ')})` : '';
  return new CacheError(
    `redis limit script answered ${shapeOf(value)}${at}, not a verdict for ${n} limit(s): malformed reply`,
  );
}

/** Every verdict of a call, or throws the first malformed one's CacheError (evaluate's contract). */
export function verdictsOf(values: readonly unknown[], checks: readonly LimitCheck[]): LimitVerdict[] {
  for (let i = 0; i < checks.length; i++) {
    const v = verdictOf(values[i], checks[i]!);
    if (v instanceof Error) throw v;
  }
  return values as LimitVerdict[];
}
