// The rule for a domain claimed by several documents (docs/operator.md, "The domain rule"), as a pure
// function so the operator and the ratelimit-config command line decide the same way:
// a domain belongs to the INCUMBENT claim (the operator's: a resource whose last accepted generation already
// serves the domain), else to the OLDEST claim (creation time, then key). Another claim of it is a
// DomainConflict unless both the owner and it set mergeDomain; then its top-level descriptors are
// appended, oldest first, and a top-level composite key an older member already defines makes the
// newer claim a DescriptorConflict, as a whole.
import { compositeKey } from './keys.js';

/**
 * The ratelimit document of a RateLimitConfig resource's spec: the spec without the resource's own field
 * (mergeDomain, which the domain rule reads). The operator, the standalone control plane and
 * `ratelimit-config` all read a resource through this, so they accept the same resources.
 */
export function manifestDocument(spec: unknown): Record<string, unknown> {
  if (spec === null || typeof spec !== 'object' || Array.isArray(spec)) return {};
  const { mergeDomain: _merge, ...doc } = spec as Record<string, unknown>;
  return doc;
}

export interface DomainClaim {
  /** `namespace/name` of a resource (or any unique name): the tie-breaker and the name in messages. */
  readonly key: string;
  /** Creation time in ms; NaN or undefined sorts last (as a resource without creationTimestamp). */
  readonly createdMs?: number;
  readonly domain: string;
  readonly descriptors?: readonly unknown[];
  readonly mergeDomain: boolean;
  /**
   * This claim already serves the domain (the operator: its last accepted generation claims it), so it holds
   * the domain against claims that arrive by an edit, whatever their ages. Files in Git have none.
   */
  readonly incumbent?: boolean;
}

export interface RejectedClaim<C extends DomainClaim> {
  readonly claim: C;
  readonly reason: 'DomainConflict' | 'DescriptorConflict';
  readonly message: string;
}

export interface DomainResolution<C extends DomainClaim> {
  readonly domain: string;
  /** Claims served, owner first. */
  readonly members: readonly C[];
  readonly rejected: readonly RejectedClaim<C>[];
  /** The served document: the members' top-level descriptors, oldest first. */
  readonly document: { domain: string; descriptors: unknown[] };
}

function createdOf(c: DomainClaim): number {
  const t = c.createdMs;
  return t === undefined || Number.isNaN(t) ? Number.MAX_SAFE_INTEGER : t;
}

/** Oldest first; ties (creation times have second resolution) by key. */
export function compareClaimAge(a: DomainClaim, b: DomainClaim): number {
  const d = createdOf(a) - createdOf(b);
  if (d !== 0) return d;
  return a.key < b.key ? -1 : a.key > b.key ? 1 : 0;
}

function compositeKeyOf(d: unknown): string {
  const e = d as { key?: unknown; value?: unknown };
  return compositeKey(String(e.key), typeof e.value === 'string' ? e.value : undefined);
}

/** Incumbents first, then oldest first. */
function compareClaims(a: DomainClaim, b: DomainClaim): number {
  return Number(b.incumbent === true) - Number(a.incumbent === true) || compareClaimAge(a, b);
}

/** Groups valid claims by domain and applies the rule; one resolution per domain, in first-claim order. */
export function resolveDomainClaims<C extends DomainClaim>(claims: readonly C[]): DomainResolution<C>[] {
  const byDomain = new Map<string, C[]>();
  for (const c of [...claims].sort(compareClaims)) {
    let list = byDomain.get(c.domain);
    if (!list) byDomain.set(c.domain, (list = []));
    list.push(c);
  }
  const out: DomainResolution<C>[] = [];
  for (const [domain, claimsOfDomain] of byDomain) {
    const owner = claimsOfDomain[0]!;
    const members: C[] = [owner];
    const rejected: RejectedClaim<C>[] = [];
    const why = owner.incumbent ? 'which serves it' : 'the oldest resource claiming it';
    // top-level composite key -> the claim that defined it
    const definedBy = new Map<string, string>();
    for (const d of owner.descriptors ?? []) definedBy.set(compositeKeyOf(d), owner.key);
    for (const m of claimsOfDomain.slice(1)) {
      if (!owner.mergeDomain || !m.mergeDomain) {
        rejected.push({
          claim: m,
          reason: 'DomainConflict',
          message: owner.mergeDomain
            ? `domain "${domain}" belongs to ${owner.key} (${why}), which shares it: set spec.mergeDomain: true to merge into it`
            : `domain "${domain}" belongs to ${owner.key} (${why}); to share a domain both must set spec.mergeDomain: true`,
        });
        continue;
      }
      const clash = (m.descriptors ?? [])
        .map((d) => ({ ck: compositeKeyOf(d), by: definedBy.get(compositeKeyOf(d)) }))
        .find((c) => c.by !== undefined);
      if (clash) {
        rejected.push({
          claim: m,
          reason: 'DescriptorConflict',
          message: `descriptor '${clash.ck}' of shared domain "${domain}" is already defined by ${clash.by}`,
        });
        continue;
      }
      for (const d of m.descriptors ?? []) definedBy.set(compositeKeyOf(d), m.key);
      members.push(m);
    }
    out.push({
      domain,
      members,
      rejected,
      document: { domain, descriptors: members.flatMap((m) => [...(m.descriptors ?? [])]) },
    });
  }
  return out;
}
