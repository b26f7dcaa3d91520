// The per-descriptor limit script: every limit of one descriptor checked and, when all admit the
// hit, counted, atomically in one call; negative hits are a refund, returned to every limit. A fixed
// window's refund runs it too, on the reference's key (the script touches only the keys it is given). Semantics, key layout and argument layout are documented in
// ratelimit/counting/algorithms.ts, whose evaluateLimitCheck is the same computation in TypeScript
// (for the memory backend); change both together.
//
// Loaded once per connection by ioredis (the first call on a connection sends EVAL, later calls
// EVALSHA; a NOSCRIPT answer, after SCRIPT FLUSH or a failover, resends it as EVAL).
// Redis numbers returned from Lua are truncated to integers: every value computed here is an integer
// already (exact arithmetic, see algorithms.ts). The TAT is written as "W:R:r" with %.0f (integer-valued
// doubles below 2^53, printed exactly); a TAT in whole µs left by an earlier version is read rounded up
// to the next ms, so an upgrade never makes a bucket more lenient.
import type { LimitCheck } from '../counting/index.js';
import type { RedisClient } from './client-options.js';

export const LIMIT_SCRIPT = `
local quot, rem
local function div_mod(x, d)
  local q = math.floor(x / d)
  local r = x - q * d
  if r < 0 then
    q = q - 1
    r = r + d
  elseif r >= d then
    q = q + 1
    r = r - d
  end
  quot = q
  rem = r
end
local function mul_div_mod(a, b, d)
  local p = a * b
  if p <= 9007199254740991 then
    div_mod(p, d)
    return
  end
  local lo = b % 65536
  local hi = (b - lo) / 65536
  div_mod(a * lo, d)
  local q1 = quot
  local r1 = rem
  div_mod(a * hi, d)
  local q2 = quot
  div_mod(rem * 65536, d)
  local q = q1 + q2 * 65536 + quot
  local r = r1 + rem
  if r >= d then
    q = q + 1
    r = r - d
  end
  quot = q
  rem = r
end
local function hits_covering(ms, ticks, rate, period, burst)
  local k = math.min(math.max(math.ceil((ms * rate + ticks) / period), 0), burst)
  while true do
    if k <= 0 then return 0 end
    mul_div_mod(k - 1, period, rate)
    if quot > ms or (quot == ms and rem >= ticks) then k = k - 1 else break end
  end
  while true do
    if k >= burst then return burst end
    mul_div_mod(k, period, rate)
    if quot < ms or (quot == ms and rem < ticks) then k = k + 1 else return k end
  end
end
-- ms until a bucket with debt (ms, ticks) covering k hits holds one more (bucketMoreMs in algorithms.ts)
local function bucket_more(ms, ticks, rate, period, k)
  if k <= 0 then return 0 end
  mul_div_mod(k - 1, period, rate)
  local d = ms - quot
  if ticks > rem then d = d + 1 end
  return math.min(d, 1e13)
end
-- ms until a sliding window has more than remaining left (slidingMoreMs in algorithms.ts)
local function sliding_more(cur, prev, limit, period, elapsed, remaining)
  if remaining >= limit then return 0 end
  local target = limit - cur - remaining - 1
  if prev > 0 and target >= 0 then
    mul_div_mod(target, period, prev)
    return period - quot - elapsed
  end
  mul_div_mod(limit - remaining - 1, period, cur)
  return period - elapsed + math.max(period - quot, 0)
end
local now = tonumber(ARGV[1])
local hits = tonumber(ARGV[2])
local n = (#ARGV - 2) / 4
-- A bucket's debt max(tat - now, 0) as ms + ticks of 1/limit ms.
local function bucket_debt(key, limit)
  local stored = redis.call('GET', key)
  if not stored then return 0, 0 end
  local w, r, den = string.match(stored, '^(%d+):(%d+):(%d+)$')
  if w then
    w = tonumber(w)
    r = tonumber(r)
    if tonumber(den) ~= limit and r > 0 then
      w = w + 1
      r = 0
    end
  else
    -- a TAT in whole µs (written by an earlier version): rounded up to whole ms
    w = math.ceil((tonumber(stored) or 0) / 1000)
    r = 0
  end
  if w >= now then return w - now, r end
  return 0, 0
end
if hits < 0 then
  -- A refund of -hits to every limit, each clamped to what it holds (refundLimitCheck in algorithms.ts).
  local r = -hits
  local out = {0}
  local k = 1
  for i = 1, n do
    local a = 2 + (i - 1) * 4
    local code = tonumber(ARGV[a + 1])
    local limit = tonumber(ARGV[a + 2])
    local period = tonumber(ARGV[a + 3])
    local burst = tonumber(ARGV[a + 4])
    local remaining
    local reset
    if code == 0 then
      local count = tonumber(redis.call('GET', KEYS[k]) or '0')
      local take = math.min(count, r)
      if take > 0 then redis.call('DECRBY', KEYS[k], take) end
      remaining = math.max(limit - (count - take), 0)
      reset = period - (now % period)
      if count - take > 0 then out[2 * n + 1 + i] = reset else out[2 * n + 1 + i] = 0 end
      k = k + 1
    elseif code == 1 then
      local cur = tonumber(redis.call('GET', KEYS[k]) or '0')
      local prev = tonumber(redis.call('GET', KEYS[k + 1]) or '0')
      local fromCur = math.min(cur, r)
      local fromPrev = math.min(prev, r - fromCur)
      if fromCur > 0 then redis.call('DECRBY', KEYS[k], fromCur) end
      if fromPrev > 0 then redis.call('DECRBY', KEYS[k + 1], fromPrev) end
      cur = cur - fromCur
      prev = prev - fromPrev
      local ws = now - (now % period)
      mul_div_mod(prev, period - (now - ws), period)
      local weighted = quot
      if rem > 0 then weighted = weighted + 1 end
      remaining = math.max(limit - cur - weighted, 0)
      if cur > 0 then
        reset = ws + 2 * period - now
      elseif prev > 0 then
        reset = ws + period - now
      else
        reset = 0
      end
      out[2 * n + 1 + i] = sliding_more(cur, prev, limit, period, now - ws, remaining)
      k = k + 2
    else
      local dMs = 0
      local dTicks = 0
      if limit ~= 0 then dMs, dTicks = bucket_debt(KEYS[k], limit) end
      if dMs > 0 or dTicks > 0 then
        mul_div_mod(math.min(r, burst), period, limit)
        if dMs > quot or (dMs == quot and dTicks > rem) then
          dMs = dMs - quot
          dTicks = dTicks - rem
          if dTicks < 0 then
            dMs = dMs - 1
            dTicks = dTicks + limit
          end
        else
          dMs = 0
          dTicks = 0
        end
        local ttl = dMs
        if dTicks > 0 then ttl = ttl + 1 end
        ttl = math.min(math.max(ttl, 1000), 1e13)
        local v = string.format('%.0f:%.0f:%.0f', now + dMs, dTicks, limit)
        redis.call('SET', KEYS[k], v, 'PX', string.format('%.0f', ttl))
      end
      if limit == 0 then
        remaining = 0
        out[2 * n + 1 + i] = 0
      else
        local covering = hits_covering(dMs, dTicks, limit, period, burst)
        remaining = burst - covering
        out[2 * n + 1 + i] = bucket_more(dMs, dTicks, limit, period, covering)
      end
      reset = dMs
      if dTicks > 0 then reset = reset + 1 end
      reset = math.min(reset, 1e13)
      k = k + 1
    end
    out[2 * i] = remaining
    out[2 * i + 1] = reset
  end
  return out
end
local out = {0}
local wv = {}
local wr = {}
local wt = {}
local k = 1
for i = 1, n do
  local a = 2 + (i - 1) * 4
  local code = tonumber(ARGV[a + 1])
  local limit = tonumber(ARGV[a + 2])
  local period = tonumber(ARGV[a + 3])
  local burst = tonumber(ARGV[a + 4])
  local fits
  local remaining
  local reset
  if code == 0 then
    local count = tonumber(redis.call('GET', KEYS[k]) or '0')
    local ws = now - (now % period)
    fits = count + hits <= limit
    local after = count
    if fits then after = count + hits end
    remaining = math.max(limit - after, 0)
    reset = ws + period - now
    if after > 0 then out[2 * n + 1 + i] = reset else out[2 * n + 1 + i] = 0 end
    wv[i] = hits
    wt[i] = period
    k = k + 1
  elseif code == 1 then
    local cur = tonumber(redis.call('GET', KEYS[k]) or '0')
    local prev = tonumber(redis.call('GET', KEYS[k + 1]) or '0')
    local ws = now - (now % period)
    local elapsed = now - ws
    mul_div_mod(prev, period - elapsed, period)
    local weighted = quot
    if rem > 0 then weighted = weighted + 1 end
    fits = weighted <= limit - cur - hits
    local curAfter = cur
    local counted = 0
    if fits then
      curAfter = cur + hits
      counted = hits
    end
    remaining = math.max(limit - cur - counted - weighted, 0)
    if curAfter > 0 then
      reset = ws + 2 * period - now
    elseif prev > 0 then
      reset = ws + period - now
    else
      reset = 0
    end
    out[2 * n + 1 + i] = sliding_more(curAfter, prev, limit, period, elapsed, remaining)
    wv[i] = hits
    wt[i] = ws + 2 * period - now
    k = k + 2
  else
    wv[i] = -1
    if limit == 0 then
      fits = hits == 0
      remaining = 0
      reset = 0
      out[2 * n + 1 + i] = 0
    else
      local dMs, dTicks = bucket_debt(KEYS[k], limit)
      local usedMs = dMs
      local usedTicks = dTicks
      if hits > burst then
        fits = false
      else
        mul_div_mod(hits, period, limit)
        local aMs = dMs + quot
        local aTicks = dTicks + rem
        if aTicks >= limit then
          aMs = aMs + 1
          aTicks = aTicks - limit
        end
        mul_div_mod(burst, period, limit)
        fits = aMs < quot or (aMs == quot and aTicks <= rem)
        if fits then
          usedMs = aMs
          usedTicks = aTicks
          wv[i] = now + aMs
          wr[i] = aTicks
          local ttl = aMs
          if aTicks > 0 then ttl = ttl + 1 end
          wt[i] = math.min(math.max(ttl, 1000), 1e13)
        end
      end
      local covering = hits_covering(usedMs, usedTicks, limit, period, burst)
      remaining = burst - covering
      out[2 * n + 1 + i] = bucket_more(usedMs, usedTicks, limit, period, covering)
      reset = usedMs
      if usedTicks > 0 then reset = reset + 1 end
      reset = math.min(reset, 1e13)
    end
    k = k + 1
  end
  if (not fits) and out[1] == 0 then out[1] = i end
  out[2 * i] = remaining
  out[2 * i + 1] = reset
end
if out[1] ~= 0 or hits == 0 then return out end
k = 1
for i = 1, n do
  local a = 2 + (i - 1) * 4
  local code = tonumber(ARGV[a + 1])
  if code == 2 then
    if wv[i] ~= -1 then
      local v = string.format('%.0f:%.0f:%.0f', wv[i], wr[i], tonumber(ARGV[a + 2]))
      redis.call('SET', KEYS[k], v, 'PX', string.format('%.0f', wt[i]))
    end
    k = k + 1
  else
    redis.call('INCRBY', KEYS[k], wv[i])
    redis.call('PEXPIRE', KEYS[k], wt[i])
    if code == 1 then k = k + 2 else k = k + 1 end
  end
end
return out
`;

/** The client with the script defined on it (defineLimitScript). */
interface ScriptClient {
  rateLimitScript(numKeys: number, ...keysAndArgs: (string | number)[]): Promise<unknown>;
}

/** Defines the script as a command of the client (ioredis keeps one Script, loaded per connection). */
export function defineLimitScript(client: RedisClient): void {
  client.defineCommand('rateLimitScript', { lua: LIMIT_SCRIPT });
}

/** The script for one check through ioredis (EVALSHA, or EVAL on NOSCRIPT); on a cluster, to its keys' node. */
export function runLimitScript(client: RedisClient, check: LimitCheck): Promise<unknown> {
  return (client as unknown as ScriptClient).rateLimitScript(check.keys.length, ...check.keys, ...check.args);
}
