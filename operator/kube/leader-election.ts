// Lease-based leader election (coordination.k8s.io/v1), after client-go's leaderelection: acquire or
// renew every retryPeriod; a lease held by someone else counts as expired when its record has not
// changed for leaseDuration by OUR clock (remote clocks are never trusted); a leader that cannot renew
// within renewDeadline steps down. Optimistic concurrency (resourceVersion) decides races. close()
// releases the lease so a successor takes over at once.
import { EventEmitter } from 'node:events';
import { CoordinationV1Api, type KubeConfig, type V1Lease } from '@kubernetes/client-node';

export interface LeaderElectorOptions {
  readonly kubeConfig: KubeConfig;
  readonly namespace: string;
  readonly name: string;
  readonly identity: string;
  readonly leaseDurationMs?: number;
  readonly renewDeadlineMs?: number;
  readonly retryPeriodMs?: number;
}

export interface LeaderElectorEvents {
  /** This replica became the leader. */
  started: [];
  /** This replica stopped being the leader. */
  stopped: [];
  /** The observed leader changed (any replica). */
  leader: [string];
  error: [Error];
}

/** metav1.MicroTime: RFC 3339 with exactly six fractional digits. */
export function microTime(d: Date): string {
  return d.toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

function statusCode(err: unknown): number | undefined {
  const e = err as { code?: unknown; statusCode?: unknown };
  return typeof e?.code === 'number' ? e.code : typeof e?.statusCode === 'number' ? e.statusCode : undefined;
}

export class LeaderElector extends EventEmitter<LeaderElectorEvents> {
  private readonly api: CoordinationV1Api;
  private readonly leaseDurationMs: number;
  private readonly renewDeadlineMs: number;
  private readonly retryPeriodMs: number;
  private leading = false;
  private lastRenew = 0;
  private observedRecord = '';
  private observedAt = 0;
  private observedLeader = '';
  private timer: NodeJS.Timeout | undefined;
  private closed = false;
  private running: Promise<void> | undefined;

  constructor(private readonly opts: LeaderElectorOptions) {
    super();
    this.api = opts.kubeConfig.makeApiClient(CoordinationV1Api);
    this.leaseDurationMs = opts.leaseDurationMs ?? 15_000;
    this.renewDeadlineMs = opts.renewDeadlineMs ?? 10_000;
    this.retryPeriodMs = opts.retryPeriodMs ?? 2_000;
  }

  get isLeader(): boolean {
    return this.leading;
  }

  get leader(): string {
    return this.observedLeader;
  }

  get identity(): string {
    return this.opts.identity;
  }

  start(): void {
    if (this.timer || this.closed) return;
    const tick = async () => {
      this.running = this.tryAcquireOrRenew();
      await this.running;
      if (!this.closed) this.timer = setTimeout(() => void tick(), this.retryPeriodMs);
    };
    void tick();
  }

  /** Stops campaigning; a leader releases the lease (a successor need not wait for it to expire). */
  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    await this.running;
    if (this.leading) {
      try {
        const lease = await this.api.readNamespacedLease({
          name: this.opts.name,
          namespace: this.opts.namespace,
        });
        if (lease.spec?.holderIdentity === this.opts.identity) {
          lease.spec.holderIdentity = undefined;
          lease.spec.leaseDurationSeconds = 1;
          (lease.spec as any).renewTime = microTime(new Date());
          await this.api.replaceNamespacedLease({
            name: this.opts.name,
            namespace: this.opts.namespace,
            body: lease,
          });
        }
      } catch {
        /* best effort: the lease expires anyway */
      }
      this.setLeading(false);
    }
  }

  private setLeading(v: boolean): void {
    if (this.leading === v) return;
    this.leading = v;
    this.emit(v ? 'started' : 'stopped');
  }

  private observe(holder: string, record: string): void {
    if (record !== this.observedRecord) {
      this.observedRecord = record;
      this.observedAt = Date.now();
    }
    if (holder !== this.observedLeader) {
      this.observedLeader = holder;
      this.emit('leader', holder);
    }
  }

  private async tryAcquireOrRenew(): Promise<void> {
    const { name, namespace, identity } = this.opts;
    const now = new Date();
    const durationSeconds = Math.max(1, Math.ceil(this.leaseDurationMs / 1000));
    try {
      let lease: V1Lease | undefined;
      try {
        lease = await this.api.readNamespacedLease({ name, namespace });
      } catch (err) {
        if (statusCode(err) !== 404) throw err;
      }
      if (!lease) {
        await this.api.createNamespacedLease({
          namespace,
          body: {
            apiVersion: 'coordination.k8s.io/v1',
            kind: 'Lease',
            metadata: { name, namespace },
            spec: {
              holderIdentity: identity,
              leaseDurationSeconds: durationSeconds,
              acquireTime: microTime(now) as any,
              renewTime: microTime(now) as any,
              leaseTransitions: 0,
            },
          },
        });
        this.observe(identity, `${identity}@${microTime(now)}`);
        this.lastRenew = Date.now();
        this.setLeading(true);
        return;
      }
      const spec = lease.spec ?? {};
      const holder = spec.holderIdentity ?? '';
      const renew = String(spec.renewTime ?? '');
      this.observe(holder, `${holder}@${renew}@${lease.metadata?.resourceVersion ?? ''}`);
      const heldDurationMs = (spec.leaseDurationSeconds ?? durationSeconds) * 1000;
      const expired = holder === '' || Date.now() - this.observedAt > heldDurationMs;
      if (holder !== identity && !expired) {
        this.setLeading(false);
        return;
      }
      const next: V1Lease = {
        ...lease,
        spec: {
          ...spec,
          holderIdentity: identity,
          leaseDurationSeconds: durationSeconds,
          renewTime: microTime(now) as any,
          acquireTime: (holder === identity ? spec.acquireTime : microTime(now)) as any,
          leaseTransitions: (spec.leaseTransitions ?? 0) + (holder === identity ? 0 : 1),
        },
      };
      const updated = await this.api.replaceNamespacedLease({ name, namespace, body: next });
      this.observe(
        identity,
        `${identity}@${String(updated.spec?.renewTime ?? '')}@${updated.metadata?.resourceVersion ?? ''}`,
      );
      this.lastRenew = Date.now();
      this.setLeading(true);
    } catch (err) {
      if (statusCode(err) !== 409) this.emit('error', err as Error);
      if (this.leading && Date.now() - this.lastRenew > this.renewDeadlineMs) this.setLeading(false);
    }
  }
}
