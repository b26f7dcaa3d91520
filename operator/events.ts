// Kubernetes Events for a resource, from the change between its previous and new status: acceptance
// changes (Accepted / the rejection reason, FieldsNotServed with it), becoming Programmed, a NACK.
import type { CoreV1Api } from '@kubernetes/client-node';
import type { Logger } from '../common/index.js';
import { API_VERSION, KIND, type RateLimitConfigObject, type RateLimitConfigStatus } from './resource.js';

export interface StatusEventsOptions {
  readonly core: CoreV1Api;
  /** reportingInstance of the Events. */
  readonly identity: string;
  readonly logger: Logger;
  /** Called per Event created (metrics). */
  readonly onEvent?: (reason: string) => void;
}

export class StatusEvents {
  constructor(private readonly opts: StatusEventsOptions) {}

  async record(
    obj: RateLimitConfigObject,
    previous: RateLimitConfigStatus | undefined,
    next: RateLimitConfigStatus,
    lostFields: readonly string[],
  ): Promise<void> {
    const cond = (s: RateLimitConfigStatus | undefined, type: string) =>
      s?.conditions?.find((c) => c.type === type);
    const pa = cond(previous, 'Accepted');
    const na = cond(next, 'Accepted')!;
    const events: { type: 'Normal' | 'Warning'; reason: string; message: string }[] = [];
    if (
      !pa ||
      pa.status !== na.status ||
      pa.reason !== na.reason ||
      pa.observedGeneration !== na.observedGeneration
    ) {
      events.push(
        na.status === 'True'
          ? { type: 'Normal', reason: 'Accepted', message: na.message }
          : { type: 'Warning', reason: na.reason, message: na.message },
      );
      // Accepted, yet part of the spec will never reach a pod: say so where people look.
      if (na.status === 'True' && lostFields.length > 0) {
        events.push({
          type: 'Warning',
          reason: 'FieldsNotServed',
          message: `accepted, but the xDS message cannot carry these fields, so pods never see them: ${lostFields.join(', ')}`,
        });
      }
    }
    const pp = cond(previous, 'Programmed');
    const np = cond(next, 'Programmed')!;
    const changed =
      !pp ||
      pp.status !== np.status ||
      pp.reason !== np.reason ||
      pp.observedGeneration !== np.observedGeneration;
    if (changed && np.status === 'True')
      events.push({ type: 'Normal', reason: 'Programmed', message: np.message });
    if (changed && (np.reason === 'Nacked' || np.reason === 'TooLarge'))
      events.push({ type: 'Warning', reason: np.reason, message: np.message });
    for (const e of events) await this.create(obj, e);
  }

  private async create(
    obj: RateLimitConfigObject,
    e: { type: 'Normal' | 'Warning'; reason: string; message: string },
  ): Promise<void> {
    const namespace = obj.metadata.namespace ?? 'default';
    const now = new Date();
    try {
      await this.opts.core.createNamespacedEvent({
        namespace,
        body: {
          metadata: { generateName: `${obj.metadata.name}.`, namespace },
          involvedObject: {
            apiVersion: API_VERSION,
            kind: KIND,
            name: obj.metadata.name,
            namespace,
            uid: obj.metadata.uid,
            resourceVersion: obj.metadata.resourceVersion,
          },
          type: e.type,
          reason: e.reason,
          message: e.message.slice(0, 1024),
          source: { component: 'ratelimit-operator' },
          reportingComponent: 'ratelimit-operator',
          reportingInstance: this.opts.identity,
          firstTimestamp: now,
          lastTimestamp: now,
          count: 1,
        },
      });
      this.opts.onEvent?.(e.reason);
    } catch (err) {
      // Events are best effort: never retry a status write because of one.
      this.opts.logger.warn({ err: (err as Error).message, reason: e.reason }, 'could not create Event');
    }
  }
}
