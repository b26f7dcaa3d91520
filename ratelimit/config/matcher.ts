// The compiled configuration and the reference's GetLimit. Compiled once per load into per-level
// maps, so a request costs a map lookup per entry (plus an ordered wildcard scan when the level has
// wildcards), with no regex and no string building except where metrics need request values.
// A `*` anywhere in a value is a wildcard matching any run of characters (upstream 6bcd4d2; before
// it only a trailing `*` was). Each pattern is split into literal parts once per load and matched
// with startsWith/endsWith/indexOf: a glob of `*` alone needs no backtracking, so no regex.
// Built from checked documents (buildConfigInSlices), a domain's top level holds each descriptor's
// index until its first lookup compiles it (checked.ts): a reload builds no per-descriptor objects.
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
import { NO_REPLACES, addFeatures, compileRule, dumpRule } from './rules.js';
import { checkedEntry, type CheckedDocument } from './checked.js';
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
  /** The entry's composite key. */
  readonly finalKey: string;
  /** Its node, once compiled (a top-level entry is compiled on the first lookup that reaches it). */
  node: MatchNode | Pending;
}

/**
 * A top-level entry not compiled yet: its index in the config's PendingEntries. Only a domain's top
 * level holds them.
 */
type Pending = number;

interface MatchLevel {
  /** key_value and key-only entries, in one map as in the reference (composite keys may collide). */
  readonly byKey: Map<string, MatchNode | Pending>;
  /** Wildcard entries (see compileWildcard), in config order (the first match wins). */
  readonly wildcards: WildcardPattern[];
  /** Config order, for dump(). */
  readonly ordered: (MatchNode | Pending)[];
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
  finalKey: string,
  node: MatchNode | Pending,
): WildcardPattern | undefined {
  let prefix: string;
  let inner: string[];
  let suffix: string;
  if (value !== undefined && value.includes('*')) {
    const parts = value.split('*');
    prefix = key + '_' + parts[0]!;
    suffix = parts[parts.length - 1]!;
    inner = parts.slice(1, -1).filter((p) => p !== '');
  } else if (finalKey.endsWith('*')) {
    prefix = finalKey.slice(0, -1);
    suffix = '';
    inner = [];
  } else {
    return undefined;
  }
  let minLength = prefix.length + suffix.length;
  for (const p of inner) minLength += p.length;
  return { prefix, inner: Object.freeze(inner), suffix, minLength, finalKey, node };
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
    if (level.byKey.has(finalKey)) throw duplicateKey(source, `${field}[${i}]`, parentKey + finalKey);
    const node = compileNode(source, entry, parentKey, `${field}[${i}]`, parentName);
    level.byKey.set(finalKey, node);
    level.ordered.push(node);
    const wildcard = compileWildcard(entry.key, entry.value, finalKey, node);
    if (wildcard !== undefined) level.wildcards.push(wildcard);
  });
}

function duplicateKey(source: string, field: string, pathKey: string): ConfigError {
  return new ConfigError(source, field, `duplicate descriptor composite key '${pathKey}'`);
}

/** One entry and its nested entries, compiled; `field` is the entry's own (`descriptors[3]`). */
function compileNode(
  source: string,
  entry: DescriptorDoc,
  parentKey: string,
  field: string,
  parentName: string,
): MatchNode {
  const finalKey = compositeKey(entry.key, entry.value);
  const pathKey = parentKey + finalKey;
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
    loadLevel(source, children, `${pathKey}.`, entry.descriptors, `${field}.descriptors`, 0, `${namePath}.`);
    node.children = children;
  }
  return node;
}

/**
 * The top-level entries of the checked documents a config was built from, by index (Pending): a
 * domain's documents in order, each entry compiled on its first lookup.
 */
class PendingEntries {
  private readonly docs: CheckedDocument[] = [];
  /** The index of each document's first entry. */
  private readonly bases: number[] = [];
  private count = 0;

  /** Adds a document's entries; returns the index of its first. */
  add(doc: CheckedDocument): number {
    const base = this.count;
    this.docs.push(doc);
    this.bases.push(base);
    this.count += doc.keys.length;
    return base;
  }

  /** The document of entry `p` and the entry's index in it. */
  private locate(p: Pending): [CheckedDocument, number] {
    let lo = 0;
    let hi = this.bases.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.bases[mid]! <= p) lo = mid;
      else hi = mid - 1;
    }
    return [this.docs[lo]!, p - this.bases[lo]!];
  }

  key(p: Pending): string {
    const [doc, i] = this.locate(p);
    return doc.keys[i]!;
  }

  compile(p: Pending): MatchNode {
    const [doc, i] = this.locate(p);
    const prefix = `${doc.domain}.`;
    return compileNode(doc.name, checkedEntry(doc, i), prefix, `descriptors[${i}]`, prefix);
  }
}

/** `key_` is a prefix of `s` (the reference's TrimPrefix(s, key + "_") strips something). */
function hasKeyPrefix(s: string, key: string): boolean {
  return s.length > key.length && s.charCodeAt(key.length) === 95 /* _ */ && s.startsWith(key);
}

/** strings.TrimPrefix(s, key + "_"). */
function trimKeyPrefix(s: string, key: string): string {
  return hasKeyPrefix(s, key) ? s.slice(key.length + 1) : s;
}

/** A level's entry for reading: a pending one compiled (dump() and ruleKeyPaths() do not keep it). */
type NodeOf = (level: MatchLevel, item: MatchNode | Pending) => MatchNode;

function dumpLevel(level: MatchLevel, out: string[], names: boolean, nodeOf: NodeOf): void {
  for (const item of level.ordered) {
    const node = nodeOf(level, item);
    if (node.rule !== undefined) dumpRule(node.rule, names, out);
    if (node.children !== undefined) dumpLevel(node.children, out, names, nodeOf);
  }
}

/** Key paths of the nodes with a rule, depth first in config order. */
function collectKeyPaths(level: MatchLevel, path: string[], out: string[][], nodeOf: NodeOf): void {
  for (const item of level.ordered) {
    const node = nodeOf(level, item);
    path.push(node.key);
    if (node.rule !== undefined) out.push([...path]);
    if (node.children !== undefined) collectKeyPaths(node.children, path, out, nodeOf);
    path.pop();
  }
}

export class CompiledRateLimitConfig implements RateLimitConfig {
  readonly domains: readonly string[];
  readonly features: ReadonlySet<ConfigFeature>;
  private readonly roots: ReadonlyMap<string, MatchLevel>;
  private readonly pending: PendingEntries | undefined;

  constructor(
    roots: Map<string, MatchLevel>,
    features: ReadonlySet<ConfigFeature>,
    pending?: PendingEntries,
  ) {
    this.roots = roots;
    this.domains = Object.freeze([...roots.keys()]);
    this.features = features;
    this.pending = pending;
  }

  hasDomain(domain: string): boolean {
    return this.roots.has(domain);
  }

  dump(names = false): string {
    const out: string[] = [];
    for (const level of this.roots.values()) dumpLevel(level, out, names, this.peek);
    return out.join('');
  }

  ruleKeyPaths(domain: string): readonly (readonly string[])[] {
    const root = this.roots.get(domain);
    const out: string[][] = [];
    if (root !== undefined) collectKeyPaths(root, [], out, this.peek);
    return out;
  }

  /** A level's entry, compiled if pending; a pending entry compiled here is not kept. */
  private readonly peek: NodeOf = (level, item) => {
    if (typeof item !== 'number') return item;
    const current = level.byKey.get(this.pending!.key(item));
    return typeof current === 'number' || current === undefined ? this.pending!.compile(item) : current;
  };

  /**
   * Compiles a pending top-level entry on its first lookup and keeps it in its level's map, where a
   * lookup by key and its wildcard pattern both find it.
   */
  private compilePending(level: MatchLevel, finalKey: string, p: Pending): MatchNode {
    const current = level.byKey.get(finalKey);
    if (current !== undefined && typeof current !== 'number') return current;
    const node = this.pending!.compile(p);
    level.byKey.set(finalKey, node);
    return node;
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
      if (typeof node === 'number') node = this.compilePending(level, lookup, node);
      let wildcardKey: string | undefined;
      if (node === undefined) {
        const wildcards = level.wildcards;
        for (let j = 0; j < wildcards.length; j++) {
          const w = wildcards[j]!;
          if (wildcardMatches(lookup, w)) {
            let matched = w.node;
            if (typeof matched === 'number')
              matched = w.node = this.compilePending(level, w.finalKey, matched);
            node = matched;
            wildcardKey = w.finalKey;
            break;
          }
        }
      }
      const matchedUsingValue = node !== undefined;
      if (node === undefined) {
        node = level.byKey.get(key);
        if (typeof node === 'number') node = this.compilePending(level, key, node);
      }
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
  const features = new Set<ConfigFeature>();
  for (const { name, doc } of docs) {
    const root = rootOf(roots, name, doc.domain, merge);
    loadLevel(name, root, `${doc.domain}.`, doc.descriptors ?? [], 'descriptors');
    addFeatures(doc.descriptors ?? [], features);
  }
  return new CompiledRateLimitConfig(roots, features);
}

/** The domain's top level, new unless the domain was seen (an error unless `merge`). */
function rootOf(roots: Map<string, MatchLevel>, source: string, domain: string, merge: boolean): MatchLevel {
  let root = roots.get(domain);
  if (root !== undefined && !merge) {
    throw new ConfigError(source, 'domain', `duplicate domain '${domain}' in config file`);
  }
  if (root === undefined) {
    root = newLevel();
    roots.set(domain, root);
  }
  return root;
}

/** Entries indexed between two looks at the clock in buildConfigInSlices (a wildcard's counts 16). */
const SLICE_CHECK_EVERY = 256;

/**
 * buildConfig from checked documents (as the parse worker sends them), in time slices: each top-level
 * entry is indexed by its composite key (a wildcard also by its pattern, in config order) and compiled
 * on its first lookup; the event loop gets a turn whenever a slice has run `sliceMs`. The result and
 * the errors are buildConfig's.
 */
export async function buildConfigInSlices(
  docs: readonly CheckedDocument[],
  merge: boolean,
  sliceMs = 1,
): Promise<RateLimitConfig> {
  const roots = new Map<string, MatchLevel>();
  const features = new Set<ConfigFeature>();
  const pending = new PendingEntries();
  let sliceStart = performance.now();
  let work = 0;
  for (const doc of docs) {
    const { name, domain, keys } = doc;
    const root = rootOf(roots, name, domain, merge);
    for (const f of doc.features) features.add(f);
    const base = pending.add(doc);
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i]!;
      if (root.byKey.has(key)) throw duplicateKey(name, `descriptors[${i}]`, `${domain}.${key}`);
      root.byKey.set(key, base + i);
      root.ordered.push(base + i);
      work++;
      if (key.includes('*')) {
        const entry = checkedEntry(doc, i);
        const wildcard = compileWildcard(entry.key, entry.value, key, base + i);
        if (wildcard !== undefined) root.wildcards.push(wildcard);
        work += 16;
      }
      if (work >= SLICE_CHECK_EVERY) {
        work = 0;
        if (performance.now() - sliceStart > sliceMs) {
          await new Promise<void>((resolve) => setImmediate(resolve));
          sliceStart = performance.now();
        }
      }
    }
  }
  return new CompiledRateLimitConfig(roots, features, pending);
}
