import { ConfigError } from './errors.js';
import { buildConfig } from './build.js';
import type { ConfigSource, LoadOptions, ParsedConfigSource, RateLimitConfig } from './types.js';
import { checkDocument, type ConfigDoc } from './validate.js';
import { parseYamlSource } from './yaml/read.js';

/**
 * Validates and compiles already-parsed documents (xDS resources, custom resources). Throws the first
 * ConfigError; never returns a partial configuration. No sources give an empty configuration.
 */
export function compileConfig(
  sources: readonly ParsedConfigSource[],
  opts: LoadOptions = {},
): RateLimitConfig {
  const docs: { name: string; doc: ConfigDoc }[] = [];
  for (const src of sources) {
    const { errors, document } = checkDocument(src.name, src.document);
    if (document === undefined) throw errors[0] ?? new ConfigError(src.name, '', 'invalid document');
    docs.push({ name: src.name, doc: document });
  }
  return buildConfig(docs, opts.mergeDomainConfig === true, opts.maxDescriptors);
}

/** Parses YAML texts (first document of each), then as compileConfig. */
export function loadConfig(sources: readonly ConfigSource[], opts: LoadOptions = {}): RateLimitConfig {
  return compileConfig(
    sources.map((s) => ({ name: s.name, document: parseYamlSource(s) })),
    opts,
  );
}
