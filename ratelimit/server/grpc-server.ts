// The gRPC listener: envoy.service.ratelimit.v3.RateLimitService, grpc.health.v1.Health and, when
// RLQS_ENABLED, envoy.service.rate_limit_quota.v3.RateLimitQuotaService, on the small gRPC server of
// h2grpc/ (grpc-js' server costs more CPU per call than the whole decision).
import type { Logger } from '../../common/index.js';
import {
  DEFAULT_REQUEST_BOUNDS,
  decodeRateLimitRequest,
  InvalidFieldError,
  encodeRateLimitResponse,
  rateLimitServiceDefinition,
  ProtoReader,
  RLS_SERVICE_NAME,
  RLQS_STREAM_PATH,
  rateLimitQuotaServiceDefinition,
  SHOULD_RATE_LIMIT_PATH,
} from '../../proto/index.js';
import type {
  RequestBounds,
  WireQuotaResponse,
  WireRateLimitRequest,
  WireRateLimitResponse,
  WireUsageReports,
} from '../../proto/index.js';
import type { QuotaServer, QuotaStreamOut } from '../quota/index.js';
import { type RateLimitService, ServiceError, type ServiceErrorKind } from '../service/index.js';
import type { Counter, StatsStore, Timer } from '../stats/index.js';
import type { MetadataCarrier, RateLimitTracing } from '../tracing/index.js';
import type { HealthChecker } from './health.js';
import { listeningLine } from './listener.js';
import {
  type CallContext,
  type CallHeaders,
  frameMessage,
  GrpcStatusError,
  H2GrpcServer,
  type H2Limits,
  type ServerStream,
  Status,
} from '../../h2grpc/index.js';

export interface GrpcServerOptions {
  service: RateLimitService;
  health: HealthChecker;
  stats: StatsStore;
  /** Spans per call when TRACING_ENABLED; absent, the handler does no tracing work. */
  tracing?: RateLimitTracing;
  logger: Logger;
  host: string;
  port: number;
  /** Unix domain socket path; when set, host and port are not used. */
  uds?: string;
  maxConnectionAgeMs?: number;
  maxConnectionAgeGraceMs?: number;
  maxReceiveMessageLength?: number;
  /** GRPC_MAX_DECOMPRESSED_MSG_SIZE: bytes a compressed request may inflate to. */
  maxDecompressedMessageLength?: number;
  /** REQUEST_MAX_*: what one request may ask for; past a bound, INVALID_ARGUMENT while decoding. */
  requestBounds?: RequestBounds;
  /** The HTTP/2 bounds (GRPC_MAX_CONCURRENT_STREAMS, GRPC_MAX_SESSION_MEMORY_MB, ...), per connection and per process. */
  http2Limits?: Partial<H2Limits>;
  http2?: 'builtin' | 'node';
  tls?: {
    certFile: string;
    keyFile: string;
    /** CA for client certificates: mutual TLS when set. */
    clientCaFile?: string;
    /** DNS SAN required in the client certificate. */
    clientSan?: string;
  };
  /** How often TLS files are re-read (ms); 10 s by default. */
  tlsReloadMs?: number;
  /** RLQS_ENABLED: serves StreamRateLimitQuotas on the same port. */
  quota?: QuotaServer;
}

const HEALTH_SERVICE = 'grpc.health.v1.Health';

/**
 * The health service name a liveness probe asks for: SERVING whenever this listener answers, whatever the
 * config and the cache say. The empty name and the rate limit service's name carry the overall health
 * (config loaded, cache reachable, not terminating), which is readiness: a kubelet that restarted the pod
 * on it would turn a Redis outage or a missing config into a crash loop.
 */
export const LIVENESS_SERVICE_NAME = 'liveness';

/** grpc.health.v1.HealthCheckResponse.ServingStatus */
const SERVING = 1;
const NOT_SERVING = 2;
const SERVICE_UNKNOWN = 3;

export class RateLimitGrpcServer {
  private readonly server: H2GrpcServer;
  private boundAddress = '';
  private healthy: boolean;
  private readonly watchers = new Set<{ service: string; stream: ServerStream<number> }>();

  private readonly totalRequests: Counter;
  private readonly responseTime: Timer;

  constructor(private readonly opts: GrpcServerOptions) {
    this.totalRequests = opts.stats.counter('ratelimit_server.ShouldRateLimit.total_requests');
    this.responseTime = opts.stats.timer('ratelimit_server.ShouldRateLimit.response_time');
    this.server = new H2GrpcServer({
      logger: opts.logger,
      maxReceiveMessageLength: opts.maxReceiveMessageLength ?? 4 * 1024 * 1024,
      maxDecompressedMessageLength: opts.maxDecompressedMessageLength,
      limits: opts.http2Limits,
      http2: opts.http2,
      maxConnectionAgeMs: opts.maxConnectionAgeMs,
      maxConnectionAgeGraceMs: opts.maxConnectionAgeGraceMs,
      tls: opts.tls,
      tlsReloadMs: opts.tlsReloadMs,
    });
    // Hand-written codecs for the hot path; protobufjs for responses they leave to it (metadata, quotas),
    // loaded with the first such response.
    const serialize = (r: WireRateLimitResponse): Buffer =>
      rateLimitServiceDefinition().ShouldRateLimit.responseSerialize(r) as Buffer;
    const bounds = opts.requestBounds ?? DEFAULT_REQUEST_BOUNDS;
    this.server.addUnary<WireRateLimitRequest, WireRateLimitResponse>(SHOULD_RATE_LIMIT_PATH, {
      decode: (buf) => decodeRequest(buf, bounds),
      encode: (r) => encodeRateLimitResponse(r) ?? serialize(r),
      // The usual response is encoded straight into its gRPC frame: no second Buffer and copy.
      encodeFramed: (r) => encodeRateLimitResponse(r, true) ?? frameMessage(serialize(r)),
      handle: (req, call) => this.shouldRateLimit(req, call),
      settled: (startedMs, err) => {
        this.responseTime.record(performance.now() - startedMs);
        return err === undefined ? undefined : toGrpcError(err, opts.logger);
      },
    });
    this.server.addUnary<string, number>(`/${HEALTH_SERVICE}/Check`, {
      decode: decodeHealthRequest,
      encode: encodeHealthResponse,
      handle: async (service) => {
        const s = this.healthStatus(service);
        if (s === SERVICE_UNKNOWN) throw new GrpcStatusError(Status.NOT_FOUND, `unknown service ${service}`);
        return s;
      },
    });
    this.server.addServerStreaming<string, number>(`/${HEALTH_SERVICE}/Watch`, {
      decode: decodeHealthRequest,
      encode: encodeHealthResponse,
      handle: (service, stream) => {
        const w = { service, stream };
        this.watchers.add(w);
        stream.onClose(() => this.watchers.delete(w));
        stream.send(this.healthStatus(service));
      },
    });
    if (opts.quota) this.addQuotaService(opts.quota);
    this.healthy = opts.health.isHealthy();
    opts.health.on('change', () => this.refreshHealth());
  }

  /**
   * envoy.service.rate_limit_quota.v3 StreamRateLimitQuotas: a bidirectional stream per Envoy, decoded by
   * protobufjs (a report every few seconds, not the request path). Bytes that do not decode end that
   * stream with INVALID_ARGUMENT; the quota server answers the rest.
   */
  private addQuotaService(quota: QuotaServer): void {
    const def = rateLimitQuotaServiceDefinition().StreamRateLimitQuotas!;
    const san = this.opts.tls?.clientSan;
    this.server.addBidiStreaming<WireUsageReports, WireQuotaResponse>(RLQS_STREAM_PATH, {
      decode: (buf) => {
        try {
          return def.requestDeserialize(buf) as WireUsageReports;
        } catch (err) {
          throw new GrpcStatusError(Status.INVALID_ARGUMENT, (err as Error).message);
        }
      },
      encode: (r) => def.responseSerialize(r) as Buffer,
      start: (out, call) => {
        if (san && !call.peerSubjectAltName().split(', ').includes(`DNS:${san}`)) {
          throw new GrpcStatusError(Status.UNAUTHENTICATED, `client certificate has no SAN DNS:${san}`);
        }
        const adapter: QuotaStreamOut = {
          send: (msg) => out.send(msg),
          end: (code, message) => out.end(QUOTA_STATUS[code], message),
          get closed() {
            return out.closed;
          },
          get queuedBytes() {
            return out.queuedBytes;
          },
        };
        let stream;
        try {
          stream = quota.open(adapter);
        } catch (err) {
          const e = err as { code?: keyof typeof QUOTA_STATUS; message: string };
          throw new GrpcStatusError(QUOTA_STATUS[e.code ?? 'unavailable'] ?? Status.UNKNOWN, e.message);
        }
        out.onClose(() => quota.close(stream));
        return {
          message: (m) => quota.report(stream, m),
          halfClose: () => {
            quota.close(stream);
            out.end(Status.OK);
          },
        };
      },
    });
  }

  private healthStatus(service: string): number {
    if (service === LIVENESS_SERVICE_NAME) return SERVING;
    if (service !== '' && service !== RLS_SERVICE_NAME) return SERVICE_UNKNOWN;
    return this.healthy ? SERVING : NOT_SERVING;
  }

  /** Re-reads health (including probes such as the cache connection) and tells Watch streams of a change. */
  refreshHealth(): void {
    const now = this.opts.health.isHealthy();
    if (now === this.healthy) return;
    this.healthy = now;
    for (const w of this.watchers) {
      if (w.service !== LIVENESS_SERVICE_NAME) w.stream.send(this.healthStatus(w.service));
    }
  }

  async start(): Promise<string> {
    if (this.opts.uds) {
      await this.server.listen({ path: this.opts.uds });
      this.boundAddress = `unix:${this.opts.uds}`;
    } else {
      const port = await this.server.listen({ host: this.opts.host, port: this.opts.port });
      this.boundAddress = `${this.opts.host}:${port}`;
    }
    this.opts.logger.warn(listeningLine('gRPC', this.opts.uds ?? this.boundAddress));
    return this.boundAddress;
  }

  get address(): string {
    return this.boundAddress;
  }

  get port(): number {
    const i = this.boundAddress.lastIndexOf(':');
    return Number(this.boundAddress.slice(i + 1));
  }

  /** Waits for in-flight calls up to the deadline, then cuts what is left. */
  async close(deadlineMs = 10_000): Promise<void> {
    this.refreshHealth();
    await this.server.close(deadlineMs);
  }

  /**
   * Not async: the server times the call and maps its errors when it settles (`settled` above: the
   * response time, and toGrpcError), so a decision has no extra suspended frame here.
   */
  private shouldRateLimit(req: WireRateLimitRequest, call: CallContext): Promise<WireRateLimitResponse> {
    this.totalRequests.inc();
    const san = this.opts.tls?.clientSan;
    if (san && !call.peerSubjectAltName().split(', ').includes(`DNS:${san}`)) {
      throw new GrpcStatusError(Status.UNAUTHENTICATED, `client certificate has no SAN DNS:${san}`);
    }
    const tracing = this.opts.tracing;
    return tracing
      ? tracing.traceShouldRateLimit(new HeaderMetadata(call.headers), req, () =>
          this.opts.service.shouldRateLimit(req).catch(asGrpcError),
        )
      : this.opts.service.shouldRateLimit(req);
  }
}

/** The gRPC status of each way the quota server ends a stream. */
const QUOTA_STATUS: Readonly<Record<'ok' | 'invalid' | 'exhausted' | 'unavailable', number>> = {
  ok: Status.OK,
  invalid: Status.INVALID_ARGUMENT,
  exhausted: Status.RESOURCE_EXHAUSTED,
  unavailable: Status.UNAVAILABLE,
};

/** The gRPC status of each way a call can end (service/errors.ts): the one table on the gRPC side. */
const GRPC_STATUS: Readonly<Record<ServiceErrorKind, number>> = {
  invalid: Status.INVALID_ARGUMENT,
  'no-config': Status.UNAVAILABLE,
  unavailable: Status.UNAVAILABLE,
};

/** The request, or a caller's bad value in it (InvalidFieldError) as INVALID_ARGUMENT. */
function decodeRequest(buf: Buffer, bounds: RequestBounds): WireRateLimitRequest {
  try {
    return decodeRateLimitRequest(buf, bounds);
  } catch (err) {
    throw err instanceof InvalidFieldError ? new GrpcStatusError(Status.INVALID_ARGUMENT, err.message) : err;
  }
}

/** Inside a trace: the service's error as the gRPC status it ends in, so the span records the code. */
function asGrpcError(err: unknown): never {
  throw err instanceof ServiceError ? new GrpcStatusError(GRPC_STATUS[err.kind], err.message) : err;
}

function toGrpcError(err: unknown, logger: Logger): GrpcStatusError {
  if (err instanceof GrpcStatusError) return err;
  if (err instanceof ServiceError) return new GrpcStatusError(GRPC_STATUS[err.kind], err.message);
  logger.error({ err }, 'unexpected error in ShouldRateLimit');
  return new GrpcStatusError(Status.INTERNAL, (err as Error)?.message ?? String(err));
}

/** The request headers as the tracer reads gRPC metadata (pseudo-headers left out). */
class HeaderMetadata implements MetadataCarrier {
  constructor(private readonly headers: CallHeaders) {}

  get(key: string): string[] {
    const v = this.headers[key.toLowerCase()];
    if (v === undefined || key.startsWith(':')) return [];
    return Array.isArray(v) ? v : [String(v)];
  }

  getMap(): Record<string, string> {
    const out: Record<string, string> = {};
    for (const [k, v] of Object.entries(this.headers)) {
      if (!k.startsWith(':') && v !== undefined) out[k] = Array.isArray(v) ? v.join(', ') : String(v);
    }
    return out;
  }
}

/** grpc.health.v1.HealthCheckRequest: `string service = 1`; other fields skipped. */
export function decodeHealthRequest(buf: Buffer): string {
  const r = new ProtoReader(buf, 0, buf.length);
  let service = '';
  while (r.pos < r.end) {
    const tag = r.varint();
    if (tag === 0x0a) service = r.string();
    else r.skip(tag & 7);
  }
  return service;
}

/** grpc.health.v1.HealthCheckResponse: `ServingStatus status = 1`. */
export function encodeHealthResponse(status: number): Uint8Array {
  return status === 0 ? new Uint8Array(0) : Uint8Array.of(0x08, status);
}
