// How Go's yaml.v2 (the reference's reader) types scalars. Both YAML doors (read.ts with the `yaml`
// package, fast.ts with js-yaml's events) must read a file the same way, so the rules live here once.

/** Fields the reference decodes into Go strings: yaml.v2 keeps the scalar's text (`value: 010` is "010"). */
export const STRING_FIELDS: ReadonlySet<string> = new Set(['domain', 'key', 'value', 'unit', 'name']);

// How Go's yaml.v2 types a float (a float anywhere but in metadata is refused on the full path).
export const GO_INT = /^[-+]?(0b[01_]+|0x[0-9a-fA-F_]+|0[0-7_]*|[1-9][0-9_]*)$/;
export const GO_FLOAT = /^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$/;
export const GO_SPECIAL_FLOAT = /^([-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN))$/;

export function isGoFloat(text: string): boolean {
  return (GO_FLOAT.test(text) && !GO_INT.test(text)) || GO_SPECIAL_FLOAT.test(text);
}
