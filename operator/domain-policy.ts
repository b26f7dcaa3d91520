// Tenant isolation: which namespaces may claim which domains (--domain-policy, docs/operator.md).
//
// The rule text is `<namespace>=<domain pattern>[,<pattern>...]` entries separated by `;`, e.g.
// `team-a=checkout,checkout-*;team-b=search;*={namespace}-*`. A namespace of `*` matches every
// namespace; in a domain pattern `*` matches any run of characters and `{namespace}` stands for the
// resource's namespace. A resource may claim a domain when some entry for its namespace has a matching
// pattern. With a policy set, a namespace no entry names may claim nothing. Hand-written: a few lines of
// glob matching, and the rule must be exactly this one (no library's glob dialect to document).

export interface DomainPolicy {
  /** Whether a resource in `namespace` may claim `domain`. */
  allows(namespace: string, domain: string): boolean;
  /** The patterns `namespace` may claim, for messages (`none` when none). */
  allowedFor(namespace: string): string;
  /** The rule as given. */
  readonly text: string;
}

interface Entry {
  readonly namespace: string;
  readonly patterns: readonly string[];
}

const NAMESPACE = /^(\*|[a-z0-9]([-a-z0-9]*[a-z0-9])?)$/;
const PATTERN = /^[A-Za-z0-9_.:/*{}-]+$/;

function globMatches(pattern: string, text: string): boolean {
  const parts = pattern.split('*');
  if (parts.length === 1) return pattern === text;
  const first = parts[0];
  const last = parts[parts.length - 1];
  if (!text.startsWith(first) || text.length < first.length + last.length || !text.endsWith(last)) {
    return false;
  }
  let at = first.length;
  const end = text.length - last.length;
  for (const mid of parts.slice(1, -1)) {
    const i = text.indexOf(mid, at);
    if (i < 0 || i + mid.length > end) return false;
    at = i + mid.length;
  }
  return true;
}

/** Parses a policy; throws an Error naming the bad entry. Empty text: no policy (undefined). */
export function parseDomainPolicy(text: string | undefined): DomainPolicy | undefined {
  if (text === undefined || text.trim() === '') return undefined;
  const entries: Entry[] = [];
  for (const raw of text.split(';')) {
    const item = raw.trim();
    if (item === '') continue;
    const eq = item.indexOf('=');
    const namespace = eq < 0 ? '' : item.slice(0, eq).trim();
    const patterns = (eq < 0 ? '' : item.slice(eq + 1))
      .split(',')
      .map((p) => p.trim())
      .filter((p) => p !== '');
    if (!NAMESPACE.test(namespace) || patterns.length === 0) {
      throw new Error(
        `--domain-policy: "${item}" is not <namespace>=<domain pattern>[,<pattern>...] (namespace: a name or *)`,
      );
    }
    for (const p of patterns) {
      if (!PATTERN.test(p) || p.replaceAll('{namespace}', '').match(/[{}]/)) {
        throw new Error(
          `--domain-policy: pattern "${p}" of "${namespace}": letters, digits, _.:/-, * and {namespace} only`,
        );
      }
    }
    entries.push({ namespace, patterns });
  }
  if (entries.length === 0) return undefined;
  const patternsOf = (namespace: string) =>
    entries
      .filter((e) => e.namespace === '*' || e.namespace === namespace)
      .flatMap((e) => e.patterns.map((p) => p.replaceAll('{namespace}', namespace)));
  return {
    text,
    allows: (namespace, domain) => patternsOf(namespace).some((p) => globMatches(p, domain)),
    allowedFor: (namespace) => patternsOf(namespace).join(', ') || 'none',
  };
}
