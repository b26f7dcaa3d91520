// The one depth limit of the descriptor tree, for every door (YAML file, xDS resource, custom resource,
// the CRD's schema): deeper trees are refused with one message before anything walks them recursively
// (a depth-1000 tree used to overflow the control plane's stack). YAML text nested too deep to compose is
// refused earlier, by the YAML bounds of yaml/limits.ts (CONFIG_YAML_MAX_DEPTH).

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
