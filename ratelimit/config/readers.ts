// The config readers without the compiled model: what the parse worker loads (the YAML reader, the
// schema validator, the cross-field rules, the checked form it hands the main thread, the xDS
// resource's document), without the matcher and the builds that only the main thread runs, and
// without index.ts's other exports. A third entry of config/ (eslint.config.js, ENTRIES), beside
// index.ts and model.ts.
export type { ConfigSource, ParsedConfigSource } from './types.js';
export { ConfigError } from './errors.js';
export { checkDocument } from './validate.js';
export { checkedBuffers, toCheckedDocument, type CheckedDocument } from './checked.js';
export { parseYamlSource } from './yaml/read.js';
export { DEFAULT_YAML_LIMITS, type YamlLimits } from './yaml/limits.js';
export { rateLimitConfigToDocument } from './xds-document.js';
