// The RateLimitConfig resource xDS carries, as the YAML-shaped document the configuration model
// validates, and back: configuration knowledge (which document fields the wire has, how proto3
// defaults read in YAML), so it lives beside the validator rather than in proto/. It imports proto/'s
// light entry, which loads no gRPC code: the config parse worker runs it on every xDS push.
import {
  fromStruct,
  RATELIMIT_ALGORITHM_NAMES,
  RATELIMIT_UNIT_NUMBER,
  toStruct,
  type RateLimitAlgorithmName,
  type RateLimitConfigMessage,
  type RateLimitDescriptorMessage,
  type RateLimitPolicyMessage,
  type RateLimitUnitName,
} from '../../proto/ratelimit-config.js';

// Message -> YAML-shaped document (what the reference's ConfigXdsProtoToYaml does), so xDS
// resources go through the same validator as files. Proto3 defaults are left out of the document
// (an empty value is "no value"; UNKNOWN is "no unit"), which is how the YAML loader reads them.

/** The document for one resource, in the shape of a ratelimit YAML file (snake_case keys, lowercase units). */
export function rateLimitConfigToDocument(msg: RateLimitConfigMessage): Record<string, unknown> {
  return { domain: msg.domain, descriptors: msg.descriptors.map(descriptorToDocument) };
}

function policyToDocument(p: RateLimitPolicyMessage): Record<string, unknown> {
  const rl: Record<string, unknown> = { requests_per_unit: p.requestsPerUnit };
  if (p.unit !== 'UNKNOWN') rl.unit = p.unit.toLowerCase();
  if (p.unlimited) rl.unlimited = true;
  if (p.name !== '') rl.name = p.name;
  if (p.replaces.length > 0) rl.replaces = p.replaces.map((r) => ({ name: r.name }));
  if (p.algorithm !== 'FIXED_WINDOW') rl.algorithm = p.algorithm.toLowerCase();
  if (p.burst !== 0) rl.burst = p.burst;
  return rl;
}

function descriptorToDocument(d: RateLimitDescriptorMessage): Record<string, unknown> {
  const out: Record<string, unknown> = { key: d.key };
  if (d.value !== '') out.value = d.value;
  if (d.rateLimit) out.rate_limit = policyToDocument(d.rateLimit);
  if (d.rateLimits.length > 0) out.rate_limits = d.rateLimits.map(policyToDocument);
  if (d.descriptors.length > 0) out.descriptors = d.descriptors.map(descriptorToDocument);
  if (d.shadowMode) out.shadow_mode = true;
  if (d.detailedMetric) out.detailed_metric = true;
  if (d.quotaMode) out.quota_mode = true;
  if (d.valueToMetric) out.value_to_metric = true;
  if (d.shareThreshold) out.share_threshold = true;
  if (d.metadata && Object.keys(d.metadata.fields ?? {}).length > 0) out.metadata = fromStruct(d.metadata);
  return out;
}

// ---------------------------------------------------------------------------------------------
// YAML-shaped document -> message (the control plane's direction). Call it on documents the
// validator accepted; it only checks what the wire cannot carry.

/** Document fields the xDS message cannot carry (dotted paths), so a control plane can warn about them. */
export function fieldsLostOverXds(doc: unknown): string[] {
  const lost: string[] = [];
  if (!isObject(doc)) return lost;
  for (const k of Object.keys(doc)) if (k !== 'domain' && k !== 'descriptors') lost.push(k);
  const walk = (list: unknown, path: string) => {
    if (!Array.isArray(list)) return;
    list.forEach((d, i) => {
      if (!isObject(d)) return;
      const p = `${path}[${i}]`;
      for (const k of Object.keys(d)) {
        if (!DESCRIPTOR_FIELDS.has(k)) lost.push(`${p}.${k}`);
      }
      if (isObject(d.rate_limit)) {
        for (const k of Object.keys(d.rate_limit)) {
          if (!POLICY_FIELDS.has(k)) lost.push(`${p}.rate_limit.${k}`);
        }
      }
      if (Array.isArray(d.rate_limits)) {
        d.rate_limits.forEach((l: unknown, j: number) => {
          if (!isObject(l)) return;
          for (const k of Object.keys(l)) if (!POLICY_FIELDS.has(k)) lost.push(`${p}.rate_limits[${j}].${k}`);
        });
      }
      walk(d.descriptors, `${p}.descriptors`);
    });
  };
  walk(doc.descriptors, 'descriptors');
  return lost;
}

const DESCRIPTOR_FIELDS = new Set([
  'key',
  'value',
  'rate_limit',
  'descriptors',
  'shadow_mode',
  'detailed_metric',
  'quota_mode',
  'value_to_metric',
  'share_threshold',
  'metadata',
  'rate_limits',
]);
const POLICY_FIELDS = new Set([
  'unit',
  'requests_per_unit',
  'unlimited',
  'name',
  'replaces',
  'algorithm',
  'burst',
]);

function isObject(v: unknown): v is Record<string, any> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Builds the resource message for a ratelimit YAML document; throws on what the wire cannot express. */
export function documentToRateLimitConfig(name: string, doc: unknown): RateLimitConfigMessage {
  if (!isObject(doc)) throw new Error(`${name}: document is not a mapping`);
  const descriptors = (list: unknown, path: string): RateLimitDescriptorMessage[] => {
    if (list === undefined || list === null) return [];
    if (!Array.isArray(list)) throw new Error(`${name}: ${path} is not a list`);
    return list.map((d, i) => {
      const p = `${path}[${i}]`;
      if (!isObject(d)) throw new Error(`${name}: ${p} is not a mapping`);
      const rateLimit = isObject(d.rate_limit) ? policyFromDocument(d.rate_limit, `${p}.rate_limit`) : null;
      const rateLimits = Array.isArray(d.rate_limits)
        ? d.rate_limits.map((l: unknown, j: number) =>
            policyFromDocument(isObject(l) ? l : {}, `${p}.rate_limits[${j}]`),
          )
        : [];
      return {
        key: d.key == null ? '' : String(d.key),
        value: d.value == null ? '' : String(d.value),
        rateLimit,
        descriptors: descriptors(d.descriptors, `${p}.descriptors`),
        shadowMode: d.shadow_mode === true,
        detailedMetric: d.detailed_metric === true,
        quotaMode: d.quota_mode === true,
        valueToMetric: d.value_to_metric === true,
        shareThreshold: d.share_threshold === true,
        metadata: isObject(d.metadata) ? toStruct(d.metadata) : null,
        rateLimits,
      };
    });
  };
  const policyFromDocument = (rl: Record<string, any>, path: string): RateLimitPolicyMessage => {
    let unit: RateLimitUnitName = 'UNKNOWN';
    if (rl.unit !== undefined && rl.unit !== null && rl.unit !== '') {
      const u = String(rl.unit).toUpperCase();
      if (!(u in RATELIMIT_UNIT_NUMBER)) throw new Error(`${name}: ${path}.unit: invalid unit ${rl.unit}`);
      unit = u as RateLimitUnitName;
    }
    let algorithm: RateLimitAlgorithmName = 'FIXED_WINDOW';
    if (rl.algorithm !== undefined && rl.algorithm !== null) {
      const a = String(rl.algorithm).toUpperCase();
      if (!(RATELIMIT_ALGORITHM_NAMES as readonly string[]).includes(a)) {
        throw new Error(`${name}: ${path}.algorithm: invalid algorithm ${rl.algorithm}`);
      }
      algorithm = a as RateLimitAlgorithmName;
    }
    return {
      unit,
      requestsPerUnit: Number(rl.requests_per_unit ?? 0),
      unlimited: rl.unlimited === true,
      name: rl.name === undefined || rl.name === null ? '' : String(rl.name),
      replaces: Array.isArray(rl.replaces)
        ? rl.replaces.map((r: unknown) => ({ name: isObject(r) && r.name != null ? String(r.name) : '' }))
        : [],
      algorithm,
      burst: Number(rl.burst ?? 0),
    };
  };
  return {
    name,
    domain: doc.domain == null ? '' : String(doc.domain),
    descriptors: descriptors(doc.descriptors, 'descriptors'),
  };
}
