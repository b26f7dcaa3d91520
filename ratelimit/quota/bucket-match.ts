// BucketId -> rule. A BucketId is an unordered map; the descriptor tree is ordered. A bucket is matched
// as the descriptor whose entries are the map's pairs in the order of the tree's path that lists
// exactly the map's keys, so the service's own matcher (getLimit: exact value, then wildcard, then
// key-only entries) decides, and no second matching language exists.
//
// Ambiguous: two entries with a rule, in one domain, whose key paths hold the same set of keys in
// different orders (`a -> b` and `b -> a`): a map {a, b} could be read either way. Such a config is
// refused (ConfigError) when RLQS is on. A path that repeats a key (`a -> a`) cannot be written as a
// map and is never reached by a bucket.
import { ConfigError, type DescriptorEntry, type LimitMatch, type RateLimitConfig } from '../config/model.js';

/** A bucket's identity: its domain and its pairs sorted by key (a map's order carries no meaning). */
export function bucketKey(domain: string, bucket: Readonly<Record<string, string>>): string {
  const keys = Object.keys(bucket).sort();
  const parts: string[] = [domain];
  for (const k of keys) parts.push(k, bucket[k]!);
  return JSON.stringify(parts);
}

function keySetOf(keys: readonly string[]): string {
  return JSON.stringify([...keys].sort());
}

export class BucketMatcher {
  /** Per domain: key set -> the keys in the tree's order. */
  private readonly orders = new Map<string, Map<string, readonly string[]>>();

  /** Throws ConfigError naming the two paths when a domain is ambiguous for buckets. */
  constructor(readonly config: RateLimitConfig) {
    for (const domain of config.domains) {
      const byKeys = new Map<string, readonly string[]>();
      for (const path of config.ruleKeyPaths(domain)) {
        if (new Set(path).size !== path.length) continue;
        const set = keySetOf(path);
        const seen = byKeys.get(set);
        if (seen === undefined) byKeys.set(set, path);
        else if (seen.join('\0') !== path.join('\0')) {
          throw new ConfigError(
            domain,
            'descriptors',
            `ambiguous for rate limit quota buckets: the paths ${seen.join(' -> ')} and ${path.join(' -> ')} ` +
              'have the same keys in different orders, so a bucket with these keys could match either',
          );
        }
      }
      this.orders.set(domain, byKeys);
    }
  }

  /** The rule of a bucket, or undefined when no rule has these keys (or the values match none). */
  match(domain: string, bucket: Readonly<Record<string, string>>): LimitMatch | undefined {
    const order = this.orders.get(domain)?.get(keySetOf(Object.keys(bucket)));
    if (order === undefined) return undefined;
    const entries: DescriptorEntry[] = order.map((key) => ({ key, value: bucket[key]! }));
    return this.config.getLimit(domain, { entries });
  }

  /** The key order a bucket with these keys is matched in, if any (explain, docs). */
  orderOf(domain: string, keys: readonly string[]): readonly string[] | undefined {
    return this.orders.get(domain)?.get(keySetOf(keys));
  }
}
