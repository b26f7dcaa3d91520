// The xDS side of the wire contract: our RateLimitConfig resource (encode/decode with protobufjs),
// its conversion to and from the YAML-shaped document the config model validates, and the ADS
// service definition shipped in @grpc/grpc-js-xds.
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import protobuf from 'protobufjs';
import { loadPackageDefinition, PROTO_INCLUDE_DIRS } from './loader.js';
import { fromStruct, toStruct, type StructValue } from './struct.js';
import { RATELIMIT_UNIT_NAMES, RATELIMIT_UNIT_NUMBER, type RateLimitUnitName } from './units.js';

/**
 * The largest xDS DiscoveryResponse: what the control plane may send and what the service's xDS
 * client accepts (XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES, the control plane's --max-send-bytes). One
 * number for both sides, gRPC's default receive limit, so a config one side takes the other can too.
 */
export const XDS_MAX_MESSAGE_BYTES = 4 * 1024 * 1024;

export const RLS_CONF_PROTO_FILE = 'ratelimit/config/ratelimit/v3/rls_conf.proto';
export const RATELIMIT_CONFIG_MESSAGE = 'ratelimit.config.ratelimit.v3.RateLimitConfig';
export const RATELIMIT_CONFIG_TYPE_URL = `type.googleapis.com/${RATELIMIT_CONFIG_MESSAGE}`;

export const ADS_PROTO_FILE = 'envoy/service/discovery/v3/ads.proto';
export const ADS_SERVICE_NAME = 'envoy.service.discovery.v3.AggregatedDiscoveryService';
export const ADS_STREAM_METHOD = 'StreamAggregatedResources';

// ---------------------------------------------------------------------------------------------
// Message shapes (camelCase, as protobufjs hands them over). Decoding fills every field.

export interface RateLimitReplaceMessage {
  name: string;
}
/** RateLimitAlgorithm names (ours; the YAML form is the lowercase name). */
export type RateLimitAlgorithmName = 'FIXED_WINDOW' | 'SLIDING_WINDOW' | 'TOKEN_BUCKET';
const ALGORITHM_NAMES: readonly RateLimitAlgorithmName[] = ['FIXED_WINDOW', 'SLIDING_WINDOW', 'TOKEN_BUCKET'];

export interface RateLimitPolicyMessage {
  unit: RateLimitUnitName;
  requestsPerUnit: number;
  unlimited: boolean;
  name: string;
  replaces: RateLimitReplaceMessage[];
  algorithm: RateLimitAlgorithmName;
  /** 0: not set. */
  burst: number;
}
export interface RateLimitDescriptorMessage {
  key: string;
  value: string;
  rateLimit: RateLimitPolicyMessage | null;
  descriptors: RateLimitDescriptorMessage[];
  shadowMode: boolean;
  detailedMetric: boolean;
  quotaMode: boolean;
  valueToMetric: boolean;
  shareThreshold: boolean;
  /** google.protobuf.Struct in object form; null when absent. */
  metadata: { fields?: Record<string, StructValue> } | null;
  rateLimits: RateLimitPolicyMessage[];
}
export interface RateLimitConfigMessage {
  name: string;
  domain: string;
  descriptors: RateLimitDescriptorMessage[];
}

/** What encodeRateLimitConfig accepts: every field optional, as in a protobuf builder. */
export interface RateLimitPolicyInit {
  unit?: RateLimitUnitName;
  requestsPerUnit?: number;
  unlimited?: boolean;
  name?: string;
  replaces?: { name?: string }[];
  algorithm?: RateLimitAlgorithmName;
  burst?: number;
}
export interface RateLimitDescriptorInit {
  key?: string;
  value?: string;
  rateLimit?: RateLimitPolicyInit | null;
  descriptors?: RateLimitDescriptorInit[];
  shadowMode?: boolean;
  detailedMetric?: boolean;
  quotaMode?: boolean;
  valueToMetric?: boolean;
  shareThreshold?: boolean;
  metadata?: { fields?: Record<string, StructValue> } | null;
  rateLimits?: RateLimitPolicyInit[];
}
export interface RateLimitConfigInit {
  name?: string;
  domain?: string;
  descriptors?: RateLimitDescriptorInit[];
}

// ---------------------------------------------------------------------------------------------
// Encoding

let rlsConfType: protobuf.Type | undefined;

// protobufjs ships descriptor.proto itself; the Envoy deps do not (protoc has it built in).
const protobufjsDir = dirname(createRequire(import.meta.url).resolve('protobufjs/package.json'));

function findOnIncludePath(target: string): string {
  for (const dir of [...PROTO_INCLUDE_DIRS, protobufjsDir]) {
    const p = join(dir, target);
    if (existsSync(p)) return p;
  }
  return target;
}

/** The protobufjs Type of RateLimitConfig, loaded once from our .proto (imports resolved on the include path). */
export function rateLimitConfigType(): protobuf.Type {
  if (!rlsConfType) {
    const root = new protobuf.Root();
    root.resolvePath = (_origin, target) => findOnIncludePath(target);
    root.loadSync(RLS_CONF_PROTO_FILE, { keepCase: false });
    rlsConfType = root.lookupType(RATELIMIT_CONFIG_MESSAGE);
  }
  return rlsConfType;
}

/** Encodes a RateLimitConfig; deterministic for equal input (fields in number order). */
export function encodeRateLimitConfig(msg: RateLimitConfigInit): Uint8Array {
  const type = rateLimitConfigType();
  return type.encode(type.fromObject(msg as Record<string, unknown>)).finish();
}

/** Decodes a RateLimitConfig; throws on malformed bytes. Every field is filled (proto3 defaults). */
export function decodeRateLimitConfig(bytes: Uint8Array): RateLimitConfigMessage {
  const type = rateLimitConfigType();
  const obj = type.toObject(type.decode(bytes), {
    enums: String,
    longs: Number,
    defaults: true,
    arrays: true,
  }) as Record<string, unknown>;
  return normalizeConfig(obj);
}

function unitName(u: unknown): RateLimitUnitName {
  if (typeof u === 'string' && u in RATELIMIT_UNIT_NUMBER) return u as RateLimitUnitName;
  if (typeof u === 'number' && RATELIMIT_UNIT_NAMES[u] !== undefined) return RATELIMIT_UNIT_NAMES[u];
  // An enum number this build does not know; proto3 open enums keep it, we treat it as UNKNOWN.
  return 'UNKNOWN';
}

function algorithmName(a: unknown): RateLimitAlgorithmName {
  if (typeof a === 'string' && (ALGORITHM_NAMES as readonly string[]).includes(a)) {
    return a as RateLimitAlgorithmName;
  }
  if (typeof a === 'number' && ALGORITHM_NAMES[a] !== undefined) return ALGORITHM_NAMES[a];
  // A number this build does not know must not become a fixed window: the validator refuses it.
  return `UNKNOWN_${String(a)}` as RateLimitAlgorithmName;
}

function normalizePolicy(rl: Record<string, any>): RateLimitPolicyMessage {
  return {
    unit: unitName(rl.unit),
    requestsPerUnit: rl.requestsPerUnit ?? 0,
    unlimited: rl.unlimited ?? false,
    name: rl.name ?? '',
    replaces: ((rl.replaces ?? []) as Record<string, any>[]).map((r) => ({ name: r.name ?? '' })),
    algorithm: algorithmName(rl.algorithm ?? 0),
    burst: rl.burst ?? 0,
  };
}

function normalizeDescriptor(d: Record<string, any>): RateLimitDescriptorMessage {
  const rl = d.rateLimit as Record<string, any> | null | undefined;
  return {
    key: d.key ?? '',
    value: d.value ?? '',
    rateLimit: rl ? normalizePolicy(rl) : null,
    descriptors: ((d.descriptors ?? []) as Record<string, any>[]).map(normalizeDescriptor),
    shadowMode: d.shadowMode ?? false,
    detailedMetric: d.detailedMetric ?? false,
    quotaMode: d.quotaMode ?? false,
    valueToMetric: d.valueToMetric ?? false,
    shareThreshold: d.shareThreshold ?? false,
    metadata: (d.metadata as RateLimitDescriptorMessage['metadata']) ?? null,
    rateLimits: ((d.rateLimits ?? []) as Record<string, any>[]).map(normalizePolicy),
  };
}

function normalizeConfig(obj: Record<string, any>): RateLimitConfigMessage {
  return {
    name: obj.name ?? '',
    domain: obj.domain ?? '',
    descriptors: ((obj.descriptors ?? []) as Record<string, any>[]).map(normalizeDescriptor),
  };
}

// ---------------------------------------------------------------------------------------------
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
      if (!(ALGORITHM_NAMES as readonly string[]).includes(a)) {
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

// ---------------------------------------------------------------------------------------------
// ADS (envoy.service.discovery.v3) shapes as grpc-js hands them over with LOADER_OPTIONS.

/** google.protobuf.Any keeps its snake_case field name: proto-loader takes it from protobufjs' bundled common types. */
export interface WireAny {
  type_url?: string;
  value?: Uint8Array;
}
export interface WireNode {
  id?: string;
  cluster?: string;
  metadata?: { fields?: Record<string, { stringValue?: string }> } | null;
  userAgentName?: string;
}
export interface WireStatus {
  code?: number;
  message?: string;
}
export interface WireDiscoveryRequest {
  versionInfo?: string;
  node?: WireNode | null;
  resourceNames?: string[];
  typeUrl?: string;
  responseNonce?: string;
  errorDetail?: WireStatus | null;
}
export interface WireDiscoveryResponse {
  versionInfo?: string;
  resources?: WireAny[];
  canary?: boolean;
  typeUrl?: string;
  nonce?: string;
  controlPlane?: { identifier?: string } | null;
}

let adsDef: grpc.ServiceDefinition | undefined;

/** The AggregatedDiscoveryService definition (from the Envoy API shipped in @grpc/grpc-js-xds). */
export function adsServiceDefinition(): grpc.ServiceDefinition {
  if (!adsDef) {
    const pkg = loadPackageDefinition([ADS_PROTO_FILE]);
    adsDef = pkg[ADS_SERVICE_NAME] as grpc.ServiceDefinition;
  }
  return adsDef;
}

/** A generic client constructor for the ADS service. */
export function adsClientConstructor(): grpc.ServiceClientConstructor {
  return grpc.makeGenericClientConstructor(adsServiceDefinition(), 'AggregatedDiscoveryService');
}
