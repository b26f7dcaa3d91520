// Public face of the configuration model: one schema, one validator, one compiled matcher.
export * from './types.js';
export { configSchema, crossFieldRules, type CrossFieldRule } from './schema.js';
export { ConfigError } from './errors.js';
export { loadConfig, compileConfig } from './load.js';
export { parseYamlSource, parseYamlSourceFully, checkYamlDocument, checkYamlText } from './yaml/read.js';
export { UNITS, UNIT_NUMBER, UNIT_SECONDS, parseUnit, unitFromNumber } from './units.js';
export { buildConfigInSlices, type SlicedBuildOptions } from './build.js';
export { DEFAULT_MAX_DESCRIPTORS, countDescriptors } from './size.js';
export { checkedBuffers, checkedEntry, toCheckedDocument, type CheckedDocument } from './checked.js';
export { checkDocument } from './validate.js';
export {
  compareClaimAge,
  manifestDocument,
  resolveDomainClaims,
  type DomainClaim,
  type DomainResolution,
  type RejectedClaim,
} from './domain-claims.js';
export { MAX_DESCRIPTOR_DEPTH, DESCRIPTOR_DEPTH_MESSAGE, descriptorTooDeep } from './depth.js';
export { DEFAULT_YAML_LIMITS, LIMIT_SETTING, type YamlLimits } from './yaml/limits.js';
export { rateLimitConfigToDocument, documentToRateLimitConfig, fieldsLostOverXds } from './xds-document.js';
