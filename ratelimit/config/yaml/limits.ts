// The bounds on one YAML config document and the error that names the setting raising each one. Both
// YAML doors (read.ts and fast.ts) and the settings read them, so they live apart from either door.
import { ConfigError } from '../errors.js';

/**
 * Bounds on one YAML config document, checked before anything expands: the text's size, then (on the
 * lexer's token stream, linear and allocation-light) each scalar's length, the flow nesting depth and
 * the number of aliases, then (on the composed tree, with each anchor counted once) the nesting depth
 * and the node count after alias expansion. A "billion laughs" file has ~90 aliases but expands to
 * 10^9 nodes; the expansion bound refuses it without expanding it.
 */
export interface YamlLimits {
  /** CONFIG_YAML_MAX_BYTES: UTF-8 size of one file. */
  readonly maxBytes: number;
  /** CONFIG_YAML_MAX_ALIASES: alias references (`*name`) in one document. */
  readonly maxAliases: number;
  /** CONFIG_YAML_MAX_SCALAR_BYTES: length of one scalar (a key, a value, a block of text). */
  readonly maxScalarLength: number;
  /** CONFIG_YAML_MAX_DEPTH: nesting depth of maps and lists. */
  readonly maxDepth: number;
  /** CONFIG_YAML_MAX_NODES: maps, lists and scalars after alias expansion. */
  readonly maxNodes: number;
}

export const DEFAULT_YAML_LIMITS: YamlLimits = Object.freeze({
  maxBytes: 8 * 1024 * 1024,
  maxAliases: 1000,
  maxScalarLength: 64 * 1024,
  maxDepth: 64,
  maxNodes: 2_000_000,
});

/** The setting that raises each limit, named in errors so the message says what to change. */
export const LIMIT_SETTING: Record<keyof YamlLimits, string> = {
  maxBytes: 'CONFIG_YAML_MAX_BYTES',
  maxAliases: 'CONFIG_YAML_MAX_ALIASES',
  maxScalarLength: 'CONFIG_YAML_MAX_SCALAR_BYTES',
  maxDepth: 'CONFIG_YAML_MAX_DEPTH',
  maxNodes: 'CONFIG_YAML_MAX_NODES',
};

export function limitError(
  source: string,
  limit: keyof YamlLimits,
  what: string,
  value: number,
): ConfigError {
  return new ConfigError(
    source,
    '',
    `error loading config file: ${what} exceeds the limit of ${value} (${LIMIT_SETTING[limit]})`,
  );
}
