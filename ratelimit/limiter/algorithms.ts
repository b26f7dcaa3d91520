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
//   token_bucket   key  <tagged>tb:<unitSeconds>  GCRA theoretical arrival time (integer µs):
//                  emission interval T = period / requests_per_unit, admitted while
//                  max(tat, now) + hits * T - now <= burst * T
// <tagged> is prefix + "{" + domain + "_" + entries + "}": the {hash tag} keeps every key of one
// descriptor in one Redis Cluster slot, so one script call can touch them all.
import type { DescriptorEntry, LimitSpec, RateLimitRule } from '../config/index.js';

export const ALGORITHM_CODE = { fixed_window: 0, sliding_window: 1, token_bucket: 2 } as const;

/** The limits of one descriptor for one request, as sent to the store (and to the script). */
export interface LimitCheck {
  /** Per limit in order: fixed_window 1 key, sliding_window 2 (current, previous), token_bucket 1. */
  readonly keys: string[];
  /** [nowMs, hits, then per limit: algorithm code, requests per unit, period ms, burst]. */
  readonly args: number[];
  /** Every limit is SECOND: routed to the per-second deployment when one is configured. */
  readonly perSecond: boolean;
}

/**
 * The store's answer for one LimitCheck, flat as the script returns it:
 * [rejectedBy, then per limit: remaining, ms until fully replenished]. rejectedBy is 0 when the hit
 * was admitted (and counted), else 1 + the index of the first limit that rejected it (nothing
 * counted). Remaining values are after counting when admitted, before otherwise.
 */
export type LimitVerdict = number[];

/** prefix + "{" + domain + "_" + k1_v1_k2_v2_ + "}" */
export function taggedKeyBase(prefix: string, domain: string, entries: readonly DescriptorEntry[]): string {
  let k = prefix + '{' + domain + '_';
  for (let i = 0; i < entries.length; i++) k += entries[i]!.key + '_' + entries[i]!.value + '_';
  return k + '}';
}

const SUFFIX = ['fw:', 'sw:', 'tb:'] as const;

/** Builds the store request for one descriptor's rule. */
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

/** Where the memory backend keeps a number per key (the script uses GET/SET on the same keys). */
export interface NumberSlots {
  read(key: string): number;
  /** Adds to the number (creating it at 0) and sets its time to live. */
  add(key: string, by: number, ttlMs: number): void;
  write(key: string, value: number, ttlMs: number): void;
}

/** The script's computation, for the memory backend. Mirrors ratelimit/redis/limit-script.ts. */
export function evaluateLimitCheck(check: LimitCheck, slots: NumberSlots): LimitVerdict {
  const args = check.args;
  const keys = check.keys;
  const now = args[0]!;
  const hits = args[1]!;
  const n = (args.length - 2) / 4;
  const out: number[] = new Array<number>(1 + 2 * n);
  out[0] = 0;
  // Per limit: value to write (count or TAT), its ttl; decided in the first pass, written in the second.
  const write: number[] = new Array<number>(2 * n);
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
      write[2 * i] = hits;
      write[2 * i + 1] = period;
      k += 1;
    } else if (code === 1) {
      const cur = slots.read(keys[k]!);
      const prev = slots.read(keys[k + 1]!);
      const ws = now - (now % period);
      const elapsed = now - ws;
      const estimate = (prev * (period - elapsed)) / period + cur;
      fits = estimate + hits <= limit;
      const after = fits ? estimate + hits : estimate;
      remaining = Math.max(Math.floor(limit - after), 0);
      const curAfter = fits ? cur + hits : cur;
      reset = curAfter > 0 ? ws + 2 * period - now : prev > 0 ? ws + period - now : 0;
      write[2 * i] = hits;
      write[2 * i + 1] = ws + 2 * period - now;
      k += 2;
    } else {
      const nowUs = now * 1000;
      const stored = slots.read(keys[k]!);
      const d = stored > nowUs ? stored - nowUs : 0;
      if (limit === 0) {
        fits = hits === 0;
        remaining = 0;
        reset = 0;
        write[2 * i] = -1;
      } else {
        const t = (period * 1000) / limit;
        const after = d + hits * t;
        fits = after <= burst * t;
        const used = fits ? after : d;
        remaining = Math.min(Math.max(Math.floor(burst - used / t), 0), burst);
        reset = Math.min(Math.ceil(used / 1000), 1e13);
        write[2 * i] = nowUs + Math.floor(after);
        write[2 * i + 1] = Math.min(Math.ceil(after / 1000), 1e13);
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
      if (write[2 * i] !== -1) slots.write(keys[k]!, write[2 * i]!, write[2 * i + 1]!);
      k += 1;
    } else {
      slots.add(keys[k]!, write[2 * i]!, write[2 * i + 1]!);
      k += code === 1 ? 2 : 1;
    }
  }
  return out;
}

/** The capacity a limit's remaining counts down from (burst for a token bucket). */
export function limitCapacity(l: LimitSpec): number {
  return l.algorithm === 'token_bucket' ? l.burst : l.requestsPerUnit;
}
