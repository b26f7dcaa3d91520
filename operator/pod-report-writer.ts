// The writer of this replica's pod report (operator/pod-reports.ts has the format and the reader): the
// Lease `<election id>-pods-<identity>`, rewritten shortly after any stream change and renewed on a
// timer, deleted on shutdown. A Lease refuses an update without a resourceVersion, so every write is
// an optimistic-concurrency update (read, update with the resourceVersion, again on a conflict).
import { CoordinationV1Api, type KubeConfig, type V1Lease } from '@kubernetes/client-node';
import { silentLogger, type Logger } from '../common/index.js';
import { microTime } from './kube/index.js';
import {
  encodeReport,
  REPORT_ANNOTATION,
  REPORT_LABEL,
  reportLeaseName,
  statusCode,
  type ReportedPod,
} from './pod-reports.js';

export interface PodReportWriterOptions {
  readonly kubeConfig: KubeConfig;
  readonly namespace: string;
  /** The leader election Lease name: reports are labelled with it and named after it. */
  readonly electionName: string;
  readonly identity: string;
  /** A report not renewed for this long no longer counts (default 30 s); renewed every third of it. */
  readonly ttlMs?: number;
  /** Coalesce stream changes for this long before writing (default 100 ms). */
  readonly debounceMs?: number;
  /** The pods connected to this replica now. */
  readonly pods: () => ReportedPod[];
  readonly logger?: Logger;
}

/** Writes this replica's report: on change (debounced) and on a timer. */
export class PodReportWriter {
  private readonly api: CoordinationV1Api;
  readonly name: string;
  private readonly ttlMs: number;
  private readonly log: Logger;
  private debounce: NodeJS.Timeout | undefined;
  private renew: NodeJS.Timeout | undefined;
  private writing: Promise<void> | undefined;
  private again = false;
  private closed = false;
  private lastError = '';
  /** resourceVersion of our last write or read of the report (undefined: read before updating). */
  private resourceVersion: string | undefined;
  /** Successful writes (for tests and metrics). */
  writes = 0;

  constructor(private readonly opts: PodReportWriterOptions) {
    this.api = opts.kubeConfig.makeApiClient(CoordinationV1Api);
    this.name = reportLeaseName(opts.electionName, opts.identity);
    this.ttlMs = opts.ttlMs ?? 30_000;
    this.log = opts.logger ?? silentLogger;
  }

  start(): void {
    this.write();
  }

  /** The connected pods changed: write soon. */
  changed(): void {
    if (this.closed || this.debounce) return;
    this.debounce = setTimeout(() => {
      this.debounce = undefined;
      this.write();
    }, this.opts.debounceMs ?? 100);
    this.debounce.unref();
  }

  /** Stops writing and deletes the report, so the leader stops counting these pods at once. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.debounce);
    clearTimeout(this.renew);
    await this.writing;
    try {
      await this.api.deleteNamespacedLease({ name: this.name, namespace: this.opts.namespace });
    } catch {
      /* best effort: the report expires anyway */
    }
  }

  private write(): void {
    if (this.closed) return;
    if (this.writing) {
      this.again = true;
      return;
    }
    clearTimeout(this.renew);
    this.writing = this.writeOnce().finally(() => {
      this.writing = undefined;
      if (this.closed) return;
      if (this.again) {
        this.again = false;
        this.write();
        return;
      }
      this.renew = setTimeout(() => this.write(), Math.max(100, Math.floor(this.ttlMs / 3)));
      this.renew.unref();
    });
  }

  private async writeOnce(): Promise<void> {
    const { namespace, electionName, identity } = this.opts;
    const body: V1Lease = {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: {
        name: this.name,
        namespace,
        labels: { [REPORT_LABEL]: electionName },
        annotations: { [REPORT_ANNOTATION]: encodeReport(this.opts.pods()) },
      },
      spec: {
        holderIdentity: identity,
        leaseDurationSeconds: Math.max(1, Math.ceil(this.ttlMs / 1000)),
        renewTime: microTime(new Date()) as any,
      },
    };
    try {
      await this.put(body);
      this.writes++;
      this.lastError = '';
    } catch (err) {
      const msg = (err as Error).message;
      if (msg !== this.lastError) this.log.warn({ err: msg }, 'could not write the pod report; retrying');
      this.lastError = msg;
    }
  }

  /**
   * Writes the Lease with optimistic concurrency: a Lease cannot be updated without a resourceVersion
   * (the API server answers 422 "must be specified for an update"), so every update carries the one
   * of our last write (or of a fresh read), and a conflict re-reads and tries again.
   */
  private async put(body: V1Lease): Promise<void> {
    const { namespace } = this.opts;
    for (let attempt = 1; ; attempt++) {
      if (this.resourceVersion === undefined) {
        try {
          const cur = await this.api.readNamespacedLease({ name: this.name, namespace });
          this.resourceVersion = cur.metadata?.resourceVersion;
        } catch (err) {
          if (statusCode(err) !== 404) throw err;
          const created = await this.api.createNamespacedLease({ namespace, body });
          this.resourceVersion = created.metadata?.resourceVersion;
          return;
        }
      }
      try {
        const updated = await this.api.replaceNamespacedLease({
          name: this.name,
          namespace,
          body: { ...body, metadata: { ...body.metadata, resourceVersion: this.resourceVersion } },
        });
        this.resourceVersion = updated.metadata?.resourceVersion;
        return;
      } catch (err) {
        this.resourceVersion = undefined; // read again (or create) next time
        const code = statusCode(err);
        if ((code !== 409 && code !== 404) || attempt >= 3) throw err;
      }
    }
  }
}
