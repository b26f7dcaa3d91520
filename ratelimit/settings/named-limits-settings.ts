// The named-limits settings (NAMED_LIMITS_*): which named limit decided, in headers, metadata, logs and
// statistics. Part of the one Settings object (settings.ts), which calls namedLimitsSettings.
import { EnvReader } from './env.js';

export interface NamedLimitsSettings {
  /** NAMED_LIMITS_IETF_HEADERS: add the IETF RateLimit-Policy and RateLimit response headers. */
  ietfHeaders: boolean;
  /** NAMED_LIMITS_DYNAMIC_METADATA: add `namedLimits` (one struct per descriptor) to dynamic metadata. */
  dynamicMetadata: boolean;
  /** NAMED_LIMITS_STATS_MAX_SERIES: distinct limit names given an over_limit series (0: none). */
  statsMaxSeries: number;
  /** NAMED_LIMITS_LOG_ENABLED: log over-limit decisions at info. */
  logEnabled: boolean;
  /** NAMED_LIMITS_LOG_SAMPLE_RATE: the share of over-limit decisions considered for a line. */
  logSampleRate: number;
  /** NAMED_LIMITS_LOG_MAX_PER_SECOND: lines written per second at most (a token bucket). */
  logMaxPerSecond: number;
  /** NAMED_LIMITS_LOG_REDACT_KEYS: descriptor keys whose values are logged as <redacted>. */
  logRedactKeys: string[];
  /** NAMED_LIMITS_LOG_MAX_VALUE_BYTES: a longer descriptor value is cut to this many bytes in a line. */
  logMaxValueBytes: number;
}

export function namedLimitsSettings(r: EnvReader): NamedLimitsSettings {
  return {
    ietfHeaders: r.bool('NAMED_LIMITS_IETF_HEADERS', false),
    dynamicMetadata: r.bool('NAMED_LIMITS_DYNAMIC_METADATA', false),
    statsMaxSeries: r.int('NAMED_LIMITS_STATS_MAX_SERIES', 1000, { min: 0, max: 1_000_000 }),
    logEnabled: r.bool('NAMED_LIMITS_LOG_ENABLED', false),
    logSampleRate: r.float('NAMED_LIMITS_LOG_SAMPLE_RATE', 1, { min: 0, max: 1 }),
    logMaxPerSecond: r.int('NAMED_LIMITS_LOG_MAX_PER_SECOND', 10, { min: 1, max: 100_000 }),
    logRedactKeys: r.list('NAMED_LIMITS_LOG_REDACT_KEYS'),
    logMaxValueBytes: r.int('NAMED_LIMITS_LOG_MAX_VALUE_BYTES', 128, { min: 1, max: 65_536 }),
  };
}
