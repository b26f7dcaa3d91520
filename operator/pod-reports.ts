// Pod reports: how the leader learns about pods connected to the other replicas. This file: the report
// format and the reader (PodReports); the writer is operator/pod-report-writer.ts.
//
// Every replica publishes the xDS state of the ratelimit pods connected to IT in a Lease of its own,
// `<election id>-pods-<identity>` in the leader-election namespace: label
// `ratelimit.envoyproxy.io/pod-report-for: <election id>`, annotation `ratelimit.envoyproxy.io/pods`
// holding compact JSON (node id, peer, connected since, ACKed version, last NACK). A replica rewrites it
// shortly after any stream changes (connect, disconnect, ACK, NACK) and renews it on a timer; it deletes
// it when it shuts down.
//
// Every replica watches these Leases (so a new leader starts with them). A report counts while it is
// fresh: it changed (new resourceVersion) within its own leaseDurationSeconds, measured by OUR clock
// (remote clocks are never trusted, as in leader election). A replica that dies stops renewing, so its
// pods drop out of status after the TTL; the leader deletes reports that have been stale for three TTLs.
import { EventEmitter } from 'node:events';
import { CoordinationV1Api, type KubeConfig } from '@kubernetes/client-node';
import { silentLogger, type Logger } from '../common/index.js';
import type { StreamState } from '../control-plane/index.js';
import { RATELIMIT_CONFIG_TYPE_URL } from '../proto/index.js';
import { Reflector, type KubeObject } from './kube/index.js';
import type { PodState } from './status.js';

export const REPORT_LABEL = 'ratelimit.envoyproxy.io/pod-report-for';
export const REPORT_ANNOTATION = 'ratelimit.envoyproxy.io/pods';

/** One connected pod as a replica reports it (short keys: the annotation is bounded). */
export interface ReportedPod {
  /** Node id. */
  readonly n: string;
  /** Peer address. */
  readonly p: string;
  /** Connected since (ISO time). */
  readonly s: string;
  /** ACKed version (absent before the first ACK). */
  readonly a?: string;
  /** Last NACK (newer than the last ACK), or the version withheld from the pod: version and message. */
  readonly k?: { readonly v: string; readonly m: string };
}

/** A NACK message longer than this is cut in a report. */
const MAX_NACK_MESSAGE = 512;
/** The annotation stays below this (annotations total at most 256 KiB per object). */
const MAX_REPORT_BYTES = 200_000;

export function statusCode(err: unknown): number | undefined {
  const e = err as { code?: unknown; statusCode?: unknown };
  return typeof e?.code === 'number' ? e.code : typeof e?.statusCode === 'number' ? e.statusCode : undefined;
}

/** The report of one stream, as PodState needs it. */
export function reportStream(s: StreamState): ReportedPod {
  const ts = s.types.get(RATELIMIT_CONFIG_TYPE_URL);
  const nack = ts?.lastNack;
  const nackIsLatest = nack && (!ts?.ackedAt || nack.at >= ts.ackedAt);
  // A version the control plane held back (features the pod does not announce) reads like a NACK.
  const held = ts?.withheld;
  const k = held
    ? {
        v: held.version,
        m: `not sent to this pod: it does not announce ${held.features.join(', ')} (it keeps enforcing its previous version)`,
      }
    : nackIsLatest
      ? { v: nack.version, m: nack.message }
      : undefined;
  return {
    n: s.nodeId,
    p: s.peer,
    s: s.connectedSince.toISOString(),
    ...(ts?.versionAcked !== undefined ? { a: ts.versionAcked } : {}),
    ...(k ? { k } : {}),
  };
}

export function toPodState(r: ReportedPod, replica: string): PodState {
  return {
    pod: `${r.n} (${r.p} via ${replica})`,
    replica,
    ackedVersion: r.a,
    lastNack: r.k ? { version: r.k.v, message: r.k.m } : undefined,
  };
}

/** Compact JSON of a report; NACK messages are cut, and past the size bound messages are dropped. */
export function encodeReport(pods: readonly ReportedPod[]): string {
  const cut = pods.map((p) =>
    p.k && p.k.m.length > MAX_NACK_MESSAGE
      ? { ...p, k: { v: p.k.v, m: `${p.k.m.slice(0, MAX_NACK_MESSAGE - 3)}...` } }
      : p,
  );
  let text = JSON.stringify(cut);
  if (text.length > MAX_REPORT_BYTES) {
    text = JSON.stringify(cut.map((p) => (p.k ? { ...p, k: { v: p.k.v, m: '(message cut)' } } : p)));
  }
  return text;
}

/** Parses a report; anything malformed is skipped (a report never breaks status). */
export function decodeReport(text: string | undefined): ReportedPod[] {
  if (!text) return [];
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return [];
  }
  if (!Array.isArray(v)) return [];
  const out: ReportedPod[] = [];
  for (const e of v) {
    if (typeof e !== 'object' || e === null) continue;
    const { n, p, s, a, k } = e as Record<string, unknown>;
    if (typeof n !== 'string' || typeof p !== 'string') continue;
    const nack =
      typeof k === 'object' &&
      k !== null &&
      typeof (k as any).v === 'string' &&
      typeof (k as any).m === 'string'
        ? { v: (k as any).v as string, m: (k as any).m as string }
        : undefined;
    out.push({
      n,
      p,
      s: typeof s === 'string' ? s : '',
      ...(typeof a === 'string' ? { a } : {}),
      ...(nack ? { k: nack } : {}),
    });
  }
  return out;
}

/** A Lease name from the election id and identity (a DNS subdomain: lower case, [a-z0-9.-]). */
export function reportLeaseName(electionName: string, identity: string): string {
  const id = identity
    .toLowerCase()
    .replace(/[^a-z0-9.-]+/g, '-')
    .replace(/^[^a-z0-9]+|[^a-z0-9]+$/g, '');
  return `${electionName}-pods-${id || 'replica'}`.slice(0, 253).replace(/[^a-z0-9]+$/, '');
}

type LeaseObject = KubeObject & {
  metadata: { name?: string; annotations?: Record<string, string> };
  spec?: { holderIdentity?: string; leaseDurationSeconds?: number };
};

export interface PodReportsOptions {
  readonly kubeConfig: KubeConfig;
  readonly namespace: string;
  readonly electionName: string;
  /** This replica: its own report is skipped (its streams are read directly). */
  readonly identity: string;
  /** How often freshness is re-checked (default 1 s). */
  readonly checkIntervalMs?: number;
  /** Whether this replica deletes long-dead reports (the leader). */
  readonly collectGarbage?: () => boolean;
  readonly logger?: Logger;
}

export interface PodReportsEvents {
  /** The set of counted pods may have changed. */
  change: [];
}

/** Watches every replica's report; `pods()` is the pods of fresh reports of the other replicas. */
export class PodReports extends EventEmitter<PodReportsEvents> {
  readonly reflector: Reflector<LeaseObject>;
  private readonly api: CoordinationV1Api;
  /** Lease key -> [resourceVersion, when we saw it change]. */
  private readonly seen = new Map<string, { rv: string | undefined; at: number }>();
  private readonly gcTried = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  private lastFresh = '';

  constructor(private readonly opts: PodReportsOptions) {
    super();
    this.api = opts.kubeConfig.makeApiClient(CoordinationV1Api);
    const { namespace } = opts;
    const labelSelector = `${REPORT_LABEL}=${opts.electionName}`;
    this.reflector = new Reflector<LeaseObject>({
      kubeConfig: opts.kubeConfig,
      watchPath: `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases`,
      watchParams: { labelSelector },
      list: async (token) =>
        (await this.api.listNamespacedLease({
          namespace,
          labelSelector,
          limit: 500,
          _continue: token,
        })) as unknown as {
          items: LeaseObject[];
          metadata?: { resourceVersion?: string; continue?: string };
        },
    });
    this.reflector.on('change', ({ key, old, new: cur }) => {
      if (cur) {
        const prev = this.seen.get(key);
        if (!prev || prev.rv !== cur.metadata.resourceVersion) {
          this.seen.set(key, { rv: cur.metadata.resourceVersion, at: Date.now() });
        }
      } else {
        this.seen.delete(key);
        this.gcTried.delete(key);
      }
      // A renewal that reports the same pods changes nothing by itself; freshness is checked anyway.
      const mine = (cur ?? old)?.spec?.holderIdentity === opts.identity;
      const report = (l: LeaseObject | undefined) =>
        l ? `${l.spec?.holderIdentity}\n${l.metadata.annotations?.[REPORT_ANNOTATION] ?? ''}` : undefined;
      this.check(!mine && report(old) !== report(cur));
    });
    this.reflector.on('error', ({ error }) =>
      (opts.logger ?? silentLogger).warn({ err: error.message }, 'pod report watch failed; retrying'),
    );
  }

  start(): void {
    this.reflector.start();
    this.timer = setInterval(() => this.check(false), this.opts.checkIntervalMs ?? 1000);
    this.timer.unref();
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.reflector.close();
  }

  private ttlOf(l: LeaseObject): number {
    const s = l.spec?.leaseDurationSeconds;
    return (typeof s === 'number' && s > 0 ? s : 30) * 1000;
  }

  private freshLeases(now: number): LeaseObject[] {
    const out: LeaseObject[] = [];
    for (const key of this.reflector.keys()) {
      const l = this.reflector.get(key)!;
      if (l.spec?.holderIdentity === this.opts.identity) continue;
      const seen = this.seen.get(key);
      if (seen && now - seen.at <= this.ttlOf(l)) out.push(l);
    }
    return out;
  }

  /** Pods connected to the other replicas, from their fresh reports. */
  pods(now = Date.now()): PodState[] {
    return this.freshLeases(now).flatMap((l) => {
      const replica = l.spec?.holderIdentity ?? l.metadata.name ?? '?';
      return decodeReport(l.metadata.annotations?.[REPORT_ANNOTATION]).map((p) => toPodState(p, replica));
    });
  }

  /** Replicas with a fresh report (not this one). */
  replicas(now = Date.now()): string[] {
    return this.freshLeases(now).map((l) => l.spec?.holderIdentity ?? '');
  }

  private check(changed: boolean): void {
    const now = Date.now();
    const fresh = this.freshLeases(now)
      .map((l) => l.metadata.name)
      .join(',');
    if (changed || fresh !== this.lastFresh) {
      this.lastFresh = fresh;
      this.emit('change');
    }
    if (!this.opts.collectGarbage?.()) return;
    for (const key of this.reflector.keys()) {
      const l = this.reflector.get(key)!;
      const seen = this.seen.get(key);
      if (l.spec?.holderIdentity === this.opts.identity || !seen || now - seen.at <= 3 * this.ttlOf(l)) {
        continue;
      }
      const tried = this.gcTried.get(key);
      if (tried !== undefined && now - tried <= 3 * this.ttlOf(l)) continue; // one attempt per three TTLs
      this.gcTried.set(key, now);
      const name = l.metadata.name!;
      this.api.deleteNamespacedLease({ name, namespace: this.opts.namespace }).then(
        () =>
          (this.opts.logger ?? silentLogger).info({ report: name }, "deleted a dead replica's pod report"),
        () => {},
      );
    }
  }
}
