// The compiled configuration model shared by every door (YAML files, xDS, custom resources).
// Everything here is immutable once built; a reload builds a new object and swaps it in.
import type { RateLimitFeature } from '../../proto/ratelimit-config.js';

/** Units as in envoy.service.ratelimit.v3.RateLimitResponse.RateLimit.Unit (wire numbers in UNIT_NUMBER). */
export type Unit = 'SECOND' | 'MINUTE' | 'HOUR' | 'DAY' | 'WEEK' | 'MONTH' | 'YEAR';

export interface DescriptorEntry {
  readonly key: string;
  readonly value: string;
}

/** A request-supplied limit (RateLimitDescriptor.limit). */
export interface LimitOverride {
  readonly requestsPerUnit: number;
  readonly unit: Unit;
}

/** One descriptor of a request, as the matcher sees it. */
export interface RequestDescriptor {
  readonly entries: readonly DescriptorEntry[];
  readonly limit?: LimitOverride | null;
}

/** How a limit counts (rate_limit.algorithm). */
export type Algorithm = 'fixed_window' | 'sliding_window' | 'token_bucket';

/** One limit of a rule: the rule's own (single form) or one item of `rate_limits`. */
export interface LimitSpec {
  readonly algorithm: Algorithm;
  readonly requestsPerUnit: number;
  readonly unit: Unit;
  readonly unitSeconds: number;
  /** token_bucket: hits admitted at once from a full bucket (default requestsPerUnit); otherwise 0. */
  readonly burst: number;
  /**
   * The limit's name in named-limit outputs (headers, metadata, logs, statistics): the rule's
   * ruleName, with `[i]` appended for item i of `rate_limits`. Computed once at load.
   */
  readonly name: string;
  /**
   * `quota_unit`: what one hit stands for (the RateLimit-Policy `qu`); absent for the default,
   * requests.
   */
  readonly quotaUnit?: Exclude<QuotaUnit, 'requests'>;
}

/**
 * rate_limit.quota_unit values: what one hit stands for, sent as the `qu` parameter of RateLimit-Policy
 * (draft-ietf-httpapi-ratelimit-headers-11). `requests` (the draft's default, never sent),
 * `content-bytes` and `concurrent-requests` are the units the draft registers; `tokens` is not
 * registered (the draft allows registered units only, and none counts LLM tokens) and is sent as the
 * same String, since leaving `qu` out would tell a client the quota counts requests.
 */
export const QUOTA_UNITS = ['requests', 'content-bytes', 'concurrent-requests', 'tokens'] as const;

export type QuotaUnit = (typeof QUOTA_UNITS)[number];

/**
 * Config features a pod must support to enforce a configuration (announced in xDS node metadata;
 * refused at load by a backend that cannot count them exactly).
 */
export type ConfigFeature = RateLimitFeature;

/** What a decision does when its counter cannot be counted (see ratelimit/limiter/failure-mode.ts). */
export const FAILURE_MODES = ['error', 'allow', 'deny', 'local'] as const;
export type FailureMode = (typeof FAILURE_MODES)[number];

/** A rate limit rule after compilation (the reference's config.RateLimit). */
export interface RateLimitRule {
  readonly requestsPerUnit: number;
  readonly unit: Unit;
  /** Window length in seconds (the reference's UnitToDivider). */
  readonly unitSeconds: number;
  /** rate_limit.name, '' when absent. */
  readonly name: string;
  /**
   * The rule's name in named-limit outputs: rate_limit.name when given, else its path in the config
   * (`domain.key=value.key`, a segment without `=value` for an entry without a value).
   */
  readonly ruleName: string;
  readonly unlimited: boolean;
  readonly shadowMode: boolean;
  readonly quotaMode: boolean;
  /** The descriptor's `failure_mode`; undefined: CACHE_FAILURE_MODE. */
  readonly failureMode?: FailureMode;
  /** Names of rules this rule replaces. */
  readonly replaces: readonly string[];
  /** Stats key without the `ratelimit.service.rate_limit.` prefix, e.g. `domain.key_value.key2`. */
  readonly statKey: string;
  /** Free-form `metadata` of the descriptor entry, returned as dynamic metadata. */
  readonly metadata?: Readonly<Record<string, unknown>>;
  /**
   * Every limit of the rule, decided together (empty for unlimited rules). The single form gives one
   * limit equal to the fields above; with `rate_limits` the fields above mirror limits[0].
   */
  readonly limits: readonly LimitSpec[];
  /**
   * True when the rule is counted by the per-descriptor script (any algorithm other than a single
   * fixed window, or several limits); false keeps the reference's INCRBY/EXPIRE keys and commands.
   */
  readonly scripted: boolean;
}

/** What the matcher returns for one request descriptor. */
export interface LimitMatch {
  readonly rule: RateLimitRule;
  /** Stats key for this request: equals rule.statKey unless detailed_metric / value_to_metric add request values. */
  readonly statKey: string;
  /**
   * Entries to build the cache key from: the request's own entries, except where `share_threshold`
   * makes every value matching a wildcard share one counter (then the wildcard pattern stands in).
   */
  readonly keyEntries: readonly DescriptorEntry[];
}

/** A loaded, validated and compiled configuration: all domains. */
export interface RateLimitConfig {
  /** Domain names loaded. */
  readonly domains: readonly string[];
  /** The reference's GetLimit: undefined when nothing matches (the descriptor is then answered OK). */
  getLimit(domain: string, descriptor: RequestDescriptor): LimitMatch | undefined;
  hasDomain(domain: string): boolean;
  /** Features this configuration uses beyond the reference's single fixed-window limit. */
  readonly features: ReadonlySet<ConfigFeature>;
  /**
   * Human-readable dump for the debug server's /rlconfig, one line per rule as the reference prints it;
   * with `names`, each line ends in `, name: <limit name>` (LimitSpec.name).
   */
  dump(names?: boolean): string;
  /**
   * The entry keys on the path to every entry that has a rule, root first, in config order (what a
   * descriptor must list, in this order, to reach that rule). Empty for an unknown domain.
   */
  ruleKeyPaths(domain: string): readonly (readonly string[])[];
}

/** Input to the loader: one YAML document (text) with a name used in error messages (usually the file path). */
export interface ConfigSource {
  readonly name: string;
  readonly yaml: string;
}

/** Input to the compiler when the document is already parsed (xDS resources, custom resources). */
export interface ParsedConfigSource {
  readonly name: string;
  readonly document: unknown;
}

export interface LoadOptions {
  /** MERGE_DOMAIN_CONFIG: several documents may share a domain (their descriptors are merged). */
  readonly mergeDomainConfig?: boolean;
  /** CONFIG_MAX_DESCRIPTORS: descriptors at every level of every document together (default DEFAULT_MAX_DESCRIPTORS). */
  readonly maxDescriptors?: number;
}
