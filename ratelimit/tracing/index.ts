// Public face of tracing/: the span names, the tracing's types, and loadTracing, which loads OpenTelemetry
// (tracing.ts and the SDK, exporters and their gRPC and protobuf code) only when TRACING_ENABLED is true.
// Loaded at start regardless, those modules were about 4 MB of the service's ~18 MB of heap after its
// imports, which every major GC marks again while the service decides.
import type { Settings } from '../settings/index.js';
import type { RateLimitTracing, TracingDeps } from './tracing.js';

export { SERVER_SPAN_NAME, EXECUTION_SPAN_NAME, cacheSpanName } from './names.js';
export type { MetadataCarrier, RateLimitTracing, RateLimitTracingOptions, TracingDeps } from './tracing.js';

/** The tracing for these settings, or undefined (and nothing loaded) when TRACING_ENABLED is false. */
export async function loadTracing(
  settings: Settings['tracing'],
  deps: TracingDeps = {},
): Promise<RateLimitTracing | undefined> {
  if (!settings.enabled) return undefined;
  const { createTracing } = await import('./tracing.js');
  return createTracing(settings, deps);
}
