// From the set of RateLimitConfig resources to (1) the xDS resources every replica serves and (2) a
// verdict per resource. A pure function of the API objects, so every replica computes the same
// snapshot, hence the same content-hashed version.
//
// The domain rule (docs/operator.md; one definition in ratelimit/config/domain-claims.ts): a domain belongs to the OLDEST resource that claims it
// (creationTimestamp, then namespace/name). Other resources claiming it get Accepted=False with reason
// DomainConflict naming the owner, unless both the owner and they set spec.mergeDomain: true; then
// their descriptors are appended to the owner's, oldest first, and a top-level descriptor (key and
// value) already defined by an older member makes the newer resource DescriptorConflict, as a whole.
//
// Incumbency comes first: a resource whose last accepted generation (status.lastAccepted) claims the
// domain keeps it against any resource that claims it by an edit, whatever their ages.
//
// Last good generation: a resource whose current generation is rejected (Invalid, DomainNotAllowed,
// DomainConflict, DescriptorConflict) keeps its last accepted generation served, read back from its
// status (status.lastAccepted, written by the leader; every replica reads it from the watch, so the
// snapshot stays a pure function of the API objects). Without one, it is not served at all.
//
// Tenant isolation (domain-policy.ts): a domain the resource's namespace may not claim is
// Accepted=False reason DomainNotAllowed and never served, not even from lastAccepted.
import { resourceFromDocument, type Resource } from '../control-plane/index.js';
import {
  checkDocument,
  compareClaimAge,
  fieldsLostOverXds,
  compileConfig,
  ConfigError,
  manifestDocument,
  resolveDomainClaims,
  type DomainClaim,
} from '../ratelimit/config/index.js';
import type { DomainPolicy } from './domain-policy.js';
import { objectKey, type RateLimitConfigObject } from './resource.js';

export type AcceptedReason =
  'Accepted' | 'Invalid' | 'DomainNotAllowed' | 'DomainConflict' | 'DescriptorConflict';

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
  /**
   * The generation pods are served: the current one when accepted, the last accepted one while a newer
   * one is rejected; undefined when the resource is not served.
   */
  readonly servedGeneration?: number;
  /**
   * What status.lastAccepted should hold (the served generation and its spec); null: remove it (a spec
   * too large to keep twice in one object); undefined: keep it as it is.
   */
  readonly lastAccepted?: LastAccepted | null;
}

/** The last accepted generation of a resource and its spec as JSON, kept in status as the fallback. */
export interface LastAccepted {
  readonly generation: number;
  readonly spec: string;
}

export interface ReconcileOptions {
  /** Which namespaces may claim which domains; undefined: any namespace any domain. */
  readonly policy?: DomainPolicy;
}

export interface ReconcileResult {
  /** One xDS RateLimitConfig per domain, named by the domain. */
  readonly resources: readonly Resource[];
  /** Per resource key (`namespace/name`). */
  readonly verdicts: ReadonlyMap<string, Verdict>;
  /** What the snapshot contains: resource key -> served generation. */
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

/** Oldest first; ties (second resolution) by namespace/name: the domain rule's age order. */
export function byAge(a: RateLimitConfigObject, b: RateLimitConfigObject): number {
  return compareClaimAge(
    { key: objectKey(a), createdMs: creationTime(a), domain: '', mergeDomain: false },
    { key: objectKey(b), createdMs: creationTime(b), domain: '', mergeDomain: false },
  );
}

/** The ratelimit document of a resource: spec without the operator's own fields. */
export function specDocument(o: RateLimitConfigObject): Record<string, unknown> {
  return manifestDocument(o.spec);
}

function errorsMessage(errors: readonly Error[]): string {
  const shown = errors.slice(0, MAX_ERRORS).map((e) => e.message);
  const more = errors.length > MAX_ERRORS ? ` (and ${errors.length - MAX_ERRORS} more)` : '';
  return shown.join('; ') + more;
}

/** A claim of the domain rule (ratelimit/config domain-claims.ts) with what reconcile needs of it. */
interface Member extends DomainClaim {
  readonly obj: RateLimitConfigObject;
  /** The generation this document is (the current one, or the last accepted one as the fallback). */
  readonly generation: number;
  readonly doc: { domain: string; descriptors?: unknown[] };
  readonly spec: Record<string, unknown>;
  /** This is status.lastAccepted, served because the current generation is rejected. */
  readonly fallback: boolean;
  /** Its last accepted generation claims this member's domain: it holds the domain against newcomers. */
  readonly incumbent: boolean;
}

interface Rejection {
  readonly reason: AcceptedReason;
  readonly message: string;
}

/** Validation (the full compile, as a pod does it) and the tenant rule; the document when it passes. */
function check(
  key: string,
  namespace: string,
  spec: Record<string, unknown>,
  policy: DomainPolicy | undefined,
): { doc: Member['doc'] } | Rejection {
  const { mergeDomain: _merge, ...doc } = spec;
  let errors: Error[] = checkDocument(key, doc).errors;
  if (errors.length === 0) {
    try {
      compileConfig([{ name: key, document: doc }]);
    } catch (err) {
      errors = [err as Error];
    }
  }
  if (errors.length > 0) return { reason: 'Invalid', message: errorsMessage(errors) };
  const domain = doc.domain as string;
  if (policy && !policy.allows(namespace, domain)) {
    return {
      reason: 'DomainNotAllowed',
      message: `namespace "${namespace}" may not claim domain "${domain}" (--domain-policy allows it: ${policy.allowedFor(namespace)})`,
    };
  }
  return { doc: doc as Member['doc'] };
}

/**
 * The spec is kept a second time in status: past this size it is not (an object is at most 1.5 MiB in
 * etcd), and such a resource has no fallback.
 */
export const MAX_LAST_ACCEPTED_SPEC = 512 * 1024;

function lastAcceptedFor(generation: number, spec: Record<string, unknown>): LastAccepted | null {
  const text = JSON.stringify(spec);
  return text.length <= MAX_LAST_ACCEPTED_SPEC ? { generation, spec: text } : null;
}

/** status.lastAccepted of an object, parsed; undefined when absent or malformed. */
function lastAcceptedOf(
  obj: RateLimitConfigObject,
): { generation: number; spec: Record<string, unknown> } | undefined {
  const la = obj.status?.lastAccepted;
  if (!la || typeof la.generation !== 'number' || typeof la.spec !== 'string') return undefined;
  try {
    const spec = JSON.parse(la.spec) as unknown;
    if (typeof spec !== 'object' || spec === null || Array.isArray(spec)) return undefined;
    return { generation: la.generation, spec: spec as Record<string, unknown> };
  } catch {
    return undefined;
  }
}

interface Assignment {
  readonly served: Member[][];
  readonly losers: Map<string, Rejection>;
}

/** The domain rule over one set of candidates (one per resource). */
function assignDomains(candidates: readonly Member[]): Assignment {
  const served: Member[][] = [];
  const losers = new Map<string, Rejection>();
  for (const { members, rejected } of resolveDomainClaims(candidates)) {
    served.push([...members]);
    for (const { claim, reason, message } of rejected) losers.set(claim.key, { reason, message });
  }
  return { served, losers };
}

export function reconcile(
  objects: readonly RateLimitConfigObject[],
  opts: ReconcileOptions = {},
): ReconcileResult {
  const verdicts = new Map<string, Verdict>();
  const contents = new Map<string, number>();
  const live = objects.filter((o) => o.metadata.deletionTimestamp === undefined).sort(byAge);

  /** Why the current generation is not served (absent: it is a candidate). */
  const rejected = new Map<string, Rejection>();
  /** Valid last accepted generations that differ from the current one. */
  const fallbacks = new Map<string, Member>();
  const candidates = new Map<string, Member>();
  for (const obj of live) {
    const key = objectKey(obj);
    const namespace = obj.metadata.namespace ?? '';
    const generation = obj.metadata.generation ?? 0;
    const last = lastAcceptedOf(obj);
    const lastDomain = typeof last?.spec.domain === 'string' ? last.spec.domain : undefined;
    const spec = obj.spec ?? {};
    const cur = check(key, namespace, spec, opts.policy);
    const member = (
      doc: Member['doc'],
      s: Record<string, unknown>,
      g: number,
      fallback: boolean,
    ): Member => ({
      obj,
      key,
      generation: g,
      doc,
      createdMs: creationTime(obj),
      domain: doc.domain,
      descriptors: doc.descriptors,
      mergeDomain: s.mergeDomain === true,
      spec: s,
      fallback,
      incumbent: lastDomain === doc.domain,
    });
    if ('doc' in cur) candidates.set(key, member(cur.doc, spec, generation, false));
    else rejected.set(key, cur);
    if (last && last.generation !== generation) {
      const prev = check(key, namespace, last.spec, opts.policy);
      // A last accepted generation the policy (or a newer validator) now refuses is not served either.
      if ('doc' in prev) fallbacks.set(key, member(prev.doc, last.spec, last.generation, true));
    }
    if (!('doc' in cur) && fallbacks.has(key)) candidates.set(key, fallbacks.get(key)!);
  }

  // A current generation that loses its domain falls back to its last accepted one; repeat until no
  // loser has a fallback left (each resource falls back at most once).
  let assignment: Assignment;
  for (;;) {
    assignment = assignDomains(live.map((o) => candidates.get(objectKey(o))).filter((m) => m !== undefined));
    let changed = false;
    for (const [key, why] of assignment.losers) {
      const m = candidates.get(key)!;
      const fb = fallbacks.get(key);
      if (!m.fallback && fb) {
        rejected.set(key, why);
        candidates.set(key, fb);
        changed = true;
      }
    }
    if (!changed) break;
  }

  const resources: Resource[] = [];
  const servedBy = new Map<string, Member>();
  for (const merged of assignment.served) {
    const domain = merged[0].doc.domain;
    const document = { domain, descriptors: merged.flatMap((m) => m.doc.descriptors ?? []) };
    try {
      compileConfig([{ name: domain, document }]);
    } catch (err) {
      // Not expected (each member compiled alone and top-level keys are distinct); fail closed per domain.
      for (const m of merged) {
        rejected.set(m.key, {
          reason: 'Invalid',
          message: err instanceof ConfigError ? err.message : String(err),
        });
      }
      continue;
    }
    resources.push(resourceFromDocument(domain, document));
    for (const m of merged) {
      servedBy.set(m.key, m);
      contents.set(m.key, m.generation);
    }
    const members = merged.map((x) => x.key).join(', ');
    for (const m of merged) {
      if (m.fallback) continue;
      const lostFields = lostFieldsOf(m.doc);
      verdicts.set(m.key, {
        key: m.key,
        generation: m.generation,
        domain,
        accepted: true,
        reason: 'Accepted',
        message:
          (merged.length > 1
            ? `domain "${domain}" is served, merged from ${members}`
            : `domain "${domain}" is served`) + lostFieldsMessage(lostFields),
        lostFields,
        servedGeneration: m.generation,
        lastAccepted: lastAcceptedFor(m.generation, m.spec),
      });
    }
  }

  for (const obj of live) {
    const key = objectKey(obj);
    if (verdicts.has(key)) continue;
    const generation = obj.metadata.generation ?? 0;
    const why = rejected.get(key) ?? assignment.losers.get(key)!;
    const served = servedBy.get(key);
    const domain = typeof obj.spec?.domain === 'string' ? obj.spec.domain : undefined;
    verdicts.set(key, {
      key,
      generation,
      domain,
      accepted: false,
      reason: why.reason,
      message: why.message,
      ...(served ? { servedGeneration: served.generation } : {}),
    });
  }
  return { resources, verdicts, contents };
}
