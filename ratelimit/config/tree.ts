// The compiled form of a configuration: per domain and level a map keyed by the reference's composite
// key (`key` or `key_value`) plus the level's wildcard patterns in config order, and the compiling of
// validated entries into it. A `*` anywhere in a value is a wildcard matching any run of characters
// (upstream 6bcd4d2; before it only a trailing `*` was); each pattern is split into literal parts once
// per load. A domain's top level built from checked documents (build.ts) holds each descriptor's index
// (Pending) until its first lookup compiles it (matcher.ts).
import { ConfigError } from './errors.js';
import type { RateLimitRule } from './types.js';
import { compileRule } from './rules.js';
import { checkedEntry, type CheckedDocument } from './checked.js';
import { compositeKey } from './keys.js';
import type { DescriptorDoc } from './validate.js';

export interface MatchNode {
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
export function nameSegment(key: string, value: string | undefined): string {
  return value === undefined || value === '' ? key : `${key}=${value}`;
}

/**
 * A wildcard entry's `key_value` pattern, split at its stars: `prefix*inner[0]*...*suffix`. It
 * matches a request's `key_value` that starts with prefix, ends with suffix and holds the inner
 * parts in order between them (each '*' matches any run, also an empty one).
 */
export interface WildcardPattern {
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
export type Pending = number;

export interface MatchLevel {
  /** key_value and key-only entries, in one map as in the reference (composite keys may collide). */
  readonly byKey: Map<string, MatchNode | Pending>;
  /** Wildcard entries (see compileWildcard), in config order (the first match wins). */
  readonly wildcards: WildcardPattern[];
  /** Config order, for dump(). */
  readonly ordered: (MatchNode | Pending)[];
}

export function newLevel(): MatchLevel {
  return { byKey: new Map(), wildcards: [], ordered: [] };
}

/**
 * The wildcard of an entry, if any. A '*' in the value is a wildcard wherever it stands; a '*' in
 * the key is literal, except that a key-only entry whose key ends in '*' keeps the reference's
 * trailing-'*' prefix rule on the composite key (a quirk of comparing `key_value` strings).
 */
export function compileWildcard(
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

/** Loads entries into a level, as the reference's loadDescriptors (also used to merge a domain). */
export function loadLevel(
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

export function duplicateKey(source: string, field: string, pathKey: string): ConfigError {
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
export class PendingEntries {
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
