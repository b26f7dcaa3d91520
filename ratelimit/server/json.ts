// The proto3 JSON mapping of RateLimitRequest and RateLimitResponse for POST /json.
// Accepts both lowerCamelCase and original field names, as protojson does; rejects unknown fields.
// The request bounds (REQUEST_MAX_*) are the gRPC decoder's, with the same messages.
import {
  DEFAULT_REQUEST_BOUNDS,
  domainTooLong,
  hitsAddendOutOfRange,
  keyTooLong,
  type RequestBounds,
  tooManyDescriptors,
  tooManyEntries,
  utf8Over,
  valueTooLong,
  type WireDescriptor,
  type WireDescriptorStatus,
  type WireRateLimitRequest,
  type WireRateLimitResponse,
} from '../../proto/index.js';
import { ServiceError } from '../service/index.js';

type Obj = Record<string, unknown>;

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function field(o: Obj, camel: string, snake: string): unknown {
  return o[camel] !== undefined ? o[camel] : o[snake];
}

function checkKeys(o: Obj, allowed: readonly string[], where: string): void {
  for (const k of Object.keys(o)) {
    if (!allowed.includes(k)) throw new ServiceError(`${where}: unknown field '${k}'`);
  }
}

/** ES2024's String.prototype.isWellFormed (Node 20+), not in the compiler's lib yet. */
type WellFormed = { isWellFormed(): boolean };

function str(v: unknown, where: string): string {
  if (v === undefined || v === null) return '';
  if (typeof v !== 'string') throw new ServiceError(`${where}: expected a string`);
  // A lone surrogate (`"\ud800"` in the JSON text) has no UTF-8 form: it would be stored as U+FFFD,
  // merging counters, so it is refused as protojson refuses invalid UTF-8.
  if (!(v as unknown as WellFormed).isWellFormed())
    throw new ServiceError(`${where}: invalid UTF-8 (a lone surrogate)`);
  return v;
}

/** An unsigned integer (a JSON number or a decimal string, as protojson takes uint64) up to `max`. */
function uint(v: unknown, where: string, max: number, bounds?: RequestBounds): number {
  if (v === undefined || v === null) return 0;
  const n = typeof v === 'string' && /^\d{1,30}$/.test(v) ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 0) {
    throw new ServiceError(`${where}: expected an unsigned integer`);
  }
  if (n > max) {
    throw new ServiceError(
      bounds
        ? hitsAddendOutOfRange(bounds, where, String(v))
        : `${where}: ${String(v)} is out of range (at most ${max})`,
    );
  }
  return n;
}

const MAX_UINT32 = 4294967295;

export function requestFromJson(
  body: unknown,
  bounds: RequestBounds = DEFAULT_REQUEST_BOUNDS,
): WireRateLimitRequest {
  if (!isObj(body)) throw new ServiceError('request body must be a JSON object');
  checkKeys(body, ['domain', 'descriptors', 'hitsAddend', 'hits_addend'], 'request');
  const descriptorsRaw = body.descriptors;
  if (descriptorsRaw !== undefined && descriptorsRaw !== null && !Array.isArray(descriptorsRaw)) {
    throw new ServiceError('descriptors: expected a list');
  }
  const list = (descriptorsRaw as unknown[] | undefined) ?? [];
  if (list.length > bounds.maxDescriptors) throw new ServiceError(tooManyDescriptors(bounds));
  const domain = str(body.domain, 'domain');
  const domainBytes = utf8Over(domain, bounds.maxKeyBytes);
  if (domainBytes) throw new ServiceError(domainTooLong(bounds, domainBytes));
  const descriptors: WireDescriptor[] = list.map((d, i) => {
    const where = `descriptors[${i}]`;
    if (!isObj(d)) throw new ServiceError(`${where}: expected an object`);
    checkKeys(
      d,
      ['entries', 'limit', 'hitsAddend', 'hits_addend', 'isNegativeHits', 'is_negative_hits'],
      where,
    );
    if (d.entries !== undefined && d.entries !== null && !Array.isArray(d.entries))
      throw new ServiceError(`${where}.entries: expected a list`);
    const entriesRaw = (d.entries as unknown[] | undefined | null) ?? [];
    if (entriesRaw.length > bounds.maxEntries) throw new ServiceError(tooManyEntries(bounds, i));
    const entries = entriesRaw.map((e, j) => {
      const w = `${where}.entries[${j}]`;
      if (!isObj(e)) throw new ServiceError(`${w}: expected an object`);
      checkKeys(e, ['key', 'value'], w);
      const key = str(e.key, `${w}.key`);
      const keyBytes = utf8Over(key, bounds.maxKeyBytes);
      if (keyBytes) throw new ServiceError(keyTooLong(bounds, i, j, keyBytes));
      const value = str(e.value, `${w}.value`);
      const valueBytes = utf8Over(value, bounds.maxValueBytes);
      if (valueBytes) throw new ServiceError(valueTooLong(bounds, i, j, valueBytes));
      return { key, value };
    });
    const out: WireDescriptor = { entries };
    if (d.limit !== undefined && d.limit !== null) {
      if (!isObj(d.limit)) throw new ServiceError(`${where}.limit: expected an object`);
      checkKeys(d.limit, ['requestsPerUnit', 'requests_per_unit', 'unit'], `${where}.limit`);
      const unit = d.limit.unit;
      out.limit = {
        requestsPerUnit: uint(
          field(d.limit, 'requestsPerUnit', 'requests_per_unit'),
          `${where}.limit.requestsPerUnit`,
          MAX_UINT32,
        ),
        unit: (typeof unit === 'number' ? unit : str(unit, `${where}.limit.unit`) || 0) as never,
      };
    }
    const ha = field(d, 'hitsAddend', 'hits_addend');
    if (ha !== undefined && ha !== null) {
      out.hitsAddend = { value: uint(ha, `${where}.hits_addend`, bounds.maxHitsAddend, bounds) };
    }
    const negative = field(d, 'isNegativeHits', 'is_negative_hits');
    if (negative !== undefined && negative !== null) {
      // protojson takes a bool only as JSON true or false.
      if (typeof negative !== 'boolean')
        throw new ServiceError(`${where}.is_negative_hits: expected true or false`);
      if (negative) out.isNegativeHits = true;
    }
    return out;
  });
  return {
    domain,
    descriptors,
    hitsAddend: uint(field(body, 'hitsAddend', 'hits_addend'), 'hits_addend', bounds.maxHitsAddend, bounds),
  };
}

function statusToJson(s: WireDescriptorStatus): Obj {
  const o: Obj = { code: s.code };
  if (s.currentLimit) {
    const l: Obj = {};
    if (s.currentLimit.name) l.name = s.currentLimit.name;
    if (s.currentLimit.requestsPerUnit) l.requestsPerUnit = s.currentLimit.requestsPerUnit;
    if (s.currentLimit.unit && s.currentLimit.unit !== 'UNKNOWN') l.unit = s.currentLimit.unit;
    o.currentLimit = l;
  }
  if (s.limitRemaining) o.limitRemaining = s.limitRemaining;
  if (s.durationUntilReset) {
    const { seconds, nanos } = s.durationUntilReset;
    o.durationUntilReset = nanos
      ? `${(seconds + nanos / 1e9).toFixed(9).replace(/0+$/, '')}s`
      : `${seconds}s`;
  }
  return o;
}

/** proto3 JSON: enum names, camelCase, default values omitted, Duration as "Ns". */
export function responseToJson(r: WireRateLimitResponse): Obj {
  const o: Obj = {};
  if (r.overallCode && r.overallCode !== 'UNKNOWN') o.overallCode = r.overallCode;
  if (r.statuses.length > 0) o.statuses = r.statuses.map(statusToJson);
  if (r.responseHeadersToAdd && r.responseHeadersToAdd.length > 0) {
    o.responseHeadersToAdd = r.responseHeadersToAdd.map((h) => ({ key: h.key, value: h.value }));
  }
  if (r.requestHeadersToAdd && r.requestHeadersToAdd.length > 0) {
    o.requestHeadersToAdd = r.requestHeadersToAdd.map((h) => ({ key: h.key, value: h.value }));
  }
  if (r.dynamicMetadata) o.dynamicMetadata = structToJson(r.dynamicMetadata);
  return o;
}

function structToJson(s: unknown): unknown {
  // Struct in grpc-js object form -> plain JSON
  const fields = (s as { fields?: Record<string, unknown> }).fields ?? {};
  const out: Obj = {};
  for (const [k, v] of Object.entries(fields)) out[k] = valueToJson(v);
  return out;
}

function valueToJson(v: unknown): unknown {
  const o = v as Obj;
  if ('stringValue' in o) return o.stringValue;
  if ('numberValue' in o) return o.numberValue;
  if ('boolValue' in o) return o.boolValue;
  if ('listValue' in o) return ((o.listValue as { values?: unknown[] }).values ?? []).map(valueToJson);
  if ('structValue' in o) return structToJson(o.structValue);
  return null;
}
