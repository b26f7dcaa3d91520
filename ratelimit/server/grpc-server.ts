// The gRPC listener: envoy.service.ratelimit.v3.RateLimitService and grpc.health.v1.Health.
import * as grpc from '@grpc/grpc-js';
import { HealthImplementation } from 'grpc-health-check';
import type { Logger } from 'pino';
import { rateLimitServiceDefinition, RLS_SERVICE_NAME } from '../../proto/index.js';
import type { WireRateLimitRequest, WireRateLimitResponse } from '../../proto/index.js';
import { CacheError } from '../limiter/index.js';
import { type RateLimitService, ServiceError } from '../service/index.js';
import type { Counter, StatsStore, Timer } from '../stats/index.js';
import type { RateLimitTracing } from '../tracing/index.js';
import type { HealthChecker } from './health.js';

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
  tls?: {
    certFile: string;
    keyFile: string;
    /** CA for client certificates: mutual TLS when set. */
    clientCaFile?: string;
    /** DNS SAN required in the client certificate. */
    clientSan?: string;
  };
}

export class RateLimitGrpcServer {
  private readonly server: grpc.Server;
  private readonly healthImpl: HealthImplementation;
  private boundAddress = '';

  private readonly totalRequests: Counter;
  private readonly responseTime: Timer;

  constructor(private readonly opts: GrpcServerOptions) {
    this.totalRequests = opts.stats.counter('ratelimit_server.ShouldRateLimit.total_requests');
    this.responseTime = opts.stats.timer('ratelimit_server.ShouldRateLimit.response_time');
    const options: grpc.ServerOptions = {
      'grpc.max_receive_message_length': opts.maxReceiveMessageLength ?? 4 * 1024 * 1024,
    };
    if (opts.maxConnectionAgeMs && opts.maxConnectionAgeMs > 0) {
      // The reference adds +/-10% jitter; grpc-js applies its own jitter to max_connection_age.
      options['grpc.max_connection_age_ms'] = opts.maxConnectionAgeMs;
      options['grpc.max_connection_age_grace_ms'] = opts.maxConnectionAgeGraceMs ?? 0;
    }
    this.server = new grpc.Server(options);
    this.server.addService(rateLimitServiceDefinition(), {
      ShouldRateLimit: this.shouldRateLimit.bind(this) as grpc.UntypedHandleCall,
    });
    this.healthImpl = new HealthImplementation({ '': 'SERVING', [RLS_SERVICE_NAME]: 'SERVING' });
    this.healthImpl.addToServer(this.server);
    const sync = (healthy: boolean) => {
      const s = healthy ? 'SERVING' : 'NOT_SERVING';
      this.healthImpl.setStatus('', s);
      this.healthImpl.setStatus(RLS_SERVICE_NAME, s);
    };
    opts.health.on('change', sync);
    sync(opts.health.isHealthy());
  }

  /** Re-reads probe-based health (e.g. the cache connection) into the gRPC health service. */
  refreshHealth(): void {
    const s = this.opts.health.isHealthy() ? 'SERVING' : 'NOT_SERVING';
    this.healthImpl.setStatus('', s);
    this.healthImpl.setStatus(RLS_SERVICE_NAME, s);
  }

  private credentials(): grpc.ServerCredentials {
    const tls = this.opts.tls;
    if (!tls) return grpc.ServerCredentials.createInsecure();
    // File watchers reload the certificate and key when they change on disk.
    const identity = new grpc.experimental.FileWatcherCertificateProvider({
      certificateFile: tls.certFile,
      privateKeyFile: tls.keyFile,
      refreshIntervalMs: 10_000,
    });
    let ca: grpc.experimental.CertificateProvider | null = null;
    if (tls.clientCaFile) {
      const caProvider = new grpc.experimental.FileWatcherCertificateProvider({
        caCertificateFile: tls.clientCaFile,
        refreshIntervalMs: 10_000,
      });
      ca = caProvider;
    }
    return grpc.experimental.createCertificateProviderServerCredentials(identity, ca, !!tls.clientCaFile);
  }

  async start(): Promise<string> {
    const target = this.opts.uds ? `unix:${this.opts.uds}` : `${this.opts.host}:${this.opts.port}`;
    const port = await new Promise<number>((resolve, reject) =>
      this.server.bindAsync(target, this.credentials(), (err, p) => (err ? reject(err) : resolve(p))),
    );
    this.boundAddress = this.opts.uds ? target : `${this.opts.host}:${port}`;
    this.opts.logger.warn(`listening for gRPC on ${this.boundAddress}`);
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
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.server.forceShutdown();
        resolve();
      }, deadlineMs);
      this.server.tryShutdown(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  private shouldRateLimit(
    call: grpc.ServerUnaryCall<WireRateLimitRequest, WireRateLimitResponse>,
    callback: grpc.sendUnaryData<WireRateLimitResponse>,
  ): void {
    const started = performance.now();
    this.totalRequests.inc();
    const responseTime = this.responseTime;
    const san = this.opts.tls?.clientSan;
    if (san) {
      const alt = call.getAuthContext?.().sslPeerCertificate?.subjectaltname ?? '';
      if (!alt.split(', ').includes(`DNS:${san}`)) {
        callback({ code: grpc.status.UNAUTHENTICATED, details: `client certificate has no SAN DNS:${san}` });
        return;
      }
    }
    const tracing = this.opts.tracing;
    const decided = tracing
      ? tracing.traceShouldRateLimit(call.metadata, call.request, () =>
          this.opts.service.shouldRateLimit(call.request),
        )
      : this.opts.service.shouldRateLimit(call.request);
    decided.then(
      (response) => {
        responseTime.record(performance.now() - started);
        callback(null, response);
      },
      (err: unknown) => {
        responseTime.record(performance.now() - started);
        callback(toGrpcError(err, this.opts.logger));
      },
    );
  }
}

export function toGrpcError(err: unknown, logger: Logger): Partial<grpc.StatusObject> {
  if (err instanceof ServiceError) return { code: err.grpcCode, details: err.message };
  if (err instanceof CacheError) return { code: grpc.status.UNAVAILABLE, details: err.message };
  logger.error({ err }, 'unexpected error in ShouldRateLimit');
  return { code: grpc.status.INTERNAL, details: (err as Error)?.message ?? String(err) };
}
