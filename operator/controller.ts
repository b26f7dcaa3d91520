// The operator's control loop: a reflector keeps a store of RateLimitConfig resources; every change
// queues a snapshot rebuild (the whole set decides domain ownership) and, after it, a status check of
// every resource; xDS ACK/NACK/connect/disconnect queue status checks too. Every replica serves the
// same snapshot; only the leader writes status and Events.
//
// Nothing is published before the first complete list: an operator that (re)starts must not push an
// empty config to pods that are serving a good one.
import {
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
} from '@kubernetes/client-node';
import { Counter, Gauge, type Registry } from 'prom-client';
import { silentLogger, type Logger } from '../common/index.js';
import { registerAdsMetrics, type AdsServer, type SnapshotCache } from '../control-plane/index.js';
import { RATELIMIT_CONFIG_TYPE_URL } from '../proto/index.js';
import type { DomainPolicy } from './domain-policy.js';
import { reconcile, type ReconcileResult } from './reconcile.js';
import { Reflector } from './kube/index.js';
import {
  GROUP,
  PLURAL,
  splitKey,
  VERSION,
  type RateLimitConfigObject,
  type RateLimitConfigStatus,
} from './resource.js';
import { StatusEvents } from './events.js';
import { reportStream, toPodState } from './pod-reports.js';
import { desiredStatus, sameStatus, VersionIndex, type PodState } from './status.js';
import { WorkQueue } from './kube/index.js';

/** The queue key that rebuilds the snapshot; resource keys (`ns/name`) check that resource's status. */
const SNAPSHOT_KEY = '@snapshot';

/** The control plane's events that change what pods run or report: each one re-checks status. */
export const POD_STATE_EVENTS = ['ack', 'nack', 'oversize', 'withheld', 'connect', 'disconnect'] as const;

export interface LeaderView {
  readonly isLeader: boolean;
  readonly identity: string;
  on(event: 'started' | 'stopped', listener: () => void): unknown;
}

/** Pods connected to the other replicas (operator/pod-reports.ts). */
export interface PeerPods {
  pods(): PodState[];
  on(event: 'change', listener: () => void): unknown;
  off(event: 'change', listener: () => void): unknown;
}

export interface ControllerOptions {
  readonly kubeConfig: KubeConfig;
  readonly cache: SnapshotCache;
  readonly ads: AdsServer;
  /** Absent: this replica always writes status. */
  readonly leader?: LeaderView;
  /** Absent: status counts this replica's pods only (a single replica). */
  readonly peers?: PeerPods;
  /** Watch one namespace only (default: all). */
  readonly namespace?: string;
  readonly registry?: Registry;
  readonly logger?: Logger;
  /** Re-check every status this often (default 60 s), as a safety net. */
  readonly resyncMs?: number;
  readonly identity?: string;
  /** Which namespaces may claim which domains (--domain-policy); undefined: no restriction. */
  readonly domainPolicy?: DomainPolicy;
}

interface Metrics {
  reconciles: Counter<'kind'>;
  errors: Counter<'kind'>;
  statusWrites: Counter;
  events: Counter<'reason'>;
}

function statusCode(err: unknown): number | undefined {
  const e = err as { code?: unknown; statusCode?: unknown };
  return typeof e?.code === 'number' ? e.code : typeof e?.statusCode === 'number' ? e.statusCode : undefined;
}

export class RateLimitOperatorController {
  readonly reflector: Reflector<RateLimitConfigObject>;
  readonly queue = new WorkQueue({ baseDelayMs: 200, maxDelayMs: 30_000 });
  private readonly index = new VersionIndex();
  private readonly customObjects: CustomObjectsApi;
  private readonly log: Logger;
  private readonly metrics: Metrics | undefined;
  private result: ReconcileResult | undefined;
  private version = '';
  private published = false;
  private worker: Promise<void> | undefined;
  private resyncTimer: NodeJS.Timeout | undefined;
  private readonly onStreamChange = () => this.queueAllStatus();
  /** What this replica last wrote per resource: the watch may not have brought it back yet. */
  private readonly written = new Map<string, RateLimitConfigStatus>();
  private readonly events: StatusEvents;

  constructor(private readonly opts: ControllerOptions) {
    this.log = opts.logger ?? silentLogger;
    this.customObjects = opts.kubeConfig.makeApiClient(CustomObjectsApi);
    this.events = new StatusEvents({
      core: opts.kubeConfig.makeApiClient(CoreV1Api),
      identity: opts.identity ?? opts.leader?.identity ?? 'ratelimit-operator',
      logger: this.log,
      onEvent: (reason) => this.metrics?.events.inc({ reason }),
    });
    const ns = opts.namespace;
    this.reflector = new Reflector<RateLimitConfigObject>({
      kubeConfig: opts.kubeConfig,
      watchPath: ns
        ? `/apis/${GROUP}/${VERSION}/namespaces/${ns}/${PLURAL}`
        : `/apis/${GROUP}/${VERSION}/${PLURAL}`,
      list: (token) =>
        ns
          ? this.customObjects.listNamespacedCustomObject({
              group: GROUP,
              version: VERSION,
              namespace: ns,
              plural: PLURAL,
              limit: 500,
              _continue: token,
            })
          : this.customObjects.listClusterCustomObject({
              group: GROUP,
              version: VERSION,
              plural: PLURAL,
              limit: 500,
              _continue: token,
            }),
    });
    if (opts.registry) this.metrics = this.registerMetrics(opts.registry);
  }

  /** True once the first complete list is reflected in a published snapshot. */
  get ready(): boolean {
    return this.published;
  }

  get snapshotVersion(): string {
    return this.version;
  }

  get lastResult(): ReconcileResult | undefined {
    return this.result;
  }

  private get isLeader(): boolean {
    return this.opts.leader ? this.opts.leader.isLeader : true;
  }

  start(): void {
    const r = this.reflector;
    r.on('change', ({ old, new: cur }) => {
      // Status-only changes (our own writes) do not change the snapshot, except the last accepted
      // generation: it is what a rejected generation falls back to.
      const specChanged =
        !old ||
        !cur ||
        old.metadata.generation !== cur.metadata.generation ||
        old.metadata.deletionTimestamp !== cur.metadata.deletionTimestamp ||
        old.status?.lastAccepted?.generation !== cur.status?.lastAccepted?.generation ||
        old.status?.lastAccepted?.spec !== cur.status?.lastAccepted?.spec;
      if (specChanged) this.queue.add(SNAPSHOT_KEY);
    });
    r.on('synced', () => this.queue.add(SNAPSHOT_KEY));
    r.on('error', ({ error, delayMs, phase }) => {
      this.metrics?.errors.inc({ kind: phase });
      this.log.warn({ err: error.message, delayMs }, `RateLimitConfig ${phase} failed; retrying`);
    });
    r.on('relist', ({ reason }) => this.log.info({ reason }, 'RateLimitConfig watch expired; relisting'));
    const ads = this.opts.ads;
    for (const ev of POD_STATE_EVENTS) ads.on(ev, this.onStreamChange);
    this.opts.peers?.on('change', this.onStreamChange);
    this.opts.leader?.on('started', () => {
      this.written.clear(); // another replica may have written since
      this.queueAllStatus();
    });
    r.start();
    this.worker = this.runWorker();
    const resync = this.opts.resyncMs ?? 60_000;
    this.resyncTimer = setInterval(() => this.queueAllStatus(), resync);
    this.resyncTimer.unref();
  }

  async close(): Promise<void> {
    if (this.resyncTimer) clearInterval(this.resyncTimer);
    for (const ev of POD_STATE_EVENTS) {
      this.opts.ads.off(ev, this.onStreamChange);
    }
    this.opts.peers?.off('change', this.onStreamChange);
    await this.reflector.close();
    this.queue.shutDown();
    await this.worker;
  }

  private queueAllStatus(): void {
    if (!this.published || !this.isLeader) return;
    for (const key of this.reflector.keys()) this.queue.add(key);
  }

  private async runWorker(): Promise<void> {
    for (;;) {
      const key = await this.queue.get();
      if (key === undefined) return;
      const kind = key === SNAPSHOT_KEY ? 'snapshot' : 'status';
      try {
        if (key === SNAPSHOT_KEY) this.rebuildSnapshot();
        else await this.syncStatus(key);
        this.metrics?.reconciles.inc({ kind });
        this.queue.forget(key);
      } catch (err) {
        this.metrics?.errors.inc({ kind });
        const delay = this.queue.addRateLimited(key);
        this.log.warn({ key, err: (err as Error).message, retryInMs: delay }, 'reconcile failed; requeued');
      } finally {
        this.queue.done(key);
      }
    }
  }

  private rebuildSnapshot(): void {
    if (!this.reflector.synced) return;
    const result = reconcile(this.reflector.list(), { policy: this.opts.domainPolicy });
    const snap = this.opts.cache.setDefaultSnapshot(result.resources);
    const version = snap.resourceSet(RATELIMIT_CONFIG_TYPE_URL).version;
    this.index.record(version, result.contents);
    if (version !== this.version) {
      this.log.info(
        { version, domains: result.resources.map((r) => r.name), resources: result.verdicts.size },
        'snapshot published',
      );
    }
    this.version = version;
    this.result = result;
    this.published = true;
    this.queueAllStatus();
  }

  /** Pod states of the streams connected to this replica, then those the other replicas report. */
  podStates(): PodState[] {
    const self = this.opts.identity ?? this.opts.leader?.identity ?? 'ratelimit-operator';
    const local = this.opts.ads.streams().map((s) => toPodState(reportStream(s), self));
    return [...local, ...(this.opts.peers?.pods() ?? [])];
  }

  private async syncStatus(key: string): Promise<void> {
    if (!this.isLeader || !this.result) return;
    const obj = this.reflector.get(key);
    const verdict = this.result.verdicts.get(key);
    if (!obj || !verdict || obj.metadata.deletionTimestamp) {
      this.written.delete(key);
      return;
    }
    // The store may be ahead of the last snapshot; the next rebuild queues this key again.
    if ((obj.metadata.generation ?? 0) !== verdict.generation) return;
    const mine = this.written.get(key);
    const previous = mine && mine.observedGeneration === verdict.generation ? mine : obj.status;
    const status = desiredStatus({
      verdict,
      version: this.version,
      pods: this.podStates(),
      index: this.index,
      previous,
      now: new Date(),
    });
    if (sameStatus(previous, status)) return;
    const { namespace, name } = splitKey(key);
    try {
      await this.customObjects.patchNamespacedCustomObjectStatus(
        {
          group: GROUP,
          version: VERSION,
          namespace,
          plural: PLURAL,
          name,
          body: { status },
          fieldManager: 'ratelimit-operator',
        },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
    } catch (err) {
      if (statusCode(err) === 404) return; // deleted meanwhile
      throw err;
    }
    this.written.set(key, status);
    this.metrics?.statusWrites.inc();
    this.log.info(
      {
        resource: key,
        generation: verdict.generation,
        accepted: status.conditions?.[0]?.reason,
        programmed: status.conditions?.[1]?.reason,
        pods: status.podsAcked,
      },
      'status written',
    );
    await this.events.record(obj, previous, status, verdict.lostFields ?? []);
  }

  private registerMetrics(registry: Registry): Metrics {
    const registers = [registry];
    const p = 'ratelimit_operator_';
    registerAdsMetrics(this.opts.ads, { registry, prefix: p });
    const queue = this.queue;
    new Gauge({
      name: `${p}queue_depth`,
      help: 'Keys waiting in the work queue',
      registers,
      collect() {
        this.set(queue.length);
      },
    });
    const isLeader = () => this.isLeader;
    const verdicts = () => [...(this.result?.verdicts.values() ?? [])];
    new Gauge({
      name: `${p}leader`,
      help: '1 when this replica is the leader (writes status)',
      registers,
      collect() {
        this.set(isLeader() ? 1 : 0);
      },
    });
    new Gauge({
      name: `${p}resources`,
      help: 'RateLimitConfig resources by Accepted',
      labelNames: ['accepted'],
      registers,
      collect() {
        const all = verdicts();
        this.set({ accepted: 'true' }, all.filter((v) => v.accepted).length);
        this.set({ accepted: 'false' }, all.filter((v) => !v.accepted).length);
      },
    });
    return {
      reconciles: new Counter({
        name: `${p}reconciles_total`,
        help: 'Reconciles by kind (snapshot rebuild, status check)',
        labelNames: ['kind'],
        registers,
      }),
      errors: new Counter({
        name: `${p}errors_total`,
        help: 'Failed reconciles, lists and watches by kind',
        labelNames: ['kind'],
        registers,
      }),
      statusWrites: new Counter({
        name: `${p}status_writes_total`,
        help: 'Status patches written',
        registers,
      }),
      events: new Counter({
        name: `${p}events_total`,
        help: 'Kubernetes Events created, by reason',
        labelNames: ['reason'],
        registers,
      }),
    };
  }
}
