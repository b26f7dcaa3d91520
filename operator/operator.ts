// One operator replica: the embedded xDS server (control-plane), the controller, leader election and
// the health and metrics endpoints. Constructed from options so tests run the real thing in-process.
import { existsSync } from 'node:fs';
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { KubeConfig } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import {
  EndpointServer,
  healthEndpoint,
  metricsEndpoint,
  readBoundedFileSync,
  silentLogger,
  type Logger,
} from '../common/index.js';
import { AdsServer, type DeltaBounds, InMemorySnapshotCache, type TlsFiles } from '../control-plane/index.js';
import { POD_STATE_EVENTS, RateLimitOperatorController } from './controller.js';
import type { DomainPolicy } from './domain-policy.js';
import { LeaderElector } from './kube/index.js';
import { PodReports, reportStream } from './pod-reports.js';
import { PodReportWriter } from './pod-report-writer.js';

export interface OperatorOptions {
  readonly kubeConfig: KubeConfig;
  readonly namespace?: string;
  /** host:port; port 0 picks a free one. */
  readonly xdsListen: string;
  /** TLS on the xDS listener; with `caFile`, mutual TLS (pods must present a certificate signed by it). */
  readonly xdsTls?: TlsFiles;
  /** Largest xDS response (default XDS_MAX_MESSAGE_BYTES, what pods accept by default). */
  readonly xdsMaxSendBytes?: number;
  /** Bounds on incremental (delta) streams (DEFAULT_DELTA_BOUNDS where absent). */
  readonly xdsDelta?: Partial<DeltaBounds>;
  /** host:port or undefined (off). */
  readonly metricsListen?: string;
  readonly healthListen?: string;
  readonly leaderElection?: {
    readonly namespace: string;
    readonly name: string;
    readonly leaseDurationMs?: number;
    readonly renewDeadlineMs?: number;
    readonly retryPeriodMs?: number;
  };
  readonly identity?: string;
  /**
   * With leader election: a replica's report of its pods counts this long after its last renewal
   * (default 30 s; renewed every third of it and on every stream change).
   */
  readonly podReportTtlMs?: number;
  readonly resyncMs?: number;
  /** Which namespaces may claim which domains (--domain-policy); undefined: no restriction. */
  readonly domainPolicy?: DomainPolicy;
  readonly logger?: Logger;
}

const SA_NAMESPACE_FILE = '/var/run/secrets/kubernetes.io/serviceaccount/namespace';

/** Lease namespace default: $POD_NAMESPACE, the in-cluster namespace, else `default`. */
export function defaultLeaseNamespace(env: NodeJS.ProcessEnv = process.env): string {
  if (env.POD_NAMESPACE) return env.POD_NAMESPACE;
  if (existsSync(SA_NAMESPACE_FILE))
    return readBoundedFileSync(SA_NAMESPACE_FILE, { maxBytes: 4096 }).toString('utf8').trim();
  return 'default';
}

export function defaultIdentity(): string {
  return `${hostname()}-${randomBytes(3).toString('hex')}`;
}

export class RateLimitOperator {
  readonly cache = new InMemorySnapshotCache();
  readonly ads: AdsServer;
  readonly registry = new Registry();
  readonly controller: RateLimitOperatorController;
  readonly leader: LeaderElector | undefined;
  readonly podReportWriter: PodReportWriter | undefined;
  readonly podReports: PodReports | undefined;
  readonly identity: string;
  private readonly onStreamChange = () => this.podReportWriter?.changed();
  private readonly log: Logger;
  private metricsServer: EndpointServer | undefined;
  private healthServer: EndpointServer | undefined;
  private closing: Promise<void> | undefined;
  metricsPort = 0;
  healthPort = 0;

  constructor(private readonly opts: OperatorOptions) {
    this.log = opts.logger ?? silentLogger;
    this.identity = opts.identity ?? defaultIdentity();
    this.ads = new AdsServer({
      cache: this.cache,
      listen: opts.xdsListen,
      tls: opts.xdsTls,
      maxSendMessageBytes: opts.xdsMaxSendBytes,
      delta: opts.xdsDelta,
      logger: this.log,
      identifier: this.identity,
    });
    const le = opts.leaderElection;
    if (le) {
      this.leader = new LeaderElector({ kubeConfig: opts.kubeConfig, identity: this.identity, ...le });
      this.leader.on('started', () =>
        this.log.info({ identity: this.identity }, 'became leader: writing status'),
      );
      this.leader.on('stopped', () => this.log.info({ identity: this.identity }, 'stopped leading'));
      this.leader.on('error', (err) => this.log.warn({ err: err.message }, 'leader election request failed'));
      const common = {
        kubeConfig: opts.kubeConfig,
        namespace: le.namespace,
        electionName: le.name,
        identity: this.identity,
        logger: this.log,
      };
      const ttlMs = opts.podReportTtlMs ?? 30_000;
      this.podReportWriter = new PodReportWriter({
        ...common,
        ttlMs,
        pods: () => this.ads.streams().map(reportStream),
      });
      const leader = this.leader;
      this.podReports = new PodReports({
        ...common,
        checkIntervalMs: Math.min(1000, Math.max(100, Math.floor(ttlMs / 4))),
        collectGarbage: () => leader.isLeader,
      });
    }
    this.controller = new RateLimitOperatorController({
      kubeConfig: opts.kubeConfig,
      cache: this.cache,
      ads: this.ads,
      leader: this.leader,
      peers: this.podReports,
      namespace: opts.namespace,
      registry: this.registry,
      logger: this.log,
      resyncMs: opts.resyncMs,
      identity: this.identity,
      domainPolicy: opts.domainPolicy,
    });
  }

  get xdsPort(): number {
    return this.ads.port;
  }

  get isLeader(): boolean {
    return this.leader ? this.leader.isLeader : true;
  }

  async start(): Promise<void> {
    await this.ads.start();
    if (this.opts.healthListen) {
      this.healthServer = new EndpointServer(
        this.opts.healthListen,
        {
          '/healthz': healthEndpoint(),
          '/readyz': healthEndpoint(
            () => this.controller.ready,
            'waiting for the first complete list of RateLimitConfigs',
          ),
        },
        '--health-listen',
      );
      this.healthPort = await this.healthServer.start();
      this.log.info({ port: this.healthPort }, `health listening on ${this.healthServer.boundAddress}`);
    }
    if (this.opts.metricsListen) {
      this.metricsServer = new EndpointServer(
        this.opts.metricsListen,
        { '/metrics': metricsEndpoint(this.registry) },
        '--metrics-listen',
      );
      this.metricsPort = await this.metricsServer.start();
      this.log.info({ port: this.metricsPort }, `metrics listening on ${this.metricsServer.boundAddress}`);
    }
    this.controller.start();
    for (const ev of POD_STATE_EVENTS) this.ads.on(ev, this.onStreamChange);
    this.podReports?.start();
    this.podReportWriter?.start();
    this.leader?.start();
    this.log.info(
      {
        identity: this.identity,
        xds: this.ads.port,
        metrics: this.metricsPort || undefined,
        health: this.healthPort || undefined,
      },
      'ratelimit-operator started',
    );
  }

  /** Stops everything (idempotent). */
  close(): Promise<void> {
    this.closing ??= this.shutDown();
    return this.closing;
  }

  private async shutDown(): Promise<void> {
    await this.leader?.close();
    for (const ev of POD_STATE_EVENTS) this.ads.off(ev, this.onStreamChange);
    await this.podReportWriter?.close();
    await this.podReports?.close();
    await this.controller.close();
    await this.ads.close();
    await this.metricsServer?.close();
    await this.healthServer?.close();
  }
}
