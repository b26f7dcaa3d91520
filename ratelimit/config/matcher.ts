// The compiled configuration and the reference's GetLimit. Compiled once per load into per-level
// maps, so a request costs a map lookup per entry (plus an ordered wildcard scan when the level has
// wildcards), with no regex and no string building except where metrics need request values.
// A `*` anywhere in a value is a wildcard matching any run of characters (upstream 6bcd4d2; before
// it only a trailing `*` was). Each pattern is split into literal parts once per load and matched
// with startsWith/endsWith/indexOf: a glob of `*` alone needs no backtracking, so no regex.
import { ConfigError } from './errors.js';
import type {
  ConfigFeature,
  DescriptorEntry,
  LimitMatch,
  RateLimitConfig,
  RateLimitRule,
  RequestDescriptor,
  Unit,
} from './types.js';
import { UNIT_SECONDS } from './units.js';
import { NO_REPLACES, compileRule, dumpRule } from './rules.js';
import { compositeKey, type ConfigDoc, type DescriptorDoc } from './validate.js';

interface MatchNode {
  /** The entry's `key`. */
  readonly key: string;
  /** The reference's map key for this entry: `key` or `key_value`. */
  readonly finalKey: string;
  /** `domain.k1_v1.k2`: the stats key of a rule at this node. */
  readonly pathKey: string;
  readonly rule: RateLimitRule | undefined;
  readonly detailedMetric: boolean;
  readonly valueToMetric: boolean;
  readonly shareThreshold: boolean;
  /** Undefined when the entry has no nested entries. */
  children: MatchLevel | undefined;
}

/** A rule's default name segment for an entry: `key=value`, or `key` without a value. */
function nameSegment(key: string, value: string | undefined): string {
  return value === undefined || value === '' ? key : `${key}=${value}`;
}

/**
 * A wildcard entry's `key_value` pattern, split at its stars: `prefix*inner[0]*...*suffix`. It
 * matches a request's `key_value` that starts with prefix, ends with suffix and holds the inner
 * parts in order between them (each '*' matches any run, also an empty one).
 */
interface WildcardPattern {
  readonly prefix: string;
  /** Non-empty literal parts between the first and the last '*'. */
  readonly inner: readonly string[];
  readonly suffix: string;
  /** prefix + inner + suffix lengths: shorter strings cannot match. */
  readonly minLength: number;
  readonly node: MatchNode;
}

interface MatchLevel {
  /** key_value and key-only entries, in one map as in the reference (composite keys may collide). */
  readonly byKey: Map<string, MatchNode>;
  /** Wildcard entries (see compileWildcard), in config order (the first match wins). */
  readonly wildcards: WildcardPattern[];
  /** Config order, for dump(). */
  readonly ordered: MatchNode[];
}

function newLevel(): MatchLevel {
  return { byKey: new Map(), wildcards: [], ordered: [] };
}

/**
 * The wildcard of an entry, if any. A '*' in the value is a wildcard wherever it stands; a '*' in
 * the key is literal, except that a key-only entry whose key ends in '*' keeps the reference's
 * trailing-'*' prefix rule on the composite key (a quirk of comparing `key_value` strings).
 */
function compileWildcard(
  key: string,
  value: string | undefined,
  node: MatchNode,
): WildcardPattern | undefined {
  let prefix: string;
  let inner: string[];
  let suffix: string;
  if (value !== undefined && value.includes('*')) {
    const parts = value.split('*');
    prefix = key + '_' + parts[0]!;
    suffix = parts[parts.length - 1]!;
    inner = parts.slice(1, -1).filter((p) => p !== '');
  } else if (node.finalKey.endsWith('*')) {
    prefix = node.finalKey.slice(0, -1);
    suffix = '';
    inner = [];
  } else {
    return undefined;
  }
  let minLength = prefix.length + suffix.length;
  for (const p of inner) minLength += p.length;
  return { prefix, inner: Object.freeze(inner), suffix, minLength, node };
}

/** Leftmost-first glob match of `s` against a pattern of literals and '*' (linear, no backtracking needed). */
function wildcardMatches(s: string, w: WildcardPattern): boolean {
  if (s.length < w.minLength || !s.startsWith(w.prefix)) return false;
  if (w.suffix !== '' && !s.endsWith(w.suffix)) return false;
  const inner = w.inner;
  if (inner.length === 0) return true;
  let pos = w.prefix.length;
  const end = s.length - w.suffix.length;
  for (let i = 0; i < inner.length; i++) {
    const part = inner[i]!;
    const at = s.indexOf(part, pos);
    if (at < 0 || at + part.length > end) return false;
    pos = at + part.length;
  }
  return true;
}

/** The features of the rules in a compiled tree (for negotiation and backend checks). */
function collectFeatures(level: MatchLevel, out: Set<ConfigFeature>): void {
  for (const node of level.ordered) {
    const rule = node.rule;
    if (rule !== undefined) {
      if (rule.limits.length > 1) out.add('rate_limits');
      for (const l of rule.limits) {
        if (l.algorithm === 'sliding_window') out.add('sliding_window');
        else if (l.algorithm === 'token_bucket') out.add('token_bucket');
      }
    }
    if (node.children !== undefined) collectFeatures(node.children, out);
  }
}

/** Loads entries into a level, as the reference's loadDescriptors (also used to merge a domain). */
function loadLevel(
  source: string,
  level: MatchLevel,
  parentKey: string,
  entries: readonly DescriptorDoc[],
  field: string,
  /** Index of entries[0] in the document's list (for error fields when loading a slice). */
  offset = 0,
  /** The default rule name's prefix (`domain.key=value.`); at the top level it equals parentKey. */
  parentName = parentKey,
): void {
  entries.forEach((entry, j) => {
    const i = j + offset;
    const finalKey = compositeKey(entry.key, entry.value);
    const pathKey = parentKey + finalKey;
    if (level.byKey.has(finalKey)) {
      throw new ConfigError(source, `${field}[${i}]`, `duplicate descriptor composite key '${pathKey}'`);
    }
    const namePath = parentName + nameSegment(entry.key, entry.value);
    const node: MatchNode = {
      key: entry.key,
      finalKey,
      pathKey,
      rule: compileRule(entry, pathKey, namePath),
      detailedMetric: entry.detailed_metric === true,
      valueToMetric: entry.value_to_metric === true,
      shareThreshold: entry.share_threshold === true,
      children: undefined,
    };
    if (entry.descriptors !== undefined && entry.descriptors.length > 0) {
      const children = newLevel();
      loadLevel(
        source,
        children,
        `${pathKey}.`,
        entry.descriptors,
        `${field}[${i}].descriptors`,
        0,
        `${namePath}.`,
      );
      node.children = children;
    }
    level.byKey.set(finalKey, node);
    level.ordered.push(node);
    const wildcard = compileWildcard(entry.key, entry.value, node);
    if (wildcard !== undefined) level.wildcards.push(wildcard);
  });
}

/** `key_` is a prefix of `s` (the reference's TrimPrefix(s, key + "_") strips something). */
function hasKeyPrefix(s: string, key: string): boolean {
  return s.length > key.length && s.charCodeAt(key.length) === 95 /* _ */ && s.startsWith(key);
}

/** strings.TrimPrefix(s, key + "_"). */
function trimKeyPrefix(s: string, key: string): string {
  return hasKeyPrefix(s, key) ? s.slice(key.length + 1) : s;
}

function dumpLevel(level: MatchLevel, out: string[], names: boolean): void {
  for (const node of level.ordered) {
    if (node.rule !== undefined) dumpRule(node.rule, names, out);
    if (node.children !== undefined) dumpLevel(node.children, out, names);
  }
}

/** Key paths of the nodes with a rule, depth first in config order. */
function collectKeyPaths(level: MatchLevel, path: string[], out: string[][]): void {
  for (const node of level.ordered) {
    path.push(node.key);
    if (node.rule !== undefined) out.push([...path]);
    if (node.children !== undefined) collectKeyPaths(node.children, path, out);
    path.pop();
  }
}

export class CompiledRateLimitConfig implements RateLimitConfig {
  readonly domains: readonly string[];
  readonly features: ReadonlySet<ConfigFeature>;
  private readonly roots: ReadonlyMap<string, MatchLevel>;

  constructor(roots: Map<string, MatchLevel>) {
    this.roots = roots;
    this.domains = Object.freeze([...roots.keys()]);
    const features = new Set<ConfigFeature>();
    for (const level of roots.values()) collectFeatures(level, features);
    this.features = features;
  }

  hasDomain(domain: string): boolean {
    return this.roots.has(domain);
  }

  dump(names = false): string {
    const out: string[] = [];
    for (const level of this.roots.values()) dumpLevel(level, out, names);
    return out.join('');
  }

  ruleKeyPaths(domain: string): readonly (readonly string[])[] {
    const root = this.roots.get(domain);
    const out: string[][] = [];
    if (root !== undefined) collectKeyPaths(root, [], out);
    return out;
  }

  getLimit(domain: string, descriptor: RequestDescriptor): LimitMatch | undefined {
    const root = this.roots.get(domain);
    if (root === undefined) return undefined;
    const entries = descriptor.entries;
    if (descriptor.limit != null)
      return overrideMatch(domain, entries, descriptor.limit.requestsPerUnit, descriptor.limit.unit);

    const n = entries.length;
    let level = root;
    let prevPath = domain;
    let found: MatchNode | undefined;
    // value_to_metric stats key, built only once a level's segment differs from the config key.
    let enhanced: string | undefined;
    // share_threshold: wildcard pattern per entry index ('' where none).
    let patterns: string[] | undefined;

    for (let i = 0; i < n; i++) {
      const { key, value } = entries[i]!;
      const lookup = key + '_' + value;
      let node = level.byKey.get(lookup);
      let wildcardKey: string | undefined;
      if (node === undefined) {
        const wildcards = level.wildcards;
        for (let j = 0; j < wildcards.length; j++) {
          if (wildcardMatches(lookup, wildcards[j]!)) {
            node = wildcards[j]!.node;
            wildcardKey = node.finalKey;
            break;
          }
        }
      }
      const matchedUsingValue = node !== undefined;
      if (node === undefined) node = level.byKey.get(key);
      // Without a node the walk ends here and no rule can be found.
      if (node === undefined) break;

      let sharePattern: string | undefined;
      if (wildcardKey !== undefined && node.shareThreshold) {
        sharePattern = trimKeyPrefix(wildcardKey, key);
        if (patterns === undefined) patterns = new Array<string>(n).fill('');
        patterns[i] = sharePattern;
      }

      // The reference's value_to_metric key segment for this level, when it is not node.finalKey.
      let segment: string | undefined;
      if (wildcardKey !== undefined) {
        if (sharePattern === undefined && node.valueToMetric) {
          const s = value !== '' ? lookup : key;
          if (s !== wildcardKey) segment = s;
        } else if (!hasKeyPrefix(wildcardKey, key)) {
          segment = key + '_' + wildcardKey;
        }
      } else if (matchedUsingValue) {
        if (value === '') segment = key;
      } else if (node.valueToMetric && value !== '') {
        segment = lookup;
      }
      if (segment !== undefined || enhanced !== undefined) {
        enhanced = (enhanced ?? prevPath) + '.' + (segment ?? node.finalKey);
      }

      if (node.rule !== undefined && i === n - 1) found = node;
      if (node.children === undefined) break;
      level = node.children;
      prevPath = node.pathKey;
    }

    if (found === undefined) return undefined;
    const rule = found.rule!;
    let statKey: string;
    if (found.detailedMetric) {
      statKey =
        patterns === undefined ? detailedKey(domain, entries) : sharedDetailedKey(domain, entries, patterns);
    } else {
      statKey = enhanced ?? rule.statKey;
    }
    const keyEntries = patterns === undefined ? entries : sharedEntries(entries, patterns);
    return { rule, statKey, keyEntries };
  }
}

/** detailed_metric: every level as key_value (the reference writes the '_' even for an empty value). */
function detailedKey(domain: string, entries: readonly DescriptorEntry[]): string {
  let s = domain;
  for (const e of entries) s += '.' + e.key + '_' + e.value;
  return s;
}

function sharedDetailedKey(
  domain: string,
  entries: readonly DescriptorEntry[],
  patterns: readonly string[],
): string {
  let s = domain;
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i]!;
    const p = patterns[i]!;
    s += '.' + (p !== '' ? e.key + '_' + p : compositeKey(e.key, e.value));
  }
  return s;
}

function sharedEntries(entries: readonly DescriptorEntry[], patterns: readonly string[]): DescriptorEntry[] {
  return entries.map((e, i) => (patterns[i] !== '' ? { key: e.key, value: patterns[i]! } : e));
}

/** A request-supplied limit: an ad-hoc rule keyed by the request's own entries, never shadowed. */
function overrideMatch(
  domain: string,
  entries: readonly DescriptorEntry[],
  requestsPerUnit: number,
  unit: Unit,
): LimitMatch {
  let path = '';
  let namePath = domain;
  for (const e of entries) {
    if (path !== '') path += '.';
    path += compositeKey(e.key, e.value);
    namePath += '.' + nameSegment(e.key, e.value);
  }
  const statKey = domain + '.' + path;
  const rule: RateLimitRule = {
    requestsPerUnit,
    unit,
    unitSeconds: UNIT_SECONDS[unit] ?? 0,
    name: '',
    ruleName: namePath,
    unlimited: false,
    shadowMode: false,
    quotaMode: false,
    replaces: NO_REPLACES,
    statKey,
    limits: [
      {
        algorithm: 'fixed_window',
        requestsPerUnit,
        unit,
        unitSeconds: UNIT_SECONDS[unit] ?? 0,
        burst: 0,
        name: namePath,
      },
    ],
    scripted: false,
  };
  return { rule, statKey, keyEntries: entries };
}

/**
 * Builds the compiled configuration from validated documents, in order. A second document for a
 * domain is an error unless `merge`; then its entries join the domain's top level (duplicates of a
 * composite key are still errors).
 */
export function buildConfig(
  docs: readonly { name: string; doc: ConfigDoc }[],
  merge: boolean,
): RateLimitConfig {
  const roots = new Map<string, MatchLevel>();
  for (const { name, doc } of docs) {
    let root = roots.get(doc.domain);
    if (root !== undefined && !merge) {
      throw new ConfigError(name, 'domain', `duplicate domain '${doc.domain}' in config file`);
    }
    if (root === undefined) {
      root = newLevel();
      roots.set(doc.domain, root);
    }
    loadLevel(name, root, `${doc.domain}.`, doc.descriptors ?? [], 'descriptors');
  }
  return new CompiledRateLimitConfig(roots);
}

/** A validated document whose top-level descriptors are JSON texts, one each (as the parse worker sends). */
export interface CheckedDocument {
  name: string;
  domain: string;
  descriptors: readonly string[];
}

/**
 * buildConfig in time slices: top-level descriptors are decoded and compiled one at a time, and the
 * event loop gets a turn whenever a slice has run `sliceMs`, so compiling a 10k-descriptor config does
 * not stall decisions. The result and the errors are buildConfig's.
 */
export async function buildConfigInSlices(
  docs: readonly CheckedDocument[],
  merge: boolean,
  sliceMs = 4,
): Promise<RateLimitConfig> {
  const roots = new Map<string, MatchLevel>();
  let sliceStart = performance.now();
  for (const { name, domain, descriptors } of docs) {
    let root = roots.get(domain);
    if (root !== undefined && !merge) {
      throw new ConfigError(name, 'domain', `duplicate domain '${domain}' in config file`);
    }
    if (root === undefined) {
      root = newLevel();
      roots.set(domain, root);
    }
    for (let i = 0; i < descriptors.length; i++) {
      const entry = JSON.parse(descriptors[i]!) as DescriptorDoc;
      loadLevel(name, root, `${domain}.`, [entry], 'descriptors', i);
      if (performance.now() - sliceStart > sliceMs) {
        await new Promise<void>((resolve) => setImmediate(resolve));
        sliceStart = performance.now();
      }
    }
  }
  return new CompiledRateLimitConfig(roots);
}
