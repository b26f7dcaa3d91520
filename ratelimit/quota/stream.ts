// One StreamRateLimitQuotas call: validates each report message (domain, bucket ids, bounds) before
// any of it is applied, so a bad message is that stream's INVALID_ARGUMENT and changes nothing.
// Envoy sends the domain in the first message only; a later message may repeat it but not change it.
import type { RequestBounds, WireBucketQuotaUsage, WireUsageReports } from '../../proto/index.js';
import type { QuotaSettings } from '../settings/index.js';

/** A report validated and reduced to what the allocator needs. */
export interface Usage {
  readonly bucket: Readonly<Record<string, string>>;
  readonly elapsedSeconds: number;
  readonly allowed: number;
  readonly denied: number;
}

/** A caller's bad message: ends its stream with INVALID_ARGUMENT (or `code`). */
export class StreamError extends Error {
  constructor(
    message: string,
    readonly code: 'invalid' | 'exhausted' = 'invalid',
  ) {
    super(message);
    this.name = 'StreamError';
  }
}

const utf8Bytes = (s: string): number => Buffer.byteLength(s, 'utf8');

/** Checks one message against the stream's domain and the bounds; returns its domain and usages. */
export function readReports(
  msg: WireUsageReports,
  streamDomain: string | undefined,
  q: QuotaSettings,
  bounds: RequestBounds,
): { domain: string; usages: Usage[] } {
  const domain = msg.domain ?? '';
  if (streamDomain === undefined && domain === '') {
    throw new StreamError('the first RateLimitQuotaUsageReports of a stream must name its domain');
  }
  if (streamDomain !== undefined && domain !== '' && domain !== streamDomain) {
    throw new StreamError(
      `domain changed from '${streamDomain}' to '${domain}': a stream serves one domain (open another stream)`,
    );
  }
  if (utf8Bytes(domain) > bounds.maxKeyBytes) {
    throw new StreamError(`domain longer than ${bounds.maxKeyBytes} bytes (REQUEST_MAX_KEY_BYTES)`);
  }
  const list = msg.bucketQuotaUsages ?? [];
  if (list.length > q.maxReportsPerMessage) {
    throw new StreamError(
      `${list.length} bucket_quota_usages in one message, more than ${q.maxReportsPerMessage} (RLQS_MAX_REPORTS_PER_MESSAGE)`,
    );
  }
  const usages: Usage[] = [];
  for (let i = 0; i < list.length; i++) usages.push(readUsage(list[i]!, i, bounds));
  return { domain: streamDomain ?? domain, usages };
}

function readUsage(u: WireBucketQuotaUsage, i: number, bounds: RequestBounds): Usage {
  const field = `bucket_quota_usages[${i}]`;
  const bucket = u.bucketId?.bucket ?? {};
  const keys = Object.keys(bucket);
  if (keys.length === 0)
    throw new StreamError(`${field}.bucket_id is empty: a BucketId needs at least one pair`);
  if (keys.length > bounds.maxEntries) {
    throw new StreamError(
      `${field}.bucket_id has ${keys.length} pairs, more than ${bounds.maxEntries} (REQUEST_MAX_DESCRIPTOR_ENTRIES)`,
    );
  }
  for (const k of keys) {
    const v = bucket[k]!;
    if (k === '' || v === '') throw new StreamError(`${field}.bucket_id has an empty key or value`);
    if (utf8Bytes(k) > bounds.maxKeyBytes)
      throw new StreamError(
        `${field}.bucket_id key longer than ${bounds.maxKeyBytes} bytes (REQUEST_MAX_KEY_BYTES)`,
      );
    if (utf8Bytes(v) > bounds.maxValueBytes)
      throw new StreamError(
        `${field}.bucket_id value longer than ${bounds.maxValueBytes} bytes (REQUEST_MAX_VALUE_BYTES)`,
      );
  }
  const t = u.timeElapsed;
  const elapsed = t ? Number(t.seconds ?? 0) + Number(t.nanos ?? 0) / 1e9 : 0;
  // Envoy's first report of a new bucket may carry 0 (it is sent as the bucket is created): allowed, and
  // read as a subscription without a rate (server.ts).
  if (!(elapsed >= 0) || !Number.isFinite(elapsed)) {
    throw new StreamError(`${field}.time_elapsed must not be negative`);
  }
  const allowed = Number(u.numRequestsAllowed ?? 0);
  const denied = Number(u.numRequestsDenied ?? 0);
  if (!Number.isFinite(allowed) || !Number.isFinite(denied) || allowed < 0 || denied < 0) {
    throw new StreamError(`${field}: request counts out of range`);
  }
  // A plain copy: the decoded map may carry a prototype protobufjs set up.
  const copy: Record<string, string> = {};
  for (const k of keys) copy[k] = bucket[k]!;
  return { bucket: copy, elapsedSeconds: elapsed, allowed, denied };
}
