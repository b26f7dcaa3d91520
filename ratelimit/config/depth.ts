import { Parser } from 'yaml';

// The one depth limit of the descriptor tree, for every door (YAML file, xDS resource, custom resource,
// the CRD's schema): deeper trees are refused with one message before anything walks them recursively
// (a depth-1000 tree used to overflow the control plane's stack).

/** The deepest descriptor tree accepted: `descriptors` of the document is level 1. */
export const MAX_DESCRIPTOR_DEPTH = 8;

/** The message (after the field) every door gives for a deeper tree. */
export const DESCRIPTOR_DEPTH_MESSAGE = `descriptor tree is deeper than ${MAX_DESCRIPTOR_DEPTH} levels (the limit)`;

/**
 * The field of the first `descriptors` list that lies below MAX_DESCRIPTOR_DEPTH
 * (`descriptors[0].descriptors[0]...descriptors`), or undefined when the tree is within the limit.
 * Iterative and bounded: it never looks below the limit.
 */
export function descriptorTooDeep(doc: unknown): string | undefined {
  const stack: { list: unknown; field: string; level: number }[] = [
    { list: (doc as { descriptors?: unknown } | null)?.descriptors, field: 'descriptors', level: 1 },
  ];
  while (stack.length > 0) {
    const { list, field, level } = stack.pop()!;
    if (!Array.isArray(list) || list.length === 0) continue;
    if (level > MAX_DESCRIPTOR_DEPTH) return field;
    for (let i = list.length - 1; i >= 0; i--) {
      const entry = list[i] as { descriptors?: unknown } | null;
      if (entry !== null && typeof entry === 'object') {
        stack.push({ list: entry.descriptors, field: `${field}[${i}].descriptors`, level: level + 1 });
      }
    }
  }
  return undefined;
}

/**
 * YAML text nested deeper than this (collections in collections) is refused before it is composed: the
 * YAML library composes recursively and overflows the stack near 1000 levels. A document within the
 * descriptor limit nests about 2 * MAX_DESCRIPTOR_DEPTH + 5 levels; the rest is room for metadata.
 */
export const MAX_YAML_NESTING = 64;

const COLLECTIONS = new Set(['block-map', 'block-seq', 'flow-collection']);

/** The deepest nesting of collections in a YAML text, from its syntax tree, walked without recursion. */
export function yamlNesting(text: string): number {
  let max = 0;
  type Tok = { type?: string; value?: unknown; items?: { key?: unknown; value?: unknown }[] };
  for (const token of new Parser().parse(text)) {
    const stack: [Tok | undefined, number][] = [[token as Tok, 0]];
    while (stack.length > 0) {
      const [t, depth] = stack.pop()!;
      if (!t || typeof t !== 'object') continue;
      const d = t.type !== undefined && COLLECTIONS.has(t.type) ? depth + 1 : depth;
      if (d > max) max = d;
      if (t.type === 'document') stack.push([t.value as Tok, d]);
      for (const item of t.items ?? []) {
        stack.push([item.key as Tok, d], [item.value as Tok, d]);
      }
    }
  }
  return max;
}

/** The message for a YAML text too deep to compose (the descriptor message, with the nesting found). */
export function yamlTooDeepMessage(nesting: number): string {
  return `${DESCRIPTOR_DEPTH_MESSAGE}: the YAML nests ${nesting} levels deep (at most ${MAX_YAML_NESTING})`;
}
