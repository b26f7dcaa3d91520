// OpenTelemetry tracing for ShouldRateLimit, as the reference does it (src/trace/trace.go):
// OTLP over http (protobuf) or grpc, endpoint and headers from the standard OTEL_EXPORTER_OTLP_*
// variables, a parent-based ratio sampler, W3C trace context, Zipkin B3 (b3.ts) and baggage from
// incoming gRPC metadata. Spans per call:
//   envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit   (server, parent from metadata)
//     └ ShouldRateLimit Execution                                    (domain, request string)
//         └ Redis Pipeline Execution | Memory Store Execution | ...  (one per counter store call)
// When TRACING_ENABLED is false none of this is constructed and the gRPC handler takes its plain
// path: no span objects, no context work. A call that is not sampled gets one non-recording span
// and nothing else.
//
// The cache span finds its parent without AsyncLocalStorage: on Node 20, AsyncLocalStorage turns on
// promise hooks that slow every promise in the process. The limiter
// calls the store synchronously within the first turn of a decision, so the execution context is
// set around that synchronous part and read by the store wrapper. A store call made after an await
// (the second round trip of STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT) gets no span rather than a
// wrong parent.
import { randomUUID } from 'node:crypto';
import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Context,
  type Span,
  type TextMapGetter,
  type TextMapPropagator,
  type Tracer,
} from '@opentelemetry/api';
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter as OtlpGrpcExporter } from '@opentelemetry/exporter-trace-otlp-grpc';
import { OTLPTraceExporter as OtlpHttpExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { defaultResource, resourceFromAttributes } from '@opentelemetry/resources';
import {
  BatchSpanProcessor,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  TracerProvider,
  type SpanExporter,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace';
import type { Logger } from '../../common/index.js';
import type { CounterOp, CounterStore, LimitCheck, LimitVerdict } from '../counting/index.js';
import type { Settings } from '../settings/index.js';

import { B3Propagator, hasB3 } from './b3.js';
import { EXECUTION_SPAN_NAME, SERVER_SPAN_NAME } from './names.js';

/** What the tracer needs from grpc-js Metadata (or any header bag). */
export interface MetadataCarrier {
  get(key: string): (string | Buffer)[];
  getMap(): Record<string, string | Buffer>;
}

const metadataGetter: TextMapGetter<MetadataCarrier> = {
  keys: (carrier) => Object.keys(carrier.getMap()),
  get: (carrier, key) => {
    const values = carrier.get(key);
    if (values.length === 0) return undefined;
    return values.length === 1 ? String(values[0]) : values.map(String);
  },
};

export interface RateLimitTracingOptions {
  settings: Settings['tracing'];
  logger?: Logger;
  /** Replaces the OTLP exporter (tests). */
  exporter?: SpanExporter;
  /** Replaces the batch processor around the exporter (tests). */
  spanProcessor?: SpanProcessor;
}

export class RateLimitTracing {
  readonly tracer: Tracer;
  readonly serviceInstanceId: string;
  private readonly provider: TracerProvider;
  private readonly propagator: TextMapPropagator;
  /** The execution span's context while a decision runs its synchronous part (see above). */
  private current: Context | undefined;
  private readonly neverSampleRoots: boolean;

  constructor(opts: RateLimitTracingOptions) {
    const s = opts.settings;
    this.serviceInstanceId = s.serviceInstanceId || randomUUID();
    this.neverSampleRoots = s.samplingRate <= 0;
    const attributes: Record<string, string> = {
      'service.name': s.serviceName,
      'service.instance.id': this.serviceInstanceId,
    };
    if (s.serviceNamespace) attributes['service.namespace'] = s.serviceNamespace;
    const exporter =
      opts.exporter ?? (s.exporterProtocol === 'grpc' ? new OtlpGrpcExporter() : new OtlpHttpExporter());
    this.provider = new TracerProvider({
      resource: defaultResource().merge(resourceFromAttributes(attributes)),
      // Follow the caller's sampling decision; sample new traces at TRACING_SAMPLING_RATE.
      sampler: new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(s.samplingRate) }),
      spanProcessors: [opts.spanProcessor ?? new BatchSpanProcessor({ exporter })],
    });
    this.tracer = this.provider.getTracer('envoy-ratelimit-ts');
    this.propagator = new CompositePropagator({
      // The reference's order: a valid B3 context replaces a traceparent one.
      propagators: [new W3CTraceContextPropagator(), new B3Propagator(), new W3CBaggagePropagator()],
    });
    opts.logger?.info(
      `TracerProvider initialized with following parameters: protocol: ${s.exporterProtocol}, serviceName: ${s.serviceName}, ` +
        `serviceNamespace: ${s.serviceNamespace}, serviceInstanceId: ${this.serviceInstanceId}, samplingRate: ${s.samplingRate}`,
    );
  }

  /** The trace context carried by incoming gRPC metadata (traceparent, tracestate, B3, baggage). */
  extract(metadata: MetadataCarrier | undefined): Context {
    return metadata ? this.propagator.extract(ROOT_CONTEXT, metadata, metadataGetter) : ROOT_CONTEXT;
  }

  /** Runs one ShouldRateLimit call inside its server and execution spans. */
  async traceShouldRateLimit<T>(
    metadata: MetadataCarrier | undefined,
    request: { domain?: string },
    fn: () => Promise<T>,
  ): Promise<T> {
    if (
      this.neverSampleRoots &&
      (metadata === undefined || (metadata.get('traceparent').length === 0 && !hasB3((k) => metadata.get(k))))
    ) {
      return fn(); // TRACING_SAMPLING_RATE=0 and no caller trace: nothing will be recorded.
    }
    const parent = this.extract(metadata);
    const server = this.tracer.startSpan(
      SERVER_SPAN_NAME,
      {
        kind: SpanKind.SERVER,
        attributes: {
          'rpc.system': 'grpc',
          'rpc.service': 'envoy.service.ratelimit.v3.RateLimitService',
          'rpc.method': 'ShouldRateLimit',
        },
      },
      parent,
    );
    if (!server.isRecording()) {
      // Not sampled, so no child would be either.
      try {
        return await fn();
      } finally {
        server.end();
      }
    }
    const serverCtx = trace.setSpan(parent, server);
    const exec = this.tracer.startSpan(
      EXECUTION_SPAN_NAME,
      { attributes: { domain: request.domain ?? '', 'request string': JSON.stringify(request) } },
      serverCtx,
    );
    const execCtx = trace.setSpan(serverCtx, exec);
    try {
      let pending: Promise<T>;
      const outer = this.current;
      this.current = execCtx;
      try {
        pending = fn();
      } finally {
        this.current = outer;
      }
      const result = await pending;
      server.setAttribute('rpc.grpc.status_code', 0);
      return result;
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      if (typeof code === 'number') server.setAttribute('rpc.grpc.status_code', code);
      for (const span of [exec, server]) {
        span.recordException(err as Error);
        span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error)?.message });
      }
      throw err;
    } finally {
      exec.end();
      server.end();
    }
  }

  /** Runs fn inside a child span of the current call, if there is one. */
  async inChildSpan<T>(
    name: string,
    attributes: Record<string, number | string>,
    fn: () => Promise<T>,
  ): Promise<T> {
    const parent = this.current;
    if (!parent) return fn();
    const span: Span = this.tracer.startSpan(name, { attributes }, parent);
    try {
      return await fn();
    } catch (err) {
      span.recordException(err as Error);
      span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error)?.message });
      throw err;
    } finally {
      span.end();
    }
  }

  /** A counter store whose calls show up as child spans named `spanName`. */
  wrapStore(store: CounterStore, spanName: string): CounterStore {
    return new TracedCounterStore(store, this, spanName);
  }

  /** Sends what is buffered. */
  forceFlush(): Promise<void> {
    return this.provider.forceFlush();
  }

  /** Flushes and stops the exporter. */
  async close(): Promise<void> {
    await this.provider.shutdown();
  }
}

function pipelineAttributes(ops: readonly CounterOp[]): Record<string, number> {
  let perSecond = 0;
  for (const op of ops) if (op.perSecond) perSecond++;
  return { 'pipeline length': ops.length - perSecond, 'perSecondPipeline length': perSecond };
}

/** Decorates the limiter's store; the app keeps the undecorated one for start/health/close. */
class TracedCounterStore implements CounterStore {
  readonly evaluate?: (checks: readonly LimitCheck[]) => Promise<LimitVerdict[]>;

  constructor(
    private readonly inner: CounterStore,
    private readonly tracing: RateLimitTracing,
    private readonly spanName: string,
  ) {
    if (inner.evaluate) {
      this.evaluate = (checks) =>
        this.tracing.inChildSpan(this.spanName, { 'limit checks': checks.length }, () =>
          inner.evaluate!(checks),
        );
    }
  }

  increment(ops: readonly CounterOp[]): Promise<number[]> {
    return this.tracing.inChildSpan(this.spanName, pipelineAttributes(ops), () => this.inner.increment(ops));
  }

  get(ops: readonly CounterOp[]): Promise<number[]> {
    return this.tracing.inChildSpan(this.spanName, pipelineAttributes(ops), () => this.inner.get(ops));
  }

  /** Per-op settlement passed through, so a failed shard's failure mode applies to its keys only. */
  incrementEach(ops: readonly CounterOp[]): Promise<(number | Error)[]> {
    const inner = this.inner;
    if (!inner.incrementEach) {
      return this.increment(ops).catch((err: unknown) => ops.map(() => err as Error));
    }
    return this.tracing.inChildSpan(this.spanName, pipelineAttributes(ops), () => inner.incrementEach!(ops));
  }

  isHealthy(): boolean {
    return this.inner.isHealthy();
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}

/** What the tracing is built with besides its settings (`exporter` replaces the OTLP one: tests, benchmarks). */
export interface TracingDeps {
  logger?: Logger;
  exporter?: SpanExporter;
}

/** The tracing for these settings, or undefined when TRACING_ENABLED is false. */
export function createTracing(
  settings: Settings['tracing'],
  deps: TracingDeps = {},
): RateLimitTracing | undefined {
  if (!settings.enabled) return undefined;
  return new RateLimitTracing({ settings, ...deps });
}
