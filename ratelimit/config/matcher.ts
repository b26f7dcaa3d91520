// The reference's GetLimit over the compiled tree (tree.ts): a request costs a map lookup per entry
// (plus an ordered wildcard scan when the level has wildcards, matched with startsWith/endsWith/indexOf:
// a glob of `*` alone needs no backtracking, so no regex), with no string building except where
// metrics need request values. A top-level entry still pending is compiled by the first lookup that
// reaches it and kept in its level.
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
import { NO_REPLACES, dumpRule } from './rules.js';
import { compositeKey } from './keys.js';
import {
  nameSegment,
  type MatchLevel,
  type MatchNode,
  type Pending,
  type PendingEntries,
  type WildcardPattern,
} from './tree.js';

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
