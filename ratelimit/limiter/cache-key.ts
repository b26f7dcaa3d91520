// Cache keys byte-compatible with the reference service:
//   prefix + domain + "_" + (key + "_" + value + "_") for each entry + windowStart
// where windowStart = floor(now / unitSeconds) * unitSeconds (fixed windows aligned to the epoch).
import type { DescriptorEntry } from '../config/index.js';

export function cacheKeyBase(prefix: string, domain: string, entries: readonly DescriptorEntry[]): string {
  let k = prefix + domain + '_';
  for (let i = 0; i < entries.length; i++) k += entries[i].key + '_' + entries[i].value + '_';
  return k;
}

export function windowStart(nowSeconds: number, unitSeconds: number): number {
  return Math.floor(nowSeconds / unitSeconds) * unitSeconds;
}

export function cacheKey(
  prefix: string,
  domain: string,
  entries: readonly DescriptorEntry[],
  unitSeconds: number,
  nowSeconds: number,
): string {
  return cacheKeyBase(prefix, domain, entries) + windowStart(nowSeconds, unitSeconds);
}
