// The one JSON Schema for a configuration document. Everything a type system can say lives here;
// rules that relate two fields are in `crossFieldRules` (checked in code by validate.ts, and emitted
// as CEL `x-kubernetes-validations` by the CRD generator).
//
// Kept plain on purpose so that a CRD openAPIV3Schema can be generated from it: only type,
// properties, required, items, pattern, minimum/maximum, minLength and description, plus
// `additionalProperties: false` (unknown keys are errors, like the reference's validKeys; the CRD
// generator drops it, since the API server prunes or rejects unknown fields itself) and
// `additionalProperties: true` on `metadata` (free-form: x-kubernetes-preserve-unknown-fields).
// Recursion goes through `definitions` + `$ref`; the generator unrolls it.
import { FAILURE_MODES, QUOTA_UNITS } from './types.js';
import { UNITS } from './units.js';

/** Case-insensitive unit names (the reference upper-cases before looking the unit up). */
function caseInsensitiveAlternation(words: readonly string[]): string {
  const alt = words.map((w) =>
    [...w.toLowerCase()].map((c) => (c.toUpperCase() === c ? c : `[${c.toUpperCase()}${c}]`)).join(''),
  );
  return `^(${alt.join('|')})$`;
}

export const UNIT_PATTERN = caseInsensitiveAlternation(UNITS);

export { QUOTA_UNITS };

export const MAX_UINT32 = 4294967295;

/** rate_limit.algorithm values; fixed_window is the default. */
export const ALGORITHMS = ['fixed_window', 'sliding_window', 'token_bucket'] as const;

/** Bound of the rate_limits list: every limit costs keys and script work on each hit. */
export const MAX_LIMITS_PER_DESCRIPTOR = 8;

/**
 * Longest time a token bucket may take to refill from empty (burst × unit / requests_per_unit), in
 * seconds (about 317 years): within it the bucket's arithmetic is exact (every number below 2^53) and
 * its key's time to live is printable by Lua without an exponent. Checked in code (validate.ts).
 */
export const MAX_TOKEN_BUCKET_REFILL_SECONDS = 1e10;

/** `algorithm` and `burst`, the same in `rate_limit` and in each item of `rate_limits`. */
const ALGORITHM_PROPERTY = {
  type: 'string',
  enum: ALGORITHMS,
  description:
    'fixed_window (default: epoch-aligned windows, the reference behaviour), sliding_window (weighted estimate over the current and previous window) or token_bucket (GCRA).',
} as const;
const QUOTA_UNIT_PROPERTY = {
  type: 'string',
  enum: QUOTA_UNITS,
  description:
    'What one hit stands for, reported as qu in the RateLimit-Policy header: requests (default), content-bytes, concurrent-requests or tokens. Not carried over xDS.',
} as const;
const BURST_PROPERTY = {
  type: 'integer',
  minimum: 1,
  maximum: MAX_UINT32,
  description:
    'token_bucket only: hits admitted at once from a full bucket (default requests_per_unit); the bucket refills at requests_per_unit per unit.',
} as const;

export const configSchema = {
  $schema: 'http://json-schema.org/draft-07/schema#',
  $id: 'https://github.com/envoyproxy/ratelimit/config.schema.json',
  title: 'RateLimitConfig',
  description: 'One rate limit configuration document: a domain and its descriptor tree.',
  type: 'object',
  additionalProperties: false,
  required: ['domain'],
  properties: {
    domain: {
      type: 'string',
      minLength: 1,
      description:
        'Globally unique container of rules. Different teams or projects use different domains so their rules do not conflict.',
    },
    descriptors: {
      type: 'array',
      description: 'Top-level descriptor entries.',
      items: { $ref: '#/definitions/descriptor' },
    },
  },
  definitions: {
    descriptor: {
      type: 'object',
      description:
        'A descriptor entry: matches one key (and optionally one value) of a request descriptor at this depth.',
      additionalProperties: false,
      required: ['key'],
      properties: {
        key: { type: 'string', minLength: 1, description: 'Rule key. Case-sensitive.' },
        value: {
          type: 'string',
          description:
            "Rule value. When present the entry matches only that value. A trailing '*' makes it a prefix wildcard: 'value*' matches 'value_1'.",
        },
        rate_limit: { $ref: '#/definitions/rateLimit' },
        rate_limits: {
          type: 'array',
          minItems: 1,
          maxItems: MAX_LIMITS_PER_DESCRIPTOR,
          description: `Several limits on this entry (instead of rate_limit), each with its own unit and algorithm; a hit is admitted only when every limit admits it, and a rejected hit is counted against none of them. At most ${MAX_LIMITS_PER_DESCRIPTOR}.`,
          items: { $ref: '#/definitions/limit' },
        },
        shadow_mode: {
          type: 'boolean',
          description: 'When true the rule is evaluated and counted as usual but its result is always OK.',
        },
        detailed_metric: {
          type: 'boolean',
          description:
            'When true, statistics of the matched rule include the request values of every level (one series per distinct value).',
        },
        value_to_metric: {
          type: 'boolean',
          description:
            'When true, statistics include the request value at this level when the entry matched by key only or by wildcard.',
        },
        share_threshold: {
          type: 'boolean',
          description:
            'Only on a wildcard value: every request value matching the wildcard shares one counter (and one statistic), keyed by the pattern.',
        },
        quota_mode: {
          type: 'boolean',
          description:
            'Marks the rule as a quota: propagated to the compiled rule for the limiter to interpret.',
        },
        failure_mode: {
          type: 'string',
          pattern: `^(${FAILURE_MODES.join('|')})$`,
          description:
            'What the rule does when its counter cannot be counted (cache down, timed out, circuit open): error, allow, deny or local. Overrides CACHE_FAILURE_MODE.',
        },
        metadata: {
          type: 'object',
          additionalProperties: true,
          description: 'Free-form metadata attached to the rule (not validated).',
        },
        descriptors: {
          type: 'array',
          description: 'Nested entries, matched against the next entry of the request descriptor.',
          items: { $ref: '#/definitions/descriptor' },
        },
      },
    },
    rateLimit: {
      type: 'object',
      description: 'The limit applied when a request descriptor matches this entry at full depth.',
      additionalProperties: false,
      properties: {
        requests_per_unit: {
          type: 'integer',
          minimum: 0,
          maximum: MAX_UINT32,
          description: 'Allowed requests per window (unsigned 32-bit). 0 blocks every request.',
        },
        unit: {
          type: 'string',
          pattern: UNIT_PATTERN,
          description: `Window: ${UNITS.map((u) => u.toLowerCase()).join(', ')} (case-insensitive). Required unless unlimited.`,
        },
        unlimited: {
          type: 'boolean',
          description: 'When true the descriptor has no limit and is answered locally. Excludes unit.',
        },
        algorithm: ALGORITHM_PROPERTY,
        burst: BURST_PROPERTY,
        quota_unit: QUOTA_UNIT_PROPERTY,
        name: { type: 'string', description: 'Name by which another rule can replace this one.' },
        replaces: {
          type: 'array',
          description: 'Rules this rule replaces when a request matches both.',
          items: { $ref: '#/definitions/replaces' },
        },
      },
    },
    limit: {
      type: 'object',
      description: 'One of several limits of an entry (rate_limits).',
      additionalProperties: false,
      required: ['unit'],
      properties: {
        requests_per_unit: {
          type: 'integer',
          minimum: 0,
          maximum: MAX_UINT32,
          description: 'Allowed requests per unit (unsigned 32-bit). 0 blocks every request.',
        },
        unit: {
          type: 'string',
          pattern: UNIT_PATTERN,
          description: `Window: ${UNITS.map((u) => u.toLowerCase()).join(', ')} (case-insensitive).`,
        },
        algorithm: ALGORITHM_PROPERTY,
        burst: BURST_PROPERTY,
        quota_unit: QUOTA_UNIT_PROPERTY,
      },
    },
    replaces: {
      type: 'object',
      description: 'Reference to a rule by its rate_limit.name.',
      additionalProperties: false,
      required: ['name'],
      properties: {
        name: { type: 'string', minLength: 1, description: 'Name of the replaced rule.' },
      },
    },
  },
} as const;

/**
 * Cross-field rules, checked in code after the schema (validate.ts) and exported as data for the CRD
 * generator. `path` is the JSON pointer into `configSchema` of the object the rule is attached to;
 * `rule` is a CEL expression over `self` (that object); `message` is the reference's error text.
 */
export interface CrossFieldRule {
  readonly path: string;
  readonly rule: string;
  readonly message: string;
}

export const crossFieldRules: readonly CrossFieldRule[] = [
  {
    path: '/definitions/rateLimit',
    rule: '!(has(self.unlimited) && self.unlimited) || !has(self.unit)',
    message: 'should not specify rate limit unit when unlimited',
  },
  {
    path: '/definitions/rateLimit',
    rule: '(has(self.unlimited) && self.unlimited) || has(self.unit)',
    message: "invalid rate limit unit ''",
  },
  {
    path: '/definitions/rateLimit',
    rule: '!has(self.replaces) || !has(self.name) || self.replaces.all(r, r.name != self.name)',
    message: 'replaces should not contain name of same descriptor',
  },
  {
    path: '/definitions/rateLimit',
    rule: "!has(self.burst) || (has(self.algorithm) && self.algorithm == 'token_bucket')",
    message: 'burst is only valid with algorithm token_bucket',
  },
  {
    path: '/definitions/rateLimit',
    rule: '!(has(self.unlimited) && self.unlimited) || !has(self.algorithm)',
    message: 'should not specify algorithm when unlimited',
  },
  {
    path: '/definitions/limit',
    rule: "!has(self.burst) || (has(self.algorithm) && self.algorithm == 'token_bucket')",
    message: 'burst is only valid with algorithm token_bucket',
  },
  {
    path: '/definitions/descriptor',
    rule: '!has(self.rate_limit) || !has(self.rate_limits)',
    message: 'rate_limit and rate_limits are exclusive',
  },
  {
    path: '/definitions/descriptor',
    rule: "!has(self.share_threshold) || !self.share_threshold || self.key.contains('*') || (has(self.value) && self.value.contains('*'))",
    message: "share_threshold can only be used with wildcard values (containing '*')",
  },
];
