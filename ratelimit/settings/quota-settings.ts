// The rate limit quota server's settings (RLQS_*) and their checks. Part of the one Settings object
// (settings.ts), which calls quotaSettings.
import { EnvReader, SettingsError } from './env.js';

export interface QuotaSettings {
  /** RLQS_ENABLED: serve StreamRateLimitQuotas on the gRPC port (and check configs for ambiguous buckets). */
  enabled: boolean;
  /** RLQS_REPORTING_INTERVAL: the Envoys' reporting_interval; the fleet window, and the TTL basis until a stream's own is seen. */
  reportingIntervalMs: number;
  /** RLQS_ASSIGNMENT_TTL_INTERVALS: an assignment's time to live, in reporting intervals. */
  ttlIntervals: number;
  /** RLQS_REASSIGN_THRESHOLD_PERCENT: a share that moved less than this is not pushed again. */
  reassignThresholdPercent: number;
  /** RLQS_DEMAND_SMOOTHING: weight of the newest report in a subscriber's demand (1: no smoothing); a report below its share and demand is taken whole. */
  demandSmoothing: number;
  /** RLQS_IDLE_TIMEOUT: a bucket a stream has not reported for this long is abandoned. */
  idleTimeoutMs: number;
  /** RLQS_EXPECTED_PODS: while the fleet totals cannot be read, a pod assigns budget / this. */
  expectedPods: number;
  /** RLQS_MAX_STREAMS: streams open at once on a pod. */
  maxStreams: number;
  /** RLQS_MAX_BUCKETS_PER_STREAM: buckets one stream may report. */
  maxBucketsPerStream: number;
  /** RLQS_MAX_REPORTS_PER_MESSAGE: bucket usages in one report message. */
  maxReportsPerMessage: number;
  /** RLQS_MAX_BUCKETS: distinct buckets a pod tracks at once. */
  maxBuckets: number;
  /** RLQS_MAX_BUCKET_BYTES_PER_STREAM: UTF-8 bytes of the bucket ids (domain, keys, values) one stream reports. */
  maxBucketBytesPerStream: number;
  /** RLQS_MAX_BUCKET_BYTES: UTF-8 bytes of the distinct bucket ids a pod tracks at once. */
  maxBucketBytes: number;
  /** RLQS_SEND_TIMEOUT: a stream whose client takes none of its queued responses for this long is ended. */
  sendTimeoutMs: number;
}

/** The RLQS_* group: parsed on its own so the Settings object can be regrouped around it. */
export function quotaSettings(r: EnvReader): QuotaSettings {
  const q: QuotaSettings = {
    enabled: r.bool('RLQS_ENABLED', false),
    reportingIntervalMs: r.durationMs('RLQS_REPORTING_INTERVAL', 5000),
    ttlIntervals: r.int('RLQS_ASSIGNMENT_TTL_INTERVALS', 3, { min: 1, max: 100 }),
    reassignThresholdPercent: r.float('RLQS_REASSIGN_THRESHOLD_PERCENT', 5, { min: 0, max: 100 }),
    demandSmoothing: r.float('RLQS_DEMAND_SMOOTHING', 0.7, { min: 0.01, max: 1 }),
    idleTimeoutMs: r.durationMs('RLQS_IDLE_TIMEOUT', 60_000),
    expectedPods: r.int('RLQS_EXPECTED_PODS', 1, { min: 1 }),
    maxStreams: r.int('RLQS_MAX_STREAMS', 10_000, { min: 1 }),
    maxBucketsPerStream: r.int('RLQS_MAX_BUCKETS_PER_STREAM', 1000, { min: 1 }),
    maxReportsPerMessage: r.int('RLQS_MAX_REPORTS_PER_MESSAGE', 1000, { min: 1 }),
    maxBuckets: r.int('RLQS_MAX_BUCKETS', 100_000, { min: 1 }),
    maxBucketBytesPerStream: r.int('RLQS_MAX_BUCKET_BYTES_PER_STREAM', 1024 * 1024, { min: 1 }),
    maxBucketBytes: r.int('RLQS_MAX_BUCKET_BYTES', 64 * 1024 * 1024, { min: 1 }),
    sendTimeoutMs: r.durationMs('RLQS_SEND_TIMEOUT', 30_000),
  };
  if (q.sendTimeoutMs < 100) {
    throw new SettingsError('RLQS_SEND_TIMEOUT', `must be at least 100ms, got ${q.sendTimeoutMs}ms`);
  }
  if (q.reportingIntervalMs < 40 || q.reportingIntervalMs > 3_600_000) {
    throw new SettingsError(
      'RLQS_REPORTING_INTERVAL',
      `must be between 40ms and 1h, got ${q.reportingIntervalMs}ms`,
    );
  }
  if (q.idleTimeoutMs < q.reportingIntervalMs) {
    throw new SettingsError(
      'RLQS_IDLE_TIMEOUT',
      `must be at least RLQS_REPORTING_INTERVAL (${q.reportingIntervalMs}ms), got ${q.idleTimeoutMs}ms`,
    );
  }
  return q;
}
