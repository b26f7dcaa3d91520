// The span names, apart from the OpenTelemetry code that makes the spans, so that reading them loads none
// of it (tracing.ts is loaded only when TRACING_ENABLED is true: see index.ts).
export const SERVER_SPAN_NAME = 'envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit';
export const EXECUTION_SPAN_NAME = 'ShouldRateLimit Execution';

/** Span name of the cache call per backend, the reference's name for Redis. */
export function cacheSpanName(backendType: string): string {
  switch (backendType) {
    case 'redis':
      return 'Redis Pipeline Execution';
    case 'memcache':
      return 'Memcached Execution';
    default:
      return 'Memory Store Execution';
  }
}
