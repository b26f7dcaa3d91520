// Validation of one configuration document: the JSON Schema (structure, types, unknown keys) and
// then the cross-field rules of schema.ts, with the reference's wording. Every door (YAML files,
// xDS resources, custom resources) goes through here.
import type { ErrorObject } from 'ajv';
import { suggest } from '../../common/suggest.js';
import { DESCRIPTOR_DEPTH_MESSAGE, descriptorTooDeep } from './depth.js';
import { ConfigError } from './errors.js';
import {
  ALGORITHMS,
  MAX_LIMITS_PER_DESCRIPTOR,
  MAX_TOKEN_BUCKET_REFILL_SECONDS,
  QUOTA_UNITS,
} from './schema.js';
import { UNITS, UNIT_SECONDS, parseUnit } from './units.js';
import { compositeKey } from './keys.js';
import { validate as generatedValidator } from './schema-validator.generated.js';

export { compositeKey };

/** The valid units, as an invalid one's message lists them. */
const UNIT_NAMES = UNITS.map((u) => u.toLowerCase()).join(', ');

/** The typed shape of a document that passed validation (null fields already removed). */
export interface ReplacesDoc {
  readonly name: string;
}
export type AlgorithmName = (typeof ALGORITHMS)[number];
export type QuotaUnitName = (typeof QUOTA_UNITS)[number];
export interface LimitDoc {
  readonly requests_per_unit?: number;
  readonly unit?: string;
  readonly algorithm?: AlgorithmName;
  readonly burst?: number;
  readonly quota_unit?: QuotaUnitName;
}
export interface RateLimitDoc extends LimitDoc {
  readonly unlimited?: boolean;
  readonly name?: string;
  readonly replaces?: readonly ReplacesDoc[];
}
export interface DescriptorDoc {
  readonly key: string;
  readonly value?: string;
  readonly rate_limit?: RateLimitDoc;
  readonly rate_limits?: readonly LimitDoc[];
  readonly shadow_mode?: boolean;
  readonly detailed_metric?: boolean;
  readonly value_to_metric?: boolean;
  readonly share_threshold?: boolean;
  readonly quota_mode?: boolean;
  readonly failure_mode?: 'error' | 'allow' | 'deny' | 'local';
  readonly metadata?: Readonly<Record<string, unknown>>;
  readonly descriptors?: readonly DescriptorDoc[];
}
export interface ConfigDoc {
  readonly domain: string;
  readonly descriptors?: readonly DescriptorDoc[];
}

/**
 * configSchema's validator: Ajv's code for it, generated ahead of time (scripts/generate-config-validator.ts)
 * with allErrors (every error, not the first) and verbose (an error carries the schema it failed: an
 * unknown key's message suggests the nearest known one), so no schema is compiled at run time.
 */
const validateSchema = generatedValidator as unknown as {
  (data: unknown): boolean;
  errors?: ErrorObject[] | null;
};

/**
 * Drops object properties whose value is null, recursively (not null list items). A YAML `key:` with
 * nothing after it decodes to null; the reference (Go structs) treats it as absent, and so does the
 * Kubernetes API server for non-nullable fields.
 */
export function dropNulls(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(dropNulls);
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      if (v === null || v === undefined) continue;
      // metadata is free-form: kept as given.
      out[k] = k === 'metadata' ? v : dropNulls(v);
    }
    return out;
  }
  return value;
}

/** `/descriptors/0/rate_limit` -> `descriptors[0].rate_limit`. */
export function pointerToField(pointer: string): string {
  if (pointer === '') return '';
  let out = '';
  for (const raw of pointer.slice(1).split('/')) {
    const seg = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (/^\d+$/.test(seg)) out += `[${seg}]`;
    else out += out === '' ? seg : `.${seg}`;
  }
  return out;
}

function joinField(parent: string, child: string): string {
  return parent === '' ? child : `${parent}.${child}`;
}

function valueAt(doc: unknown, pointer: string): unknown {
  let cur = doc;
  if (pointer === '') return cur;
  for (const raw of pointer.slice(1).split('/')) {
    const seg = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (cur === null || typeof cur !== 'object') return undefined;
    cur = (cur as Record<string, unknown>)[seg];
  }
  return cur;
}

/** How the reference (Go %v) prints a scalar or list item in its messages. */
function goValue(v: unknown): string {
  if (v === null || v === undefined) return '<nil>';
  if (Array.isArray(v)) return `[${v.map(goValue).join(' ')}]`;
  if (typeof v === 'object') return JSON.stringify(v);
  return String(v);
}

const TYPE_NAMES: Record<string, string> = {
  string: 'a string',
  integer: 'an integer',
  boolean: 'a boolean',
  array: 'a list',
  object: 'a map',
};

/** The keys the schema that refused an unknown key allows. */
function knownKeys(e: ErrorObject): string[] {
  const props = (e.parentSchema as { properties?: Record<string, unknown> } | undefined)?.properties;
  return props ? Object.keys(props) : [];
}

function schemaErrorToConfigError(name: string, doc: unknown, e: ErrorObject): ConfigError {
  const field = pointerToField(e.instancePath);
  const last = field.slice(Math.max(field.lastIndexOf('.'), field.lastIndexOf('[')) + 1).replace(']', '');
  switch (e.keyword) {
    case 'additionalProperties': {
      const key = (e.params as { additionalProperty: string }).additionalProperty;
      const near = suggest(key, knownKeys(e));
      return new ConfigError(
        name,
        joinField(field, key),
        `config error, unknown key '${key}'${near ? `; did you mean ${near}?` : ''}`,
      );
    }
    case 'required': {
      const missing = (e.params as { missingProperty: string }).missingProperty;
      return new ConfigError(name, joinField(field, missing), emptyMessage(e.schemaPath, missing));
    }
    case 'minLength':
      return new ConfigError(name, field, emptyMessage(e.schemaPath, last));
    case 'pattern':
      if (last === 'failure_mode') {
        return new ConfigError(
          name,
          field,
          `invalid failure_mode '${goValue(valueAt(doc, e.instancePath))}' (one of: error, allow, deny, local)`,
        );
      }
      // Otherwise rate_limit.unit.
      return new ConfigError(
        name,
        field,
        `invalid rate limit unit '${goValue(valueAt(doc, e.instancePath))}' (one of: ${UNIT_NAMES})`,
      );
    case 'type': {
      const expected = String((e.params as { type: string }).type);
      const actual = valueAt(doc, e.instancePath);
      if (expected === 'object' && field.endsWith(']')) {
        return new ConfigError(
          name,
          field,
          `config error, yaml file contains list of type other than map: ${goValue(actual)}`,
        );
      }
      if (field === '') return new ConfigError(name, field, 'config error, document must be a map');
      return new ConfigError(
        name,
        field,
        `config error, '${last}' must be ${TYPE_NAMES[expected] ?? expected}`,
      );
    }
    case 'enum':
      if (last === 'quota_unit') {
        return new ConfigError(
          name,
          field,
          `invalid quota_unit '${goValue(valueAt(doc, e.instancePath))}' (one of: ${QUOTA_UNITS.join(', ')})`,
        );
      }
      // Otherwise algorithm.
      return new ConfigError(
        name,
        field,
        `invalid rate limit algorithm '${goValue(valueAt(doc, e.instancePath))}', must be one of: ${ALGORITHMS.join(', ')}`,
      );
    case 'minItems':
    case 'maxItems':
      return new ConfigError(
        name,
        field,
        `config error, '${last}' must hold 1 to ${MAX_LIMITS_PER_DESCRIPTOR} limits`,
      );
    case 'minimum':
    case 'maximum':
      if (last === 'burst' && e.keyword === 'minimum') {
        return new ConfigError(name, field, "config error, 'burst' must be at least 1");
      }
      return new ConfigError(name, field, `config error, '${last}' must be an unsigned 32-bit integer`);
    default:
      return new ConfigError(name, field, `config error, ${e.message ?? e.keyword}`);
  }
}

function emptyMessage(schemaPath: string, property: string): string {
  if (property === 'domain') return 'config file cannot have empty domain';
  if (schemaPath.includes('/replaces/')) return 'should not have an empty replaces entry';
  if (property === 'key') return 'descriptor has empty key';
  return `config error, '${property}' must not be empty`;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** Cross-field rules (schema.ts crossFieldRules), walked in the reference's order. Defensive about types. */
function checkDescriptors(
  name: string,
  list: unknown,
  field: string,
  parentKey: string,
  errors: ConfigError[],
): void {
  if (!Array.isArray(list)) return;
  const seen = new Set<string>();
  list.forEach((entry, i) => {
    const at = `${field}[${i}]`;
    if (!isObject(entry) || typeof entry.key !== 'string' || entry.key === '') return;
    const value = typeof entry.value === 'string' ? entry.value : undefined;
    const finalKey = compositeKey(entry.key, value);
    if (seen.has(finalKey)) {
      errors.push(new ConfigError(name, at, `duplicate descriptor composite key '${parentKey}${finalKey}'`));
    }
    seen.add(finalKey);

    checkLimits(name, entry, at, errors);

    const rl = entry.rate_limit;
    if (isObject(rl)) {
      const unlimited = rl.unlimited === true;
      const validUnit = typeof rl.unit === 'string' && parseUnit(rl.unit) !== undefined;
      if (unlimited && validUnit) {
        errors.push(
          new ConfigError(name, `${at}.rate_limit.unit`, 'should not specify rate limit unit when unlimited'),
        );
      } else if (!unlimited && rl.unit === undefined) {
        errors.push(new ConfigError(name, `${at}.rate_limit.unit`, "invalid rate limit unit ''"));
      }
      if (Array.isArray(rl.replaces)) {
        rl.replaces.forEach((r, j) => {
          if (isObject(r) && typeof r.name === 'string' && r.name !== '' && r.name === rl.name) {
            errors.push(
              new ConfigError(
                name,
                `${at}.rate_limit.replaces[${j}].name`,
                'replaces should not contain name of same descriptor',
              ),
            );
          }
        });
      }
    }

    if (entry.share_threshold === true && !finalKey.includes('*')) {
      errors.push(
        new ConfigError(
          name,
          `${at}.share_threshold`,
          `share_threshold can only be used with wildcard values (containing '*'), but found key '${finalKey}'`,
        ),
      );
    }

    checkDescriptors(name, entry.descriptors, `${at}.descriptors`, `${parentKey}${finalKey}.`, errors);
  });
}

/**
 * A token bucket whose refill from empty (burst × unit / requests_per_unit) is longer than
 * MAX_TOKEN_BUCKET_REFILL_SECONDS: its message, else undefined. Compared in integers (BigInt: the
 * products pass 2^53). requests_per_unit 0 blocks every hit and has no refill.
 */
function refillTooLong(l: Record<string, unknown>): string | undefined {
  if (l.algorithm !== 'token_bucket' || typeof l.unit !== 'string') return undefined;
  const unit = parseUnit(l.unit);
  const rpu = l.requests_per_unit ?? 0;
  const burst = l.burst ?? rpu;
  if (unit === undefined || !Number.isSafeInteger(rpu) || !Number.isSafeInteger(burst)) return undefined;
  if ((rpu as number) <= 0) return undefined;
  const seconds = BigInt(burst as number) * BigInt(UNIT_SECONDS[unit]);
  if (seconds <= BigInt(MAX_TOKEN_BUCKET_REFILL_SECONDS) * BigInt(rpu as number)) return undefined;
  return (
    `token bucket refills too slowly: burst × unit / requests_per_unit must be at most ` +
    `${MAX_TOKEN_BUCKET_REFILL_SECONDS} seconds (about 317 years); lower burst or raise requests_per_unit`
  );
}

/** The algorithm rules of rate_limit / rate_limits (schema.ts crossFieldRules, plus duplicates). */
function checkLimits(name: string, entry: Record<string, unknown>, at: string, errors: ConfigError[]): void {
  const rl = entry.rate_limit;
  const list = entry.rate_limits;
  if (rl !== undefined && list !== undefined) {
    errors.push(new ConfigError(name, `${at}.rate_limits`, 'rate_limit and rate_limits are exclusive'));
  }
  const checkBurst = (l: unknown, field: string): void => {
    if (isObject(l) && l.burst !== undefined && l.algorithm !== 'token_bucket') {
      errors.push(new ConfigError(name, `${field}.burst`, 'burst is only valid with algorithm token_bucket'));
    }
    const refill = isObject(l) ? refillTooLong(l) : undefined;
    if (refill !== undefined) errors.push(new ConfigError(name, `${field}.burst`, refill));
  };
  if (isObject(rl)) {
    checkBurst(rl, `${at}.rate_limit`);
    if (rl.unlimited === true && rl.algorithm !== undefined) {
      errors.push(
        new ConfigError(name, `${at}.rate_limit.algorithm`, 'should not specify algorithm when unlimited'),
      );
    }
  }
  if (!Array.isArray(list)) return;
  // Each limit of a descriptor keeps its state under (algorithm, unit): two limits with the same pair
  // would share it. (Not a CEL rule: quadratic, and the operator's validator refuses it anyway.)
  const seen = new Set<string>();
  list.forEach((l, j) => {
    const field = `${at}.rate_limits[${j}]`;
    checkBurst(l, field);
    if (!isObject(l) || typeof l.unit !== 'string') return;
    const unit = parseUnit(l.unit);
    if (unit === undefined) return;
    const pair = `${typeof l.algorithm === 'string' ? l.algorithm : 'fixed_window'} ${unit.toLowerCase()}`;
    if (seen.has(pair)) {
      errors.push(
        new ConfigError(
          name,
          field,
          `duplicate limit: two rate_limits with the same algorithm and unit (${pair})`,
        ),
      );
    }
    seen.add(pair);
  });
}

/** Validates and normalizes; `document` is the typed document when there are no errors. */
export function checkDocument(
  name: string,
  document: unknown,
): { errors: ConfigError[]; document: ConfigDoc | undefined } {
  // An empty YAML file is an empty map to the reference: it then fails on the empty domain.
  // Depth first: everything below walks the tree recursively.
  const tooDeep = descriptorTooDeep(document);
  if (tooDeep !== undefined) {
    return { errors: [new ConfigError(name, tooDeep, DESCRIPTOR_DEPTH_MESSAGE)], document: undefined };
  }
  const doc = dropNulls(document ?? {});
  const errors: ConfigError[] = [];
  if (!validateSchema(doc)) {
    for (const e of validateSchema.errors ?? []) errors.push(schemaErrorToConfigError(name, doc, e));
  }
  if (isObject(doc)) {
    const domain = typeof doc.domain === 'string' ? doc.domain : '';
    checkDescriptors(name, doc.descriptors, 'descriptors', `${domain}.`, errors);
  }
  return { errors, document: errors.length === 0 ? (doc as ConfigDoc) : undefined };
}

/** Every error of one document (empty when valid). */
