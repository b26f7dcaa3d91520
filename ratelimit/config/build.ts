// Building a compiled configuration from validated documents: all at once (buildConfig: the command
// line, tests), or from the parse worker's checked documents in time slices with each top-level
// descriptor compiled on its first lookup (buildConfigInSlices: file reloads and xDS pushes).
import { ConfigError } from './errors.js';
import type { ConfigFeature, RateLimitConfig } from './types.js';
import { addFeatures } from './rules.js';
import { checkedEntry, type CheckedDocument } from './checked.js';
import type { ConfigDoc } from './validate.js';
import { CompiledRateLimitConfig } from './matcher.js';
import { countDescriptors, DescriptorBudget } from './size.js';
import {
  compileWildcard,
  duplicateKey,
  loadLevel,
  newLevel,
  PendingEntries,
  type MatchLevel,
} from './tree.js';

/**
 * Builds the compiled configuration from validated documents, in order. A second document for a
 * domain is an error unless `merge`; then its entries join the domain's top level (duplicates of a
 * composite key are still errors). More than `maxDescriptors` descriptors in all is an error
 * (CONFIG_MAX_DESCRIPTORS), found before anything is compiled.
 */
export function buildConfig(
  docs: readonly { name: string; doc: ConfigDoc }[],
  merge: boolean,
  maxDescriptors?: number,
): RateLimitConfig {
  const budget = new DescriptorBudget(maxDescriptors);
  for (const { name, doc } of docs) budget.add(name, countDescriptors(doc.descriptors));
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

export interface SlicedBuildOptions {
  /** The event loop gets a turn whenever a slice has run this long (default 1 ms). */
  readonly sliceMs?: number;
  /** CONFIG_MAX_DESCRIPTORS (default DEFAULT_MAX_DESCRIPTORS). */
  readonly maxDescriptors?: number;
}

/**
 * buildConfig from checked documents (as the parse worker sends them), in time slices: each top-level
 * entry is indexed by its composite key (a wildcard also by its pattern, in config order) and compiled
 * on its first lookup; the event loop gets a turn whenever a slice has run `sliceMs`. The result and
 * the errors are buildConfig's.
 */
export async function buildConfigInSlices(
  docs: readonly CheckedDocument[],
  merge: boolean,
  opts: SlicedBuildOptions = {},
): Promise<RateLimitConfig> {
  const sliceMs = opts.sliceMs ?? 1;
  const budget = new DescriptorBudget(opts.maxDescriptors);
  for (const doc of docs) budget.add(doc.name, doc.descriptors);
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
