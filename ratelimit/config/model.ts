// The config model without its readers: what the service's main thread needs (the types, errors, units,
// bounds and the sliced build of validated documents), without the YAML reader and the JSON Schema
// validator, which load on the parse worker. A second entry of config/ (eslint.config.js, ENTRIES).
export * from './types.js';
export { ConfigError } from './errors.js';
export { UNITS, UNIT_NUMBER, UNIT_SECONDS, parseUnit, unitFromNumber } from './units.js';
export { buildConfigInSlices, type SlicedBuildOptions } from './build.js';
export { DEFAULT_MAX_DESCRIPTORS, countDescriptors } from './size.js';
export type { CheckedDocument } from './checked.js';
export { DEFAULT_YAML_LIMITS, LIMIT_SETTING, type YamlLimits } from './yaml/limits.js';
