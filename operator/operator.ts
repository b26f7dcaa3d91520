// One operator replica: the embedded xDS server (control-plane), the controller, leader election and
// the health and metrics endpoints. Constructed from options so tests run the real thing in-process.
import { existsSync, readFileSync } from 'node:fs';
import { createServer, type Server as HttpServer } from 'node:http';
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { KubeConfig } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { silentLogger, type Logger } from '../common/index.js';
import { AdsServer, InMemorySnapshotCache, type TlsFiles } from '../control-plane/index.js';
import { POD_STATE_EVENTS, RateLimitOperatorController } from './controller.js';
import type { DomainPolicy } from './domain-policy.js';
import { LeaderElector } from './kube/index.js';
import { PodReports, reportStream } from './pod-reports.js';
import { PodReporter } from './pod-report-writer.js';

export interface OperatorOptions {
  readonly kubeConfig: KubeConfig;
  readonly namespace?: string;
  /** host:port; port 0 picks a free one. */
  readonly xdsListen: string;
  /** TLS on the xDS listener; with `caFile`, mutual TLS (pods must present a certificate signed by it). */
  readonly xdsTls?: TlsFiles;
  /** Largest xDS response (default XDS_MAX_MESSAGE_BYTES, what pods accept by default). */
  readonly xdsMaxSendBytes?: number;
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
  if (existsSync(SA_NAMESPACE_FILE)) return readFileSync(SA_NAMESPACE_FILE, 'utf8').trim();
  return 'default';
}

export function defaultIdentity(): string {
  return `${hostname()}-${randomBytes(3).toString('hex')}`;
}

function splitHostPort(hp: string): { host: string; port: number } {
  const i = hp.lastIndexOf(':');
  if (i < 0) throw new Error(`not host:port: ${hp}`);
  const port = Number(hp.slice(i + 1));
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`bad port in ${hp}`);
  return { host: hp.slice(0, i).replace(/^\[|\]$/g, '') || '0.0.0.0', port };
}

async function listen(server: HttpServer, hp: string): Promise<number> {
  const { host, port } = splitHostPort(hp);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const addr = server.address();
  return typeof addr === 'object' && addr ? addr.port : port;
}

export class RateLimitOperator {
  readonly cache = new InMemorySnapshotCache();
  readonly ads: AdsServer;
  readonly registry = new Registry();
  readonly controller: RateLimitOperatorController;
  readonly leader: LeaderElector | undefined;
  readonly podReporter: PodReporter | undefined;
  readonly podReports: PodReports | undefined;
  readonly identity: string;
  private readonly onStreamChange = () => this.podReporter?.changed();
  private readonly log: Logger;
  private metricsServer: HttpServer | undefined;
  private healthServer: HttpServer | undefined;
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
      this.podReporter = new PodReporter({
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
      this.healthServer = createServer((req, res) => {
        const path = (req.url ?? '').split('?')[0];
        if (path === '/healthz') {
          res.writeHead(200, { 'content-type': 'text/plain' }).end('ok\n');
        } else if (path === '/readyz') {
          const ready = this.controller.ready;
          res
            .writeHead(ready ? 200 : 503, { 'content-type': 'text/plain' })
            .end(ready ? 'ok\n' : 'waiting for the first complete list of RateLimitConfigs\n');
        } else res.writeHead(404).end();
      });
      this.healthPort = await listen(this.healthServer, this.opts.healthListen);
    }
    if (this.opts.metricsListen) {
      this.metricsServer = createServer((req, res) => {
        if ((req.url ?? '').split('?')[0] !== '/metrics') return void res.writeHead(404).end();
        this.registry.metrics().then(
          (body) => res.writeHead(200, { 'content-type': this.registry.contentType }).end(body),
          (err: Error) => res.writeHead(500).end(err.message),
        );
      });
      this.metricsPort = await listen(this.metricsServer, this.opts.metricsListen);
    }
    this.controller.start();
    for (const ev of POD_STATE_EVENTS) this.ads.on(ev, this.onStreamChange);
    this.podReports?.start();
    this.podReporter?.start();
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
    await this.podReporter?.close();
    await this.podReports?.close();
    await this.controller.close();
    await this.ads.close();
    for (const s of [this.metricsServer, this.healthServer]) {
      if (s) await new Promise<void>((r) => s.close(() => r()));
    }
  }
}
