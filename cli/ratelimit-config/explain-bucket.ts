// explain --bucket: a rate limit quota BucketId (an unordered map) explained as the descriptor the quota
// server matches it as (its pairs in the tree's order, ratelimit/quota/bucket-match.ts), and, with
// --rlqs-url, the assignments a running pod currently holds for it (its debug server's /rlqs).
import { ConfigError, type DescriptorEntry, type RateLimitConfig } from '../../ratelimit/config/index.js';
import { BucketMatcher } from '../../ratelimit/quota/index.js';
import { compileSet, type ConfigSet, type Problem } from '../../control-plane/config-set/index.js';

/** `k=v,k=v` as a BucketId map; a repeated key is a usage error (a map has each key once). */
export function parseBucket(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const pair of text.split(',')) {
    const eq = pair.indexOf('=');
    if (eq <= 0 || eq === pair.length - 1) throw new Error(`--bucket ${text}: '${pair}' is not key=value`);
    const key = pair.slice(0, eq);
    if (Object.hasOwn(out, key))
      throw new Error(`--bucket ${text}: key '${key}' twice (a BucketId is a map)`);
    out[key] = pair.slice(eq + 1);
  }
  return out;
}

export interface BucketReading {
  readonly bucket: Readonly<Record<string, string>>;
  /** The descriptor the bucket is matched as; undefined when no path lists exactly its keys. */
  readonly descriptor: readonly DescriptorEntry[] | undefined;
}

/** Each bucket read in the tree's order. Throws the ConfigError of a configuration ambiguous for buckets. */
export function readBuckets(
  config: RateLimitConfig,
  domain: string,
  buckets: readonly Record<string, string>[],
): BucketReading[] {
  const matcher = new BucketMatcher(config);
  return buckets.map((bucket) => {
    const order = matcher.orderOf(domain, Object.keys(bucket));
    return { bucket, descriptor: order?.map((key) => ({ key, value: bucket[key]! })) };
  });
}

/**
 * validate: each domain a quota server would refuse (two rule paths with the same keys in different
 * orders), as a problem at the domain's first descriptor. The set must be free of errors.
 */
export function bucketProblems(set: ConfigSet, severity: Problem['severity']): Problem[] {
  const out: Problem[] = [];
  for (const d of set.domains.values()) {
    try {
      new BucketMatcher(compileSet({ ...set, domains: new Map([[d.domain, d]]) }));
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      const origin = d.origins[0];
      if (!origin) continue;
      const message =
        `domain ${d.domain}: ${err.detail}` +
        (severity === 'error' ? '' : ' (a service with RLQS_ENABLED=true refuses this config)');
      out.push({
        severity,
        file: origin.source.file,
        document: origin.source.index,
        field: origin.field,
        message,
        ...origin.source.locate(origin.field),
      });
    }
  }
  return out;
}

export function showBucket(b: Readonly<Record<string, string>>): string {
  return `{${Object.entries(b)
    .map(([k, v]) => `${k}=${v}`)
    .join(', ')}}`;
}

export function formatBucketReading(r: BucketReading): string {
  if (r.descriptor === undefined)
    return `bucket ${showBucket(r.bucket)}: no rule lists exactly these keys; the quota server assigns ALLOW_ALL\n`;
  return `bucket ${showBucket(r.bucket)}: matched as the descriptor ${r.descriptor.map((e) => `${e.key}=${e.value}`).join(',')} (the tree's order)\n`;
}

/** One subscriber of a bucket on a pod, as /rlqs reports it. */
export interface LiveSubscriber {
  stream: number;
  demand: number;
  share: number;
  sent: number;
}

interface LiveBucket {
  domain: string;
  bucket: Record<string, string>;
  rule: string | null;
  subscribers: LiveSubscriber[];
}

const sameMap = (a: Record<string, string>, b: Readonly<Record<string, string>>): boolean =>
  Object.keys(a).length === Object.keys(b).length && Object.keys(b).every((k) => a[k] === b[k]);

/** The pod's current subscribers of a bucket (none: the pod has no stream reporting it). */
export async function fetchAssignments(
  url: string,
  domain: string,
  bucket: Readonly<Record<string, string>>,
  timeoutMs: number,
): Promise<LiveSubscriber[]> {
  const res = await fetch(`${url.replace(/\/+$/, '')}/rlqs`, { signal: AbortSignal.timeout(timeoutMs) });
  if (!res.ok) throw new Error(`${url}/rlqs answered ${res.status} (is RLQS_ENABLED=true on that pod?)`);
  const body = (await res.json()) as { buckets?: LiveBucket[] };
  const found = (body.buckets ?? []).find((b) => b.domain === domain && sameMap(b.bucket, bucket));
  return found?.subscribers ?? [];
}

export function formatAssignments(url: string, subs: readonly LiveSubscriber[]): string {
  if (subs.length === 0)
    return `  current assignments on ${url}: none (no stream on that pod reports this bucket)\n`;
  const lines = subs.map(
    (s) =>
      `    stream ${s.stream}: demand ${s.demand.toFixed(2)}/s, share ${s.share.toFixed(2)}/s, last sent ${s.sent.toFixed(2)}/s`,
  );
  return `  current assignments on ${url}:\n${lines.join('\n')}\n`;
}
