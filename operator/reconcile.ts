// From the set of RateLimitConfig resources to (1) the xDS resources every replica serves and (2) a
// verdict per resource. A pure function of the API objects, so every replica computes the same
// snapshot, hence the same content-hashed version.
//
// The domain rule (docs/operator.md; one definition in ratelimit/config resolveDomainClaims, shared
// with the ratelimit-config command line): a domain belongs to the OLDEST resource that claims it
// (creationTimestamp, then namespace/name). Other resources claiming it get Accepted=False with reason
// DomainConflict naming the owner, unless both the owner and they set spec.mergeDomain: true; then
// their descriptors are appended to the owner's, oldest first, and a top-level descriptor (key and
// value) already defined by an older member makes the newer resource DescriptorConflict, as a whole.
//
// An invalid resource (the service's own validator) is Accepted=False reason Invalid and is not served
// at all; every other domain keeps serving.
import { resourceFromDocument, type Resource } from '../control-plane/index.js';
import { fieldsLostOverXds } from '../proto/index.js';
import {
  compareClaimAge,
  compileConfig,
  ConfigError,
  resolveDomainClaims,
  validateDocument,
  type DomainClaim,
} from '../ratelimit/config/index.js';
import { objectKey, type RateLimitConfigObject } from './resource.js';

export type AcceptedReason = 'Accepted' | 'Invalid' | 'DomainConflict' | 'DescriptorConflict';

export interface Verdict {
  readonly key: string;
  readonly generation: number;
  readonly domain: string | undefined;
  readonly accepted: boolean;
  readonly reason: AcceptedReason;
  readonly message: string;
  /**
   * Accepted, but these fields (paths under spec) never reach pods: the xDS message has no place for
   * them (value_to_metric, share_threshold, metadata). Empty when nothing is lost.
   */
  readonly lostFields?: readonly string[];
}

export interface ReconcileResult {
  /** One xDS RateLimitConfig per domain, named by the domain. */
  readonly resources: readonly Resource[];
  /** Per resource key (`namespace/name`). */
  readonly verdicts: ReadonlyMap<string, Verdict>;
  /** What the snapshot contains: resource key -> generation. */
  readonly contents: ReadonlyMap<string, number>;
}

/** At most this many validator messages in a status message. */
const MAX_ERRORS = 5;
/** At most this many lost field paths in a status message (the Event lists them all, up to its size). */
const MAX_LOST_FIELDS = 10;

/** Spec paths of the fields a pod will never see (the xDS message cannot carry them). */
export function lostFieldsOf(doc: Record<string, unknown>): string[] {
  return fieldsLostOverXds(doc).map((p) => `spec.${p}`);
}

/** `; not served over xDS (pods never see them): <paths>` or '' when nothing is lost. */
export function lostFieldsMessage(lost: readonly string[], max = MAX_LOST_FIELDS): string {
  if (lost.length === 0) return '';
  const shown = lost.slice(0, max).join(', ');
  const more = lost.length > max ? ` (and ${lost.length - max} more)` : '';
  return `; not carried over xDS, so pods never see: ${shown}${more}`;
}

function creationTime(o: RateLimitConfigObject): number {
  const c = o.metadata.creationTimestamp;
  const t = c instanceof Date ? c.getTime() : typeof c === 'string' ? Date.parse(c) : NaN;
  return Number.isNaN(t) ? Number.MAX_SAFE_INTEGER : t;
}

/** Oldest first; ties (second resolution) by namespace/name (the domain rule's order, ratelimit/config). */
export function byAge(a: RateLimitConfigObject, b: RateLimitConfigObject): number {
  return compareClaimAge(
    { key: objectKey(a), createdMs: creationTime(a), domain: '', mergeDomain: false },
    { key: objectKey(b), createdMs: creationTime(b), domain: '', mergeDomain: false },
  );
}

/** The ratelimit document of a resource: spec without the operator's own fields. */
export function specDocument(o: RateLimitConfigObject): Record<string, unknown> {
  const { mergeDomain: _merge, ...doc } = o.spec ?? {};
  return doc;
}

function errorsMessage(errors: readonly Error[]): string {
  const shown = errors.slice(0, MAX_ERRORS).map((e) => e.message);
  const more = errors.length > MAX_ERRORS ? ` (and ${errors.length - MAX_ERRORS} more)` : '';
  return shown.join('; ') + more;
}

interface Member extends DomainClaim {
  readonly obj: RateLimitConfigObject;
  readonly doc: { domain: string; descriptors?: unknown[] };
}

export function reconcile(objects: readonly RateLimitConfigObject[]): ReconcileResult {
  const verdicts = new Map<string, Verdict>();
  const contents = new Map<string, number>();
  const members: Member[] = [];
  const live = objects.filter((o) => o.metadata.deletionTimestamp === undefined).sort(byAge);

  for (const obj of live) {
    const key = objectKey(obj);
    const generation = obj.metadata.generation ?? 0;
    const doc = specDocument(obj);
    const domain = typeof doc.domain === 'string' ? doc.domain : undefined;
    let errors: Error[] = validateDocument(key, doc);
    if (errors.length === 0) {
      // The full compile, as a pod does it: anything it would refuse is refused here first.
      try {
        compileConfig([{ name: key, document: doc }]);
      } catch (err) {
        errors = [err as Error];
      }
    }
    if (errors.length > 0) {
      verdicts.set(key, {
        key,
        generation,
        domain,
        accepted: false,
        reason: 'Invalid',
        message: errorsMessage(errors),
      });
      continue;
    }
    const d = doc as Member['doc'];
    members.push({
      obj,
      key,
      doc: d,
      createdMs: creationTime(obj),
      domain: d.domain,
      descriptors: d.descriptors,
      mergeDomain: obj.spec?.mergeDomain === true,
    });
  }

  const resources: Resource[] = [];
  for (const { domain, members: merged, rejected, document } of resolveDomainClaims(members)) {
    for (const { claim: m, reason, message } of rejected) {
      verdicts.set(m.key, {
        key: m.key,
        generation: m.obj.metadata.generation ?? 0,
        domain,
        accepted: false,
        reason,
        message,
      });
    }
    try {
      compileConfig([{ name: domain, document }]);
    } catch (err) {
      // Not expected (each member compiled alone and top-level keys are distinct); fail closed per domain.
      for (const m of merged) {
        verdicts.set(m.key, {
          key: m.key,
          generation: m.obj.metadata.generation ?? 0,
          domain,
          accepted: false,
          reason: 'Invalid',
          message: err instanceof ConfigError ? err.message : String(err),
        });
      }
      continue;
    }
    resources.push(resourceFromDocument(domain, document));
    for (const m of merged) {
      const generation = m.obj.metadata.generation ?? 0;
      contents.set(m.key, generation);
      const lostFields = lostFieldsOf(m.doc);
      verdicts.set(m.key, {
        key: m.key,
        generation,
        domain,
        accepted: true,
        reason: 'Accepted',
        message:
          (merged.length > 1
            ? `domain "${domain}" is served, merged from ${merged.map((x) => x.key).join(', ')}`
            : `domain "${domain}" is served`) + lostFieldsMessage(lostFields),
        lostFields,
      });
    }
  }
  return { resources, verdicts, contents };
}
