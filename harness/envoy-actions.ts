// What Envoy would do with the example configs in examples/envoy/, without an Envoy binary on this
// machine: (1) a strict decoder that checks a YAML/JSON config against Envoy's own protos (the envoy-api
// tree shipped in @grpc/grpc-js-xds, with the current route and ratelimit filter files from proto/envoy/
// laid over it), so a misspelt field, a wrong enum name or a malformed duration fails a test as it would
// fail Envoy's start; (2) an emulation of the ratelimit HTTP filter's descriptor actions, driven by the
// decoded config, that turns an HTTP request into the RateLimitRequest Envoy sends, including the hits
// of hits_addend and the second call of apply_on_stream_done at stream end; (3) the x-ratelimit-* headers
// Envoy adds from the answer (DRAFT_VERSION_03).
import { existsSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { isIP } from 'node:net';
import { dirname, join } from 'node:path';
import protobuf from 'protobufjs';
import {
  OWN_PROTO_DIR,
  type WireDescriptor,
  type WireDescriptorStatus,
  type WireRateLimitRequest,
} from '../proto/index.js';

const require = createRequire(import.meta.url);
const XDS_DEPS = join(dirname(require.resolve('@grpc/grpc-js-xds/package.json')), 'deps');
const PROTOBUFJS_DIR = dirname(require.resolve('protobufjs/package.json'));
/**
 * Envoy API files kept in proto/ at a newer version than the shipped tree (proto/envoy/README.md says
 * from which commit); they win over the shipped ones. The service's own definitions beside them (rls.proto
 * and what it imports) are not Envoy's full files and are not used here.
 */
export const ENVOY_API_OVERLAY = [
  'envoy/config/route/v3/route_components.proto',
  'envoy/extensions/filters/http/ratelimit/v3/rate_limit.proto',
  'envoy/config/common/mutation_rules/v3/mutation_rules.proto',
  'envoy/config/core/v3/substitution_format_string.proto',
  'envoy/type/matcher/v3/filter_state.proto',
  'envoy/type/matcher/v3/address.proto',
];
/** Where imports are looked up: the Envoy API, its dependencies, and protobufjs' google/protobuf files. */
const INCLUDE_DIRS = [
  join(XDS_DEPS, 'envoy-api'),
  join(XDS_DEPS, 'xds'),
  join(XDS_DEPS, 'googleapis'),
  join(XDS_DEPS, 'protoc-gen-validate'),
  PROTOBUFJS_DIR,
];

export const BOOTSTRAP = 'envoy.config.bootstrap.v3.Bootstrap';
export const HCM = 'envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager';
export const RATELIMIT_FILTER = 'envoy.extensions.filters.http.ratelimit.v3.RateLimit';
export const RATELIMIT_PER_ROUTE = 'envoy.extensions.filters.http.ratelimit.v3.RateLimitPerRoute';
export const ROUTER_FILTER = 'envoy.extensions.filters.http.router.v3.Router';

/** JSON as the decoder returns it: messages keyed by proto field name (snake_case). */
export type Json = any;

/**
 * Envoy's protos, loaded with protobufjs. A message type named by an Any's `@type` is found by loading
 * every .proto file of its package directory on first use, so any Envoy extension can be checked.
 */
export class EnvoyProtos {
  readonly root = new protobuf.Root();
  private readonly loadedDirs = new Set<string>();

  constructor() {
    this.root.resolvePath = (_origin, target) => {
      if (target.startsWith('/')) return target;
      if (ENVOY_API_OVERLAY.includes(target)) return join(OWN_PROTO_DIR, target);
      for (const d of INCLUDE_DIRS) {
        const p = join(d, target);
        if (existsSync(p)) return p;
      }
      return target;
    };
    for (const t of [BOOTSTRAP, HCM, RATELIMIT_FILTER, ROUTER_FILTER]) this.lookup(t);
  }

  /** The message type of a full name, loading its package directory if needed; undefined when unknown. */
  lookup(fullName: string): protobuf.Type | undefined {
    const found = this.tryLookup(fullName);
    if (found) return found;
    // envoy.extensions.filters.http.lua.v3.Lua → envoy/extensions/filters/http/lua/v3/*.proto
    const parts = fullName.split('.');
    for (let n = parts.length - 1; n > 0; n--) {
      const rel = parts.slice(0, n).join('/');
      if (this.loadedDirs.has(rel)) continue;
      // The package's files: those of the shipped tree plus any overlay file it lacks.
      const files = new Set<string>();
      for (const d of INCLUDE_DIRS.slice(0, 4)) {
        const dir = join(d, rel);
        if (existsSync(dir)) for (const f of readdirSync(dir)) if (f.endsWith('.proto')) files.add(f);
      }
      for (const f of ENVOY_API_OVERLAY) if (dirname(f) === rel) files.add(f.slice(rel.length + 1));
      if (!files.size) continue;
      this.loadedDirs.add(rel);
      this.root.loadSync(
        [...files].map((f) => join(rel, f)),
        { keepCase: true },
      );
      this.root.resolveAll();
      return this.tryLookup(fullName);
    }
    return undefined;
  }

  private tryLookup(fullName: string): protobuf.Type | undefined {
    try {
      const t = this.root.lookup(fullName);
      return t instanceof protobuf.Type ? t : undefined;
    } catch {
      return undefined;
    }
  }

  /**
   * Decodes `value` (YAML or JSON already parsed) as `typeName` the way Envoy's proto3 JSON parser would
   * and checks the validate rules Envoy enforces at load time that the examples can trip over. Returns
   * the value with every field under its proto name, plus every problem found, each with its path.
   * `partial`: the top-level message may leave required fields out (an Istio MERGE patch).
   */
  decode(typeName: string, value: unknown, opts: { partial?: boolean; path?: string } = {}): DecodeResult {
    const errors: string[] = [];
    const type = this.lookup(typeName);
    if (!type) return { value: undefined, errors: [`${opts.path ?? '$'}: unknown message type ${typeName}`] };
    const out = this.message(type, value, opts.path ?? '$', errors, opts.partial ?? false);
    return { value: out, errors };
  }

  private message(
    type: protobuf.Type,
    value: unknown,
    path: string,
    errors: string[],
    partial = false,
  ): Json {
    const wkt = this.wellKnown(type, value, path, errors);
    if (wkt !== NOT_WKT) return wkt;
    if (value === null || typeof value !== 'object' || Array.isArray(value)) {
      errors.push(`${path}: expected an object for ${type.fullName.slice(1)}, got ${describe(value)}`);
      return undefined;
    }
    const byName = fieldIndex(type);
    const out: Record<string, Json> = {};
    for (const [key, v] of Object.entries(value as Record<string, unknown>)) {
      const field = byName.get(key);
      const at = `${path}.${key}`;
      if (!field) {
        errors.push(`${at}: unknown field in ${type.fullName.slice(1)}`);
        continue;
      }
      if (v === null) continue; // proto3 JSON: null means "not set"
      if (field.options?.deprecated) errors.push(`${at}: deprecated field of ${type.fullName.slice(1)}`);
      if (field.name in out) errors.push(`${at}: ${field.name} given twice (snake_case and lowerCamel)`);
      out[field.name] = this.field(field, v, at, errors);
    }
    // oneofs: at most one member, exactly one when the oneof is required
    for (const oneof of type.oneofsArray) {
      const set = oneof.fieldsArray.filter((f) => f.name in out);
      if (set.length > 1)
        errors.push(`${path}: oneof ${oneof.name} has ${set.map((f) => f.name).join(' and ')}`);
      if (!partial && set.length === 0 && oneof.options?.['(validate.required)'])
        errors.push(`${path}: oneof ${oneof.name} of ${type.fullName.slice(1)} needs one of its fields`);
    }
    if (!partial) {
      for (const f of type.fieldsArray) {
        // A rule on a oneof member applies only when that member is set.
        if (f.partOf && !(f.name in out)) continue;
        const o = f.options ?? {};
        const at = `${path}.${f.name}`;
        if (o['(validate.rules).message.required'] && !(f.name in out)) errors.push(`${at}: required`);
        if (
          o['(validate.rules).string.min_len'] &&
          String(out[f.name] ?? '').length < o['(validate.rules).string.min_len']
        )
          errors.push(`${at}: at least ${o['(validate.rules).string.min_len']} characters`);
        if (o['(validate.rules).duration.required'] && !(f.name in out)) errors.push(`${at}: required`);
        if (
          o['(validate.rules).repeated.min_items'] &&
          (out[f.name]?.length ?? 0) < o['(validate.rules).repeated.min_items']
        )
          errors.push(`${at}: at least ${o['(validate.rules).repeated.min_items']} items`);
      }
    }
    for (const f of type.fieldsArray) {
      const o = f.options ?? {};
      const lte = o['(validate.rules).uint32.lte'];
      if (lte !== undefined && f.name in out && Number(out[f.name]) > lte)
        errors.push(`${path}.${f.name}: at most ${lte}`);
      const lte64 = o['(validate.rules).uint64.lte'];
      if (lte64 !== undefined && f.name in out && Number(out[f.name]) > lte64)
        errors.push(`${path}.${f.name}: at most ${lte64}`);
      const prefix: string = o['(validate.rules).string.prefix'] ?? '';
      const suffix: string = o['(validate.rules).string.suffix'] ?? '';
      if ((prefix || suffix) && typeof out[f.name] === 'string') {
        const v: string = out[f.name];
        const skip = v === '' && o['(validate.rules).string.ignore_empty'];
        if (
          !skip &&
          !(v.startsWith(prefix) && v.endsWith(suffix) && v.length >= prefix.length + suffix.length)
        )
          errors.push(`${path}.${f.name}: must start with "${prefix}" and end with "${suffix}"`);
      }
      const gt = o['(validate.rules).uint32.gt'];
      if (gt !== undefined && f.name in out && !(Number(out[f.name]) > gt))
        errors.push(`${path}.${f.name}: greater than ${gt}`);
      // Durations (decoded to ms): `gt {seconds, nanos}`, an empty `gt {}` meaning greater than zero.
      const dgt = durationGt(f);
      if (dgt !== undefined && f.name in out && !(Number(out[f.name]) > dgt))
        errors.push(`${path}.${f.name}: a duration greater than ${dgt / 1000}s`);
    }
    return out;
  }

  private field(field: protobuf.Field, v: unknown, path: string, errors: string[]): Json {
    if (field instanceof protobuf.MapField) {
      if (v === null || typeof v !== 'object' || Array.isArray(v)) {
        errors.push(`${path}: expected a map, got ${describe(v)}`);
        return undefined;
      }
      const out: Record<string, Json> = {};
      for (const [k, item] of Object.entries(v as Record<string, unknown>))
        out[k] = this.single(field, item, `${path}.${k}`, errors);
      return out;
    }
    if (field.repeated) {
      if (!Array.isArray(v)) {
        errors.push(`${path}: expected a list, got ${describe(v)}`);
        return undefined;
      }
      return v.map((item, i) => this.single(field, item, `${path}[${i}]`, errors));
    }
    return this.single(field, v, path, errors);
  }

  private single(field: protobuf.Field, v: unknown, path: string, errors: string[]): Json {
    const rt = field.resolvedType;
    if (rt instanceof protobuf.Type) return this.message(rt, v, path, errors);
    if (rt instanceof protobuf.Enum) {
      if (typeof v === 'string' && v in rt.values) return v;
      if (typeof v === 'number' && Number.isInteger(v)) {
        const name = rt.valuesById[v];
        if (name === undefined && field.options?.['(validate.rules).enum.defined_only'])
          errors.push(`${path}: ${v} is not a value of ${rt.fullName.slice(1)}`);
        return name ?? v;
      }
      errors.push(
        `${path}: ${describe(v)} is not a value of ${rt.fullName.slice(1)} (${Object.keys(rt.values).join(', ')})`,
      );
      return undefined;
    }
    return scalar(field.type, v, path, errors);
  }

  /** proto3 JSON forms of the well-known types; NOT_WKT for any other message. */
  private wellKnown(type: protobuf.Type, v: unknown, path: string, errors: string[]): Json {
    const name = type.fullName.slice(1);
    switch (name) {
      case 'google.protobuf.Duration':
        if (typeof v === 'string' && /^-?\d+(\.\d{1,9})?s$/.test(v)) return Math.round(parseFloat(v) * 1000);
        errors.push(`${path}: a duration is a string such as "0.25s", got ${describe(v)}`);
        return undefined;
      case 'google.protobuf.Struct':
        if (v !== null && typeof v === 'object' && !Array.isArray(v)) return v;
        errors.push(`${path}: expected an object (Struct), got ${describe(v)}`);
        return undefined;
      case 'google.protobuf.Value':
        return v;
      case 'google.protobuf.ListValue':
        if (Array.isArray(v)) return v;
        errors.push(`${path}: expected a list (ListValue), got ${describe(v)}`);
        return undefined;
      case 'google.protobuf.Empty':
        if (v !== null && typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length === 0)
          return {};
        errors.push(`${path}: expected {} (Empty), got ${describe(v)}`);
        return undefined;
      case 'google.protobuf.Any':
        return this.any(v, path, errors);
    }
    const wrapped = WRAPPERS[name];
    if (wrapped) return scalar(wrapped, v, path, errors);
    return NOT_WKT;
  }

  private any(v: unknown, path: string, errors: string[]): Json {
    if (v === null || typeof v !== 'object' || Array.isArray(v)) {
      errors.push(`${path}: expected an object with "@type", got ${describe(v)}`);
      return undefined;
    }
    const { '@type': url, ...rest } = v as Record<string, unknown>;
    if (typeof url !== 'string' || !url.includes('/')) {
      errors.push(`${path}: an Any needs "@type": "type.googleapis.com/<message>"`);
      return undefined;
    }
    const typeName = url.slice(url.lastIndexOf('/') + 1);
    if (typeName === 'xds.type.v3.TypedStruct' || typeName === 'udpa.type.v1.TypedStruct') {
      errors.push(`${path}: TypedStruct is not checked here; write the typed message instead`);
      return undefined;
    }
    const type = this.lookup(typeName);
    if (!type) {
      errors.push(`${path}.@type: no message ${typeName} in Envoy's protos`);
      return undefined;
    }
    // A well-known type inside an Any carries its JSON form under "value".
    const inner = this.wellKnown(type, (rest as { value?: unknown }).value, path, []) !== NOT_WKT;
    const payload = inner ? (rest as { value?: unknown }).value : rest;
    return { '@type': typeName, ...this.message(type, payload, path, errors) };
  }
}

/** The `(validate.rules).duration.gt` bound of a field in ms, undefined when it has none. */
function durationGt(f: protobuf.Field): number | undefined {
  const parsed = (f as protobuf.Field & { parsedOptions?: Record<string, Json>[] }).parsedOptions ?? [];
  for (const p of parsed) {
    const gt = p['(validate.rules)']?.duration?.gt;
    if (gt) return Number(gt.seconds ?? 0) * 1000 + Number(gt.nanos ?? 0) / 1e6;
  }
  return undefined;
}

export interface DecodeResult {
  value: Json;
  errors: string[];
}

const NOT_WKT = Symbol('not a well-known type');

const WRAPPERS: Record<string, string> = {
  'google.protobuf.BoolValue': 'bool',
  'google.protobuf.StringValue': 'string',
  'google.protobuf.BytesValue': 'bytes',
  'google.protobuf.Int32Value': 'int32',
  'google.protobuf.UInt32Value': 'uint32',
  'google.protobuf.Int64Value': 'int64',
  'google.protobuf.UInt64Value': 'uint64',
  'google.protobuf.FloatValue': 'float',
  'google.protobuf.DoubleValue': 'double',
};

const indexCache = new WeakMap<protobuf.Type, Map<string, protobuf.Field>>();

/** Field by proto name and by lowerCamel JSON name (json_name when the proto sets one). */
function fieldIndex(type: protobuf.Type): Map<string, protobuf.Field> {
  let m = indexCache.get(type);
  if (m) return m;
  m = new Map();
  for (const f of type.fieldsArray) {
    m.set(f.name, f);
    m.set(
      (f.options?.json_name as string | undefined) ??
        f.name.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase()),
      f,
    );
  }
  indexCache.set(type, m);
  return m;
}

const INT_RANGES: Record<string, [number, number]> = {
  int32: [-(2 ** 31), 2 ** 31 - 1],
  sint32: [-(2 ** 31), 2 ** 31 - 1],
  sfixed32: [-(2 ** 31), 2 ** 31 - 1],
  uint32: [0, 2 ** 32 - 1],
  fixed32: [0, 2 ** 32 - 1],
};

function scalar(type: string, v: unknown, path: string, errors: string[]): Json {
  switch (type) {
    case 'string':
      if (typeof v === 'string') return v;
      break;
    case 'bool':
      if (typeof v === 'boolean') return v;
      break;
    case 'bytes':
      if (typeof v === 'string' && /^[A-Za-z0-9+/_-]*={0,2}$/.test(v)) return v;
      break;
    case 'double':
    case 'float':
      if (
        typeof v === 'number' ||
        (typeof v === 'string' && /^(NaN|-?Infinity|-?\d+(\.\d+)?([eE][-+]?\d+)?)$/.test(v))
      )
        return Number(v);
      break;
    case 'int64':
    case 'sint64':
    case 'sfixed64':
    case 'uint64':
    case 'fixed64': {
      const s = typeof v === 'number' && Number.isInteger(v) ? String(v) : v;
      if (
        typeof s === 'string' &&
        (type.startsWith('u') || type.startsWith('f') ? /^\d+$/ : /^-?\d+$/).test(s)
      )
        return Number(s);
      break;
    }
    default: {
      const range = INT_RANGES[type];
      const n = typeof v === 'string' && /^-?\d+$/.test(v) ? Number(v) : v;
      if (range && typeof n === 'number' && Number.isInteger(n) && n >= range[0] && n <= range[1]) return n;
    }
  }
  errors.push(`${path}: expected ${type}, got ${describe(v)}`);
  return undefined;
}

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'object') return 'an object';
  return `${typeof v} ${JSON.stringify(v)}`;
}

// ---------------------------------------------------------------------------------------------------
// The ratelimit HTTP filter, emulated

/** An HTTP request as the filter sees it. Header names lower case. */
export interface EmulatedRequest {
  path: string;
  headers?: Record<string, string>;
  /** The downstream connection's peer address. */
  peer: string;
  /** Dynamic metadata set by earlier filters: namespace → Struct. */
  dynamicMetadata?: Record<string, Json>;
}

export interface EmulatedCall {
  /** The name of the route that matched (undefined: no route, Envoy answers 404 and calls nothing). */
  route?: string;
  /** What the filter sends; undefined when no descriptor was produced (the filter then calls nothing). */
  request?: WireRateLimitRequest;
}

interface Route {
  name?: string;
  match: Json;
  route?: Json;
  metadata?: Json;
  typed_per_filter_config?: Record<string, Json>;
}

/**
 * One listener's HTTP connection manager with its ratelimit filter and its static route config, taken
 * from a decoded Bootstrap. Implements what Envoy's route and ratelimit filter do to build descriptors.
 */
export class RateLimitFilterEmulation {
  readonly hcm: Json;
  readonly filter: Json;
  readonly filterName: string;
  private readonly virtualHosts: Json[];

  constructor(bootstrap: Json, listenerName: string) {
    const listener = (bootstrap.static_resources?.listeners ?? []).find((l: Json) => l.name === listenerName);
    if (!listener) throw new Error(`no listener ${listenerName}`);
    const hcmFilter = listener.filter_chains[0].filters.find((f: Json) => f.typed_config?.['@type'] === HCM);
    if (!hcmFilter) throw new Error(`listener ${listenerName} has no HttpConnectionManager`);
    this.hcm = hcmFilter.typed_config;
    const f = (this.hcm.http_filters ?? []).find((x: Json) => x.typed_config?.['@type'] === RATELIMIT_FILTER);
    if (!f) throw new Error(`listener ${listenerName} has no ratelimit filter`);
    this.filter = f.typed_config;
    this.filterName = f.name;
    if (!this.hcm.route_config) throw new Error('the emulation needs a static route_config');
    this.virtualHosts = this.hcm.route_config.virtual_hosts ?? [];
  }

  /**
   * The descriptors Envoy's ratelimit filter would send for this request, and the route it matched.
   * `onStreamDone`: the second call, made when the stream ends, from the rate limits with
   * apply_on_stream_done (fire and forget; `req.dynamicMetadata` is then what the filters wrote while the
   * request and response went through). Without it: the call at request time, from the others.
   */
  call(req: EmulatedRequest, opts: { onStreamDone?: boolean } = {}): EmulatedCall {
    const onStreamDone = opts.onStreamDone ?? false;
    const headers = req.headers ?? {};
    const host = headers[':authority'] ?? headers.host ?? '';
    const vh = this.virtualHosts.find((v) => (v.domains as string[]).some((d) => domainMatches(d, host)));
    if (!vh) return {};
    const route: Route | undefined = (vh.routes ?? []).find((r: Route) =>
      routeMatches(r.match, req.path, headers),
    );
    if (!route || !route.route) return { route: route?.name };
    if (!this.requestTypeApplies(headers)) return { route: route.name };
    const descriptors: WireDescriptor[] = [];
    const stage = this.filter.stage ?? 0;
    const perRoute = route.typed_per_filter_config?.[this.filterName];
    const ctx = { req, headers, route, remote: this.trustedClientAddress(req) };
    const applies = (p: Json) => (p.apply_on_stream_done ?? false) === onStreamDone;
    if (this.filter.rate_limits?.length) throw new Error("the filter's own rate_limits are not emulated");
    if (perRoute?.rate_limits?.length) {
      // The rate limits of the route's RateLimitPerRoute replace the route's and the virtual host's;
      // their stage is not read.
      for (const p of perRoute.rate_limits as Json[])
        if (applies(p)) this.policy(p, undefined, ctx, descriptors);
    } else {
      const routePolicies: Json[] = route.route.rate_limits ?? [];
      for (const p of routePolicies) if (applies(p)) this.policy(p, stage, ctx, descriptors);
      // The virtual host's policies: INCLUDE adds them, IGNORE drops them, OVERRIDE (the default) uses
      // them only when the route has none.
      const vhMode = perRoute?.vh_rate_limits ?? 'OVERRIDE';
      if (vhMode === 'INCLUDE' || (vhMode === 'OVERRIDE' && routePolicies.length === 0))
        for (const p of vh.rate_limits ?? []) if (applies(p)) this.policy(p, stage, ctx, descriptors);
    }
    if (!descriptors.length) return { route: route.name };
    return { route: route.name, request: { domain: perRoute?.domain || this.filter.domain, descriptors } };
  }

  /** request_type: "internal" / "external" limit the filter to requests with / without x-envoy-internal. */
  private requestTypeApplies(headers: Record<string, string>): boolean {
    const t = this.filter.request_type || 'both';
    const internal = headers['x-envoy-internal'] === 'true';
    return t === 'both' || (t === 'internal') === internal;
  }

  /**
   * The address the remote_address action uses: with use_remote_address the peer, or the N-th address
   * from the right of x-forwarded-for when xff_num_trusted_hops is N; without it, the (N+1)-th from the
   * right (Envoy's XFF rules); the peer when x-forwarded-for is too short.
   */
  trustedClientAddress(req: EmulatedRequest): string {
    const hops: number = this.hcm.xff_num_trusted_hops ?? 0;
    const useRemote = this.hcm.use_remote_address === true;
    if (useRemote && hops === 0) return req.peer;
    const xff = (req.headers?.['x-forwarded-for'] ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
    const fromRight = useRemote ? hops : hops + 1;
    return xff.length >= fromRight ? xff[xff.length - fromRight] : req.peer;
  }

  private policy(
    p: Json,
    stage: number | undefined,
    ctx: { req: EmulatedRequest; headers: Record<string, string>; route: Route; remote: string },
    out: WireDescriptor[],
  ): void {
    if (stage !== undefined && (p.stage ?? 0) !== stage) return;
    const entries: { key: string; value: string }[] = [];
    for (const a of p.actions as Json[]) {
      const entry = this.action(a, ctx);
      if (entry === SKIP_DESCRIPTOR) return;
      if (entry) entries.push(entry);
    }
    if (!entries.length) return;
    const d: WireDescriptor = { entries };
    if (p.hits_addend) {
      const hits = hitsAddend(p.hits_addend, ctx.headers, ctx.req.dynamicMetadata);
      // A format that does not give a whole number from 0 to 10^9 drops the descriptor.
      if (hits === undefined) return;
      d.hitsAddend = { value: hits };
      if (p.hits_addend.is_negative_hits) d.isNegativeHits = true;
    }
    const override = p.limit?.dynamic_metadata?.metadata_key;
    if (override) {
      const v = metadataValue(ctx.req.dynamicMetadata, override);
      // Envoy takes the override only when it is a Struct with a number requests_per_unit and a string
      // unit naming an envoy.type.v3.RateLimitUnit.
      if (v && typeof v === 'object' && typeof v.requests_per_unit === 'number' && typeof v.unit === 'string')
        if (RATE_LIMIT_UNITS.has(v.unit)) d.limit = { requestsPerUnit: v.requests_per_unit, unit: v.unit };
    }
    out.push(d);
  }

  /** One action's entry; undefined adds nothing; SKIP_DESCRIPTOR drops the whole descriptor. */
  private action(
    a: Json,
    ctx: { req: EmulatedRequest; headers: Record<string, string>; route: Route; remote: string },
  ): { key: string; value: string } | undefined | typeof SKIP_DESCRIPTOR {
    if (a.source_cluster) throw new Error('source_cluster needs the node cluster; not emulated');
    if (a.destination_cluster) {
      if (!ctx.route.route.cluster) return SKIP_DESCRIPTOR;
      return { key: 'destination_cluster', value: ctx.route.route.cluster };
    }
    if (a.request_headers) {
      const h = a.request_headers;
      const v = ctx.headers[h.header_name.toLowerCase()];
      if (v === undefined) return h.skip_if_absent ? undefined : SKIP_DESCRIPTOR;
      return { key: h.descriptor_key, value: v };
    }
    if (a.remote_address) {
      if (!isIP(ctx.remote)) return SKIP_DESCRIPTOR;
      return { key: 'remote_address', value: ctx.remote };
    }
    if (a.generic_key) {
      return { key: a.generic_key.descriptor_key || 'generic_key', value: a.generic_key.descriptor_value };
    }
    if (a.header_value_match) {
      const m = a.header_value_match;
      const all = (m.headers as Json[]).every((hm) => headerMatches(hm, ctx.headers));
      if (all !== (m.expect_match ?? true)) return SKIP_DESCRIPTOR;
      return { key: m.descriptor_key || 'header_match', value: m.descriptor_value };
    }
    if (a.metadata) {
      const m = a.metadata;
      const source =
        m.source === 'ROUTE_ENTRY' ? ctx.route.metadata?.filter_metadata : ctx.req.dynamicMetadata;
      const v = metadataValue(source, m.metadata_key);
      const value = typeof v === 'string' && v !== '' ? v : m.default_value;
      if (!value) return m.skip_if_absent ? undefined : SKIP_DESCRIPTOR;
      return { key: m.descriptor_key, value };
    }
    throw new Error(`action ${Object.keys(a).join(',')} is not emulated`);
  }
}

const SKIP_DESCRIPTOR = Symbol('skip the descriptor');
const MAX_HITS_ADDEND = 1_000_000_000;

/**
 * A RateLimit.HitsAddend's hits: `number`, or `format` — exactly one substitution command, here
 * %REQ(header)% or %DYNAMIC_METADATA(namespace:key[:key...])% — whose output must be a whole number
 * from 0 to 10^9 (a number or its decimal string); undefined otherwise (Envoy then drops the
 * descriptor).
 */
export function hitsAddend(
  h: Json,
  headers: Record<string, string>,
  metadata: Record<string, Json> | undefined,
): number | undefined {
  if (h.number !== undefined) return Number(h.number) <= MAX_HITS_ADDEND ? Number(h.number) : undefined;
  const format: string = h.format ?? '';
  if (!format) throw new Error('a hits_addend with neither number nor format is not emulated');
  let out: Json;
  let m: RegExpExecArray | null;
  if ((m = /^%REQ\(([^)]+)\)%$/.exec(format))) out = headers[m[1].toLowerCase()];
  else if ((m = /^%DYNAMIC_METADATA\(([^)]+)\)%$/.exec(format))) {
    const [ns, ...path] = m[1].split(':');
    out = metadataValue(metadata, { key: ns, path: path.map((key) => ({ key })) });
  } else throw new Error(`hits_addend format ${format} is not emulated`);
  const text = typeof out === 'number' ? String(out) : out;
  if (typeof text !== 'string' || !/^\d+$/.test(text)) return undefined;
  const n = Number(text);
  return n <= MAX_HITS_ADDEND ? n : undefined;
}
const RATE_LIMIT_UNITS = new Set(['SECOND', 'MINUTE', 'HOUR', 'DAY', 'WEEK', 'MONTH', 'YEAR']);

/** The value at a MetadataKey (namespace, then path of keys) in namespace → Struct. */
function metadataValue(ns: Record<string, Json> | undefined, key: Json): Json {
  let v: Json = ns?.[key.key];
  for (const seg of key.path ?? []) {
    if (v === null || typeof v !== 'object') return undefined;
    v = v[seg.key];
  }
  return v;
}

function domainMatches(pattern: string, host: string): boolean {
  const h = host.replace(/:\d+$/, '').toLowerCase();
  if (pattern === '*') return true;
  if (pattern.startsWith('*')) return h.endsWith(pattern.slice(1));
  if (pattern.endsWith('*')) return h.startsWith(pattern.slice(0, -1));
  return h === pattern.toLowerCase();
}

function routeMatches(match: Json, path: string, headers: Record<string, string>): boolean {
  const p = path.split('?')[0];
  let ok: boolean;
  if (match.prefix !== undefined) ok = p.startsWith(match.prefix);
  else if (match.path !== undefined) ok = p === match.path;
  else if (match.path_separated_prefix !== undefined)
    ok = p === match.path_separated_prefix || p.startsWith(`${match.path_separated_prefix}/`);
  else throw new Error(`route match ${JSON.stringify(match)} is not emulated`);
  return ok && (match.headers ?? []).every((hm: Json) => headerMatches(hm, headers));
}

/** envoy.config.route.v3.HeaderMatcher on the request headers. */
export function headerMatches(hm: Json, headers: Record<string, string>): boolean {
  const v = headers[String(hm.name).toLowerCase()];
  let r: boolean;
  if (hm.present_match !== undefined) r = (v !== undefined) === hm.present_match;
  else if (v === undefined) r = false;
  else if (hm.string_match) r = stringMatches(hm.string_match, v);
  else r = true; // no specifier: present
  return hm.invert_match ? !r : r;
}

/** A StringMatcher (envoy.type.matcher.v3 or xds.type.matcher.v3: the same fields) on one value. */
export function stringMatches(sm: Json, v: string): boolean {
  const ci = sm.ignore_case === true;
  const a = ci ? v.toLowerCase() : v;
  const lc = (s: string) => (ci ? s.toLowerCase() : s);
  if (sm.exact !== undefined) return a === lc(sm.exact);
  if (sm.prefix !== undefined) return a.startsWith(lc(sm.prefix));
  if (sm.suffix !== undefined) return a.endsWith(lc(sm.suffix));
  if (sm.contains !== undefined) return a.includes(lc(sm.contains));
  if (sm.safe_regex) return new RegExp(`^(?:${sm.safe_regex.regex})$`).test(v);
  throw new Error(`string matcher ${JSON.stringify(sm)} is not emulated`);
}

// ---------------------------------------------------------------------------------------------------
// The answer, as the filter turns it into an HTTP response

const UNIT_SECONDS: Record<string, number> = {
  SECOND: 1,
  MINUTE: 60,
  HOUR: 3600,
  DAY: 86400,
  WEEK: 604800,
  MONTH: 2592000,
  YEAR: 31536000,
};

/**
 * The x-ratelimit-* headers of enable_x_ratelimit_headers: DRAFT_VERSION_03, as Envoy computes them:
 * the status with the fewest requests remaining (among those with a current limit, first on a tie) gives
 * the limit, the remaining count and the seconds to reset; the limit header then lists every status's
 * quota policy `<requests>;w=<window seconds>` (with `;name="<name>"` when the limit is named).
 */
export function xRateLimitHeaders(statuses: WireDescriptorStatus[]): Record<string, string> {
  let min: WireDescriptorStatus | undefined;
  let policy = '';
  // proto3 leaves zero values out of the wire form (and grpc-js' objects here): absent is 0.
  for (const s of statuses) {
    if (!s.currentLimit) continue;
    if (!min || (s.limitRemaining ?? 0) < (min.limitRemaining ?? 0)) min = s;
    const w = UNIT_SECONDS[s.currentLimit.unit] ?? 0;
    if (w) {
      policy += `, ${s.currentLimit.requestsPerUnit ?? 0};w=${w}`;
      if (s.currentLimit.name) policy += `;name="${s.currentLimit.name}"`;
    }
  }
  if (!min) return {};
  return {
    'x-ratelimit-limit': `${min.currentLimit!.requestsPerUnit ?? 0}${policy}`,
    'x-ratelimit-remaining': String(min.limitRemaining ?? 0),
    'x-ratelimit-reset': String(min.durationUntilReset?.seconds ?? 0),
  };
}

/**
 * What the filter does with the answer: OVER_LIMIT → a 429 of its own (with x-envoy-ratelimited unless
 * disabled); OK → the request goes on. Either way, with DRAFT_VERSION_03, the x-ratelimit-* headers go on
 * the response the client gets.
 */
export function filterOutcome(
  filter: Json,
  answer: { overallCode: string; statuses: WireDescriptorStatus[] },
): { status?: number; headers: Record<string, string> } {
  const headers =
    filter.enable_x_ratelimit_headers === 'DRAFT_VERSION_03' ? xRateLimitHeaders(answer.statuses) : {};
  if (answer.overallCode !== 'OVER_LIMIT') return { headers };
  if (!filter.disable_x_envoy_ratelimited_header) headers['x-envoy-ratelimited'] = 'true';
  return {
    status: filter.rate_limited_status?.code ? statusCode(filter.rate_limited_status.code) : 429,
    headers,
  };
}

function statusCode(name: string | number): number {
  if (typeof name === 'number') return name;
  throw new Error(`rate_limited_status ${name} is not emulated`);
}
