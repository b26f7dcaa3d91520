// The RateLimitConfig resource that xDS carries (ratelimit.config.ratelimit.v3): its message shapes
// and its protobuf codec. Kept apart from the gRPC side of proto/ (loader.ts, rls.ts, xds.ts' ADS
// definition) so that the config parse worker can decode pushes without loading @grpc/grpc-js; and
// protobufjs itself loads on the first encode or decode, so a file-fed service never loads it.
// Mapping a message to and from the YAML-shaped config document is config knowledge:
// ratelimit/config/xds-document.ts.
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type protobuf from 'protobufjs';
import { PROTO_INCLUDE_DIRS } from './paths.js';
import type { StructValue } from './struct.js';
import { RATELIMIT_UNIT_NAMES, RATELIMIT_UNIT_NUMBER, type RateLimitUnitName } from './units.js';

export const RLS_CONF_PROTO_FILE = 'ratelimit/config/ratelimit/v3/rls_conf.proto';
export const RATELIMIT_CONFIG_MESSAGE = 'ratelimit.config.ratelimit.v3.RateLimitConfig';
export const RATELIMIT_CONFIG_TYPE_URL = `type.googleapis.com/${RATELIMIT_CONFIG_MESSAGE}`;

// ---------------------------------------------------------------------------------------------
// Message shapes (camelCase, as protobufjs hands them over). Decoding fills every field.

export interface RateLimitReplaceMessage {
  name: string;
}
/** RateLimitAlgorithm names (ours; the YAML form is the lowercase name). */
export type RateLimitAlgorithmName = 'FIXED_WINDOW' | 'SLIDING_WINDOW' | 'TOKEN_BUCKET';
/** The RateLimitAlgorithm names in wire order (index = wire number). */
export const RATELIMIT_ALGORITHM_NAMES: readonly RateLimitAlgorithmName[] = [
  'FIXED_WINDOW',
  'SLIDING_WINDOW',
  'TOKEN_BUCKET',
];

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

const require = createRequire(import.meta.url);
// protobufjs ships descriptor.proto itself; the Envoy deps do not (protoc has it built in).
const protobufjsDir = dirname(require.resolve('protobufjs/package.json'));

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
    const pb = require('protobufjs') as typeof protobuf;
    const root = new pb.Root();
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
  if (typeof a === 'string' && (RATELIMIT_ALGORITHM_NAMES as readonly string[]).includes(a)) {
    return a as RateLimitAlgorithmName;
  }
  if (typeof a === 'number' && RATELIMIT_ALGORITHM_NAMES[a] !== undefined)
    return RATELIMIT_ALGORITHM_NAMES[a];
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
    // Field 8 (the published API's); field 102 only from a control plane of our earlier builds.
    metadata: ((d.metadata ?? d.legacyMetadata) as RateLimitDescriptorMessage['metadata']) ?? null,
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
