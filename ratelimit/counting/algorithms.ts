// The counting algorithms beyond the reference's single fixed window, decided per descriptor: every
// limit of the descriptor is checked against its stored state, and only when all of them admit the
// hit is it counted, in all of them. So a hit rejected by one limit is counted nowhere.
//
// The same computation exists twice: here (the memory backend) and as Lua in
// ratelimit/redis/limit-script.ts (Redis runs it atomically). Any change goes into both; the
// backends' agreement is tested against a model written in the tests.
//
// Time is the caller's clock in milliseconds (as fixed windows use the pod's clock). Per limit:
//   fixed_window   key  <tagged>fw:<unitSeconds>:<windowStart>  counter of the epoch-aligned window
//   sliding_window keys <tagged>sw:<unitSeconds>:<windowStart> (current) and the previous window's;
//                  estimate = previous * (period - elapsed) / period + current
//   token_bucket   key  <tagged>tb:<unitSeconds>  GCRA theoretical arrival time, "W:R:r": the
//                  TAT is W + R / r ms exactly (W whole ms, 0 <= R < r, r = requests_per_unit when
//                  written). The emission interval T = period / r is a rational number of ms, so
//                  hits * T = (hits * period) div r ms + (hits * period) mod r ticks of 1/r ms, with
//                  no rounding at any rate; admitted while max(tat, now) + hits * T - now <= burst * T
// A negative hits argument is a refund of -hits (refundLimitCheck): returned to every limit of the
// descriptor, each clamped to what that limit holds, so no count goes below zero and no bucket above full.
// Besides remaining and reset, each limit's verdict says in how many ms it has more than that remaining
// with no other hit (a window's end, the previous window's weight falling far enough, a bucket's next
// hit; 0 when waiting brings nothing): the named limits' RateLimit `t`.
// <tagged> is prefix + "{" + domain + "_" + entries + "}": the {hash tag} keeps every key of one
// descriptor in one Redis Cluster slot, so one script call can touch them all.
//
// Exact arithmetic: every number stays an integer below 2^53 (Lua 5.1 has only doubles) because
// counts hold only admitted hits (at most requests_per_unit < 2^32), periods are at most a year in
// ms (< 2^35) and a full bucket refills within MAX_TOKEN_BUCKET_REFILL_SECONDS (refused at load
// otherwise); products that can pass 2^53 (count × period, hits × period) go through mulDivMod, which
// splits one factor in 16-bit halves. So the sliding window's estimate and the bucket's TAT are compared without rounding,
// and both algorithms admit exactly what their definitions say for every rate the config accepts.
import type { DescriptorEntry, LimitSpec, RateLimitRule } from '../config/index.js';
import type { LimitCheck, LimitVerdict } from './store.js';

export const ALGORITHM_CODE = { fixed_window: 0, sliding_window: 1, token_bucket: 2 } as const;

/** prefix + "{" + domain + "_" + k1_v1_k2_v2_ + "}" */
export function taggedKeyBase(prefix: string, domain: string, entries: readonly DescriptorEntry[]): string {
  let k = prefix + '{' + domain + '_';
  for (let i = 0; i < entries.length; i++) k += entries[i]!.key + '_' + entries[i]!.value + '_';
  return k + '}';
}

const SUFFIX = ['fw:', 'sw:', 'tb:'] as const;

/**
 * The store request refunding `hits` to a single fixed window under the reference's own cache key
 * (the rule is not scripted): evaluated as a one-limit check with negative hits, so the refund is
 * atomic in the script, and the key is the one reference pods count in.
 */
export function buildFixedWindowRefund(
  key: string,
  requestsPerUnit: number,
  unitSeconds: number,
  perSecond: boolean,
  hits: number,
  nowMs: number,
): LimitCheck {
  return { keys: [key], args: [nowMs, -hits, 0, requestsPerUnit, unitSeconds * 1000, 0], perSecond };
}

/** Builds the store request for one descriptor's rule (negative hits: a refund). */
export function buildLimitCheck(
  tagged: string,
  rule: RateLimitRule,
  hits: number,
  nowMs: number,
): LimitCheck {
  const limits = rule.limits;
  const keys: string[] = [];
  const args: number[] = [nowMs, hits];
  let perSecond = true;
  const nowSeconds = Math.floor(nowMs / 1000);
  for (let i = 0; i < limits.length; i++) {
    const l = limits[i]!;
    const code = ALGORITHM_CODE[l.algorithm];
    const u = l.unitSeconds;
    if (l.unit !== 'SECOND') perSecond = false;
    const base = tagged + SUFFIX[code] + u;
    if (code === 2) {
      keys.push(base);
    } else {
      const ws = Math.floor(nowSeconds / u) * u;
      keys.push(base + ':' + ws);
      if (code === 1) keys.push(base + ':' + (ws - u));
    }
    args.push(code, l.requestsPerUnit, u * 1000, l.burst);
  }
  return { keys, args, perSecond };
}

/** A token bucket's stored TAT: count + frac / den ms (see the key layout above). */
export interface BucketState {
  readonly count: number;
  readonly frac: number;
  readonly den: number;
}

/**
 * A token bucket's value as the script stores it in Redis ("W:R:den"), or a TAT in whole µs left by an
 * earlier version, read rounded up to whole ms as the script reads it. For readers outside the script
 * (the command line); undefined for an empty value.
 */
export function parseStoredBucket(stored: string): BucketState | undefined {
  const m = /^(\d+):(\d+):(\d+)$/.exec(stored);
  if (m) return { count: Number(m[1]), frac: Number(m[2]), den: Number(m[3]) };
  const us = Number(stored);
  return stored === '' || !Number.isFinite(us) ? undefined : { count: Math.ceil(us / 1000), frac: 0, den: 1 };
}

/** Where the memory backend keeps a number per key (the script uses GET/SET on the same keys). */
export interface NumberSlots {
  read(key: string): number;
  /** Adds to the number (creating it at 0) and sets its time to live. */
  add(key: string, by: number, ttlMs: number): void;
  /** Subtracts from a number that exists (0 < by <= its value), keeping its time to live. */
  take(key: string, by: number): void;
  /** A token bucket's TAT, undefined when absent or expired. */
  readBucket(key: string): BucketState | undefined;
  writeBucket(key: string, ms: number, frac: number, den: number, ttlMs: number): void;
}

/**
 * Longest time to live the script sets (and reset it reports), ms: a full bucket refills within
 * MAX_TOKEN_BUCKET_REFILL_SECONDS, so it only guards state written by a looser configuration.
 */
const MAX_TTL_MS = 1e13;

/**
 * Shortest time to live of a bucket's key, ms. Past its TAT a key reads as a full bucket, so keeping it
 * longer changes no decision; without the floor a bucket at a high rate (10 hits at 2,000,000/s refill
 * in 5 µs) would live 1 ms in Redis, whose clock is not the caller's: a pod whose clock is behind, or a
 * call that reaches Redis a little later, would find it gone and start from a full bucket.
 */
const MIN_BUCKET_TTL_MS = 1000;

// mulDivMod's results (module scratch: the hot path allocates nothing for them).
let quot = 0;
let rem = 0;

/** quot, rem = floor(x / d), x mod d, exactly, for integers 0 <= x < 2^53 and 1 <= d < 2^53. */
function divMod(x: number, d: number): void {
  let q = Math.floor(x / d);
  let r = x - q * d;
  // x / d is rounded: floor can be one off near an integer; the remainder tells which way.
  if (r < 0) {
    q -= 1;
    r += d;
  } else if (r >= d) {
    q += 1;
    r -= d;
  }
  quot = q;
  rem = r;
}

/**
 * quot, rem = floor(a * b / d), a * b mod d, exactly, for integers 0 <= a < 2^32, 0 <= b < 2^36,
 * 1 <= d < 2^36 (so every partial product stays below 2^53), with a quotient below 2^53.
 * Mirrored by mul_div_mod in the script.
 */
export function mulDivMod(a: number, b: number, d: number): void {
  const p = a * b;
  if (p <= Number.MAX_SAFE_INTEGER) {
    divMod(p, d);
    return;
  }
  const lo = b % 65536;
  const hi = (b - lo) / 65536;
  divMod(a * lo, d);
  const q1 = quot;
  const r1 = rem;
  divMod(a * hi, d);
  const q2 = quot;
  divMod(rem * 65536, d);
  let q = q1 + q2 * 65536 + quot;
  let r = r1 + rem;
  if (r >= d) {
    q += 1;
    r -= d;
  }
  quot = q;
  rem = r;
}

/**
 * quot, rem = a bucket's debt max(tat - now, 0) as ms + ticks of 1/limit ms (0, 0 for no bucket). A
 * bucket written under another rate is rounded up to the next whole ms (never lenient).
 */
function readDebt(st: BucketState | undefined, limit: number, now: number): void {
  quot = 0;
  rem = 0;
  if (st === undefined) return;
  let w = st.count;
  let f = st.frac;
  if (st.den !== limit && f > 0) {
    w += 1;
    f = 0;
  }
  if (w >= now) {
    quot = w - now;
    rem = f;
  }
}

/** The least k in [0, burst] whose cost k·period/rate (as ms + ticks of 1/rate ms) is >= (ms, ticks). */
function hitsCovering(ms: number, ticks: number, rate: number, period: number, burst: number): number {
  // Within one of the answer (|error| < 2^-20 hits): corrected below with the exact costs.
  let k = Math.min(Math.max(Math.ceil((ms * rate + ticks) / period), 0), burst);
  for (;;) {
    if (k <= 0) return 0;
    mulDivMod(k - 1, period, rate);
    if (quot > ms || (quot === ms && rem >= ticks)) k -= 1;
    else break;
  }
  for (;;) {
    if (k >= burst) return burst;
    mulDivMod(k, period, rate);
    if (quot < ms || (quot === ms && rem < ticks)) k += 1;
    else return k;
  }
}

/**
 * Ms until a token bucket holding a debt of (ms, ticks of 1/rate ms), k = hitsCovering of it, holds one
 * more hit: until the debt is down to (k - 1) emission intervals, rounded up to whole ms; 0 for k = 0
 * (a full bucket: nothing to wait for).
 */
function bucketMoreMs(ms: number, ticks: number, rate: number, period: number, k: number): number {
  if (k <= 0) return 0;
  mulDivMod(k - 1, period, rate);
  return ms - quot + (ticks > rem ? 1 : 0);
}

/**
 * Ms until a sliding window holding cur (current window) and prev (previous window), `elapsed` ms into
 * the current window, has more than `remaining` left; 0 when it has its whole limit (nothing to wait
 * for). Within the window the previous one's weight falls: remaining grows once
 * ceil(prev × (period − e) / period) <= limit − cur − remaining − 1; otherwise in the next window, where
 * cur becomes the previous one, once ceil(cur × (period − e') / period) <= limit − remaining − 1.
 */
function slidingMoreMs(
  cur: number,
  prev: number,
  limit: number,
  period: number,
  elapsed: number,
  remaining: number,
): number {
  if (remaining >= limit) return 0;
  const target = limit - cur - remaining - 1;
  if (prev > 0 && target >= 0) {
    mulDivMod(target, period, prev);
    return period - quot - elapsed;
  }
  mulDivMod(limit - remaining - 1, period, cur);
  return period - elapsed + Math.max(period - quot, 0);
}

/**
 * The limit script's computation in TypeScript (mirrors ratelimit/redis/limit-script.ts). It stays here,
 * beside buildLimitCheck whose key and argument layout it decodes, rather than in ratelimit/memory/: the
 * memory backend counts with it, and `ratelimit-config counters` evaluates Redis' stored state with it.
 */
export function evaluateLimitCheck(check: LimitCheck, slots: NumberSlots): LimitVerdict {
  const args = check.args;
  const keys = check.keys;
  const now = args[0]!;
  const hits = args[1]!;
  if (hits < 0) return refundLimitCheck(check, slots);
  const n = (args.length - 2) / 4;
  const out: number[] = new Array<number>(1 + 3 * n);
  out[0] = 0;
  // Per limit: value(s) to write and the ttl; decided in the first pass, written in the second.
  // Sliding windows: [hits, ttl, -]; buckets: [TAT ms, TAT ticks, ttl] (ms = -1: nothing to write).
  const write: number[] = new Array<number>(3 * n);
  let k = 0;
  for (let i = 0; i < n; i++) {
    const a = 2 + i * 4;
    const code = args[a]!;
    const limit = args[a + 1]!;
    const period = args[a + 2]!;
    const burst = args[a + 3]!;
    let fits: boolean;
    let remaining: number;
    let reset: number;
    if (code === 0) {
      const count = slots.read(keys[k]!);
      const ws = now - (now % period);
      fits = count + hits <= limit;
      const after = fits ? count + hits : count;
      remaining = Math.max(limit - after, 0);
      reset = ws + period - now;
      out[1 + 2 * n + i] = after > 0 ? reset : 0;
      write[3 * i] = hits;
      write[3 * i + 1] = period;
      k += 1;
    } else if (code === 1) {
      const cur = slots.read(keys[k]!);
      const prev = slots.read(keys[k + 1]!);
      const ws = now - (now % period);
      const elapsed = now - ws;
      // estimate = prev * (period - elapsed) / period + cur, compared exactly: with
      // prev * (period - elapsed) = quot * period + rem, estimate + hits <= limit exactly when
      // quot + (rem > 0) <= limit - cur - hits.
      mulDivMod(prev, period - elapsed, period);
      const weighted = quot + (rem > 0 ? 1 : 0);
      fits = weighted <= limit - cur - hits;
      // floor(limit - estimate - counted hits)
      remaining = Math.max(limit - cur - (fits ? hits : 0) - weighted, 0);
      const curAfter = fits ? cur + hits : cur;
      reset = curAfter > 0 ? ws + 2 * period - now : prev > 0 ? ws + period - now : 0;
      out[1 + 2 * n + i] = slidingMoreMs(curAfter, prev, limit, period, elapsed, remaining);
      write[3 * i] = hits;
      write[3 * i + 1] = ws + 2 * period - now;
      k += 2;
    } else {
      write[3 * i] = -1;
      if (limit === 0) {
        fits = hits === 0;
        remaining = 0;
        reset = 0;
        out[1 + 2 * n + i] = 0;
      } else {
        // The debt max(tat - now, 0) as dMs + dTicks / limit ms.
        readDebt(slots.readBucket(keys[k]!), limit, now);
        const dMs = quot;
        const dTicks = rem;
        let usedMs = dMs;
        let usedTicks = dTicks;
        if (hits > burst) {
          fits = false;
        } else {
          mulDivMod(hits, period, limit);
          let aMs = dMs + quot;
          let aTicks = dTicks + rem;
          if (aTicks >= limit) {
            aMs += 1;
            aTicks -= limit;
          }
          mulDivMod(burst, period, limit);
          fits = aMs < quot || (aMs === quot && aTicks <= rem);
          if (fits) {
            usedMs = aMs;
            usedTicks = aTicks;
            write[3 * i] = now + aMs;
            write[3 * i + 1] = aTicks;
            write[3 * i + 2] = Math.min(Math.max(aMs + (aTicks > 0 ? 1 : 0), MIN_BUCKET_TTL_MS), MAX_TTL_MS);
          }
        }
        const covering = hitsCovering(usedMs, usedTicks, limit, period, burst);
        remaining = burst - covering;
        reset = Math.min(usedMs + (usedTicks > 0 ? 1 : 0), MAX_TTL_MS);
        out[1 + 2 * n + i] = Math.min(bucketMoreMs(usedMs, usedTicks, limit, period, covering), MAX_TTL_MS);
      }
      k += 1;
    }
    if (!fits && out[0] === 0) out[0] = i + 1;
    out[1 + 2 * i] = remaining;
    out[2 + 2 * i] = reset;
  }
  if (out[0] !== 0 || hits === 0) return out;
  k = 0;
  for (let i = 0; i < n; i++) {
    const code = args[2 + i * 4]!;
    if (code === 2) {
      if (write[3 * i]! !== -1) {
        slots.writeBucket(keys[k]!, write[3 * i]!, write[3 * i + 1]!, args[3 + i * 4]!, write[3 * i + 2]!);
      }
      k += 1;
    } else {
      slots.add(keys[k]!, write[3 * i]!, write[3 * i + 1]!);
      k += code === 1 ? 2 : 1;
    }
  }
  return out;
}

/**
 * A refund of r = -hits to every limit of the descriptor (mirrored by the script's refund branch).
 * Always admitted (rejectedBy 0); remaining and reset are after the refund. Per limit, clamped to what
 * it holds, never creating a key:
 *   fixed_window   the window's count goes down by r, not below 0;
 *   sliding_window the current window's count goes down first, then the previous window's, neither
 *                  below 0 (hits admitted in the previous window still weigh on the estimate);
 *   token_bucket   the TAT moves back by r emission intervals, not before now (a full bucket).
 */
export function refundLimitCheck(check: LimitCheck, slots: NumberSlots): LimitVerdict {
  const args = check.args;
  const keys = check.keys;
  const now = args[0]!;
  const r = -args[1]!;
  const n = (args.length - 2) / 4;
  const out: number[] = new Array<number>(1 + 3 * n);
  out[0] = 0;
  let k = 0;
  for (let i = 0; i < n; i++) {
    const a = 2 + i * 4;
    const code = args[a]!;
    const limit = args[a + 1]!;
    const period = args[a + 2]!;
    const burst = args[a + 3]!;
    let remaining: number;
    let reset: number;
    if (code === 0) {
      const count = slots.read(keys[k]!);
      const take = Math.min(count, r);
      if (take > 0) slots.take(keys[k]!, take);
      remaining = Math.max(limit - (count - take), 0);
      reset = period - (now % period);
      out[1 + 2 * n + i] = count - take > 0 ? reset : 0;
      k += 1;
    } else if (code === 1) {
      let cur = slots.read(keys[k]!);
      let prev = slots.read(keys[k + 1]!);
      const fromCur = Math.min(cur, r);
      const fromPrev = Math.min(prev, r - fromCur);
      if (fromCur > 0) slots.take(keys[k]!, fromCur);
      if (fromPrev > 0) slots.take(keys[k + 1]!, fromPrev);
      cur -= fromCur;
      prev -= fromPrev;
      const ws = now - (now % period);
      mulDivMod(prev, period - (now - ws), period);
      const weighted = quot + (rem > 0 ? 1 : 0);
      remaining = Math.max(limit - cur - weighted, 0);
      reset = cur > 0 ? ws + 2 * period - now : prev > 0 ? ws + period - now : 0;
      out[1 + 2 * n + i] = slidingMoreMs(cur, prev, limit, period, now - ws, remaining);
      k += 2;
    } else {
      readDebt(limit === 0 ? undefined : slots.readBucket(keys[k]!), limit, now);
      let dMs = quot;
      let dTicks = rem;
      if (dMs > 0 || dTicks > 0) {
        // debt - min(r, burst) * T, as ms + ticks of 1/limit ms, not below 0.
        mulDivMod(Math.min(r, burst), period, limit);
        if (dMs > quot || (dMs === quot && dTicks > rem)) {
          dMs -= quot;
          dTicks -= rem;
          if (dTicks < 0) {
            dMs -= 1;
            dTicks += limit;
          }
        } else {
          dMs = 0;
          dTicks = 0;
        }
        const ttl = Math.min(Math.max(dMs + (dTicks > 0 ? 1 : 0), MIN_BUCKET_TTL_MS), MAX_TTL_MS);
        slots.writeBucket(keys[k]!, now + dMs, dTicks, limit, ttl);
      }
      const covering = limit === 0 ? 0 : hitsCovering(dMs, dTicks, limit, period, burst);
      remaining = limit === 0 ? 0 : burst - covering;
      reset = Math.min(dMs + (dTicks > 0 ? 1 : 0), MAX_TTL_MS);
      out[1 + 2 * n + i] = Math.min(bucketMoreMs(dMs, dTicks, limit, period, covering), MAX_TTL_MS);
      k += 1;
    }
    out[1 + 2 * i] = remaining;
    out[2 + 2 * i] = reset;
  }
  return out;
}

/** The capacity a limit's remaining counts down from (burst for a token bucket). */
export function limitCapacity(l: LimitSpec): number {
  return l.algorithm === 'token_bucket' ? l.burst : l.requestsPerUnit;
}
