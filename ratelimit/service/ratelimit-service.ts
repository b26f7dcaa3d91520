// The ShouldRateLimit decision: validate the request, match each descriptor, count, aggregate.
// Semantics follow the reference's service/ratelimit.go; deliberate differences are in the README.
import {
  UNITS,
  unitFromNumber,
  type FailureMode,
  type LimitMatch,
  type RateLimitConfig,
  type RequestDescriptor,
  type Unit,
} from '../config/model.js';
import type {
  WireDescriptor,
  WireDescriptorStatus,
  WireHeader,
  WireRateLimitRequest,
  WireRateLimitResponse,
} from '../../proto/index.js';
import { limitOf, moreQuotaMsOf, type FailureNotes, type Limiter } from '../limiter/index.js';
import { CacheError, KeyRejectedError } from '../counting/index.js';
import type { StatsStore } from '../stats/index.js';
import { NO_CONFIG_MESSAGE, ServiceError } from './errors.js';
import { MAX_HITS_ADDEND, toStruct } from '../../proto/index.js';
import { ietfHeaders, namedMetadata, type NamedDecision, type OverLimitLog } from './named-limits.js';

export const MAX_UINT32 = 4294967295;

export interface RateLimitServiceOptions {
  limiter: Limiter;
  stats: StatsStore;
  globalShadowMode?: boolean;
  globalQuotaMode?: boolean;
  responseHeaders?: HeaderNames | null;
  /** LIMIT_REQUEST_HEADERS_*: the same headers for the upstream service, in request_headers_to_add. */
  requestHeaders?: HeaderNames | null;
  responseDynamicMetadata?: boolean;
  /** NAMED_LIMITS_*: which named limit decided, in headers, metadata and a sampled log. */
  namedLimits?: NamedLimitsOptions;
}

/** The names of the limit, remaining and reset headers. */
export interface HeaderNames {
  limit: string;
  remaining: string;
  reset: string;
}

export interface NamedLimitsOptions {
  /** Add RateLimit-Policy and RateLimit (IETF draft) to response_headers_to_add. */
  ietfHeaders: boolean;
  /** Add `namedLimit` and `namedLimits` to the dynamic metadata. */
  dynamicMetadata: boolean;
  /** The sampled over-limit log, when on. */
  overLimitLog?: OverLimitLog;
}

/** Parsed, validated request in the matcher's terms; the limiter notes its failure modes in it. */
interface ParsedRequest extends FailureNotes {
  domain: string;
  descriptors: RequestDescriptor[];
  hits: number[];
  /** Per descriptor: its hits are a refund (is_negative_hits); undefined when none is. */
  negative: boolean[] | undefined;
  /** Set by the matching step: true for each descriptor an unlimited rule answered. */
  unlimited?: boolean[];
  /** The request as received (the dynamic metadata echoes its fields). */
  wire: WireRateLimitRequest;
}

export class RateLimitService {
  private config: RateLimitConfig | undefined;
  private readonly opts: RateLimitServiceOptions;

  constructor(opts: RateLimitServiceOptions) {
    this.opts = opts;
  }

  setConfig(config: RateLimitConfig): void {
    this.config = config;
  }

  getConfig(): RateLimitConfig | undefined {
    return this.config;
  }

  /** Decides one request. Throws ServiceError: `invalid` (the request), `no-config`, `unavailable` (the store). */
  async shouldRateLimit(request: WireRateLimitRequest): Promise<WireRateLimitResponse> {
    // One async function per decision (match, count, answer), not one per step: each await layer costs
    // a promise and a suspended frame per call.
    const stats = this.opts.stats.service;
    let parsed: ParsedRequest;
    let config: RateLimitConfig | undefined;
    try {
      parsed = parseRequest(request);
      config = this.config;
      if (!config) throw new ServiceError(NO_CONFIG_MESSAGE, 'no-config');
    } catch (err) {
      stats.serviceError.inc();
      throw err;
    }
    try {
      const matches = this.match(config, parsed);
      // parsed.decidedBy: set only for descriptors a failure mode decided (the cache could not count them).
      const statuses = await this.opts.limiter.doLimit(
        parsed.domain,
        matches,
        parsed.hits,
        parsed,
        parsed.negative,
      );
      return this.answer(parsed, matches, statuses);
    } catch (err) {
      if (err instanceof CacheError) {
        stats.redisError.inc();
        throw new ServiceError(err.message, 'unavailable', { cause: err });
      }
      stats.serviceError.inc();
      if (err instanceof KeyRejectedError) throw new ServiceError(err.message, 'invalid', { cause: err });
      throw err;
    }
  }

  /**
   * The limit of each descriptor (undefined: none, unlimited or replaced); the unlimited ones are noted
   * in `req.unlimited`.
   */
  private match(config: RateLimitConfig, req: ParsedRequest): (LimitMatch | undefined)[] {
    const n = req.descriptors.length;
    // The reference counts an unknown domain once per descriptor (config GetLimit).
    if (!config.hasDomain(req.domain)) this.opts.stats.domainNotFound(req.domain).inc(n);
    const matches: (LimitMatch | undefined)[] = new Array(n);
    // Allocated on the first unlimited rule matched.
    let unlimited: boolean[] | undefined;
    let replacing: Set<string> | undefined;

    for (let i = 0; i < n; i++) {
      const m = config.getLimit(req.domain, req.descriptors[i]);
      matches[i] = m;
      if (!m) continue;
      if (m.rule.replaces.length > 0) {
        replacing ??= new Set();
        for (const r of m.rule.replaces) replacing.add(r);
      }
      if (m.rule.unlimited) {
        // Answered locally without the store; statistics are still collected.
        (unlimited ??= new Array<boolean>(n).fill(false))[i] = true;
        matches[i] = undefined;
        const rs = this.opts.stats.ruleStats(m.statKey);
        if (req.negative?.[i]) rs.totalNegativeHits.inc(req.hits[i]);
        else rs.totalHits.inc(req.hits[i]);
      }
    }
    if (replacing) {
      for (let i = 0; i < n; i++) {
        const m = matches[i];
        if (m && m.rule.name !== '' && replacing.has(m.rule.name)) matches[i] = undefined;
      }
    }
    req.unlimited = unlimited;
    return matches;
  }

  /** The response from the limiter's statuses: overall code, headers, shadow mode, metadata. */
  private answer(
    req: ParsedRequest,
    matches: (LimitMatch | undefined)[],
    statuses: WireDescriptorStatus[],
  ): WireRateLimitResponse {
    const n = matches.length;
    const decidedBy = req.decidedBy;
    const unlimited = req.unlimited;
    let overLimit = false;
    let quotaCount = 0;
    let quotaOver = 0;
    let minimum: WireDescriptorStatus | undefined;
    let minRemaining = MAX_UINT32;
    const headers = this.opts.responseHeaders;
    const requestHeaders = this.opts.requestHeaders;
    const track = headers || requestHeaders;
    for (let i = 0; i < n; i++) {
      const s = statuses[i];
      if (track && s.currentLimit && s.limitRemaining < minRemaining) {
        minimum = s;
        minRemaining = s.limitRemaining;
      }
      if (unlimited?.[i]) {
        statuses[i] = { code: 'OK', limitRemaining: MAX_UINT32 };
        continue;
      }
      const m = matches[i];
      const quota = m !== undefined && (this.opts.globalQuotaMode || m.rule.quotaMode);
      if (m !== undefined && s.code === 'OVER_LIMIT') {
        // Only over-limit descriptors pay for the name lookup.
        const spec = limitOf(m, s);
        if (spec !== undefined) this.opts.stats.namedLimitOverLimit(spec.name)?.inc(req.hits[i]);
      }
      if (quota) {
        quotaCount++;
        if (s.code === 'OVER_LIMIT') quotaOver++;
      } else if (s.code === 'OVER_LIMIT') {
        overLimit = true;
        minimum = s;
        minRemaining = 0;
      }
    }
    // Quota-mode descriptors make the request OVER_LIMIT only when every one of them is exhausted.
    if (quotaCount > 0 && quotaOver === quotaCount) overLimit = true;

    const response: WireRateLimitResponse = { overallCode: overLimit ? 'OVER_LIMIT' : 'OK', statuses };
    if (headers && minimum && minimum.currentLimit) {
      response.responseHeadersToAdd = this.limitHeaders(headers, minimum);
    }
    // The descriptor closest to its limit, as for the response headers (Envoy adds these to the request
    // it forwards, so they matter only when the answer is OK).
    if (requestHeaders && minimum && minimum.currentLimit) {
      response.requestHeadersToAdd = this.limitHeaders(requestHeaders, minimum);
    }
    const named = this.opts.namedLimits;
    let namedMeta: Record<string, unknown> | undefined;
    if (named !== undefined) namedMeta = this.named(named, req, matches, statuses, overLimit, response);
    if (overLimit && this.opts.globalShadowMode) {
      response.overallCode = 'OK';
      this.opts.stats.service.globalShadowMode.inc();
    }
    if (this.opts.responseDynamicMetadata) {
      response.dynamicMetadata = this.dynamicMetadata(req, matches, statuses, decidedBy, namedMeta);
    } else if (decidedBy !== undefined || namedMeta !== undefined) {
      const out: Record<string, unknown> = { ...namedMeta };
      if (decidedBy !== undefined) out.failureMode = failureModesOf(decidedBy);
      response.dynamicMetadata = toStruct(out);
    }
    return response;
  }

  /**
   * The named-limit outputs of one decision: the over-limit log line, the IETF headers (appended to
   * response_headers_to_add) and the dynamic metadata keys (returned). The "deciding" limit is the
   * first descriptor's that rejected, else the one with the least remaining.
   */
  private named(
    opts: NamedLimitsOptions,
    req: ParsedRequest,
    matches: readonly (LimitMatch | undefined)[],
    statuses: readonly WireDescriptorStatus[],
    overLimit: boolean,
    response: WireRateLimitResponse,
  ): Record<string, unknown> | undefined {
    const log = opts.overLimitLog;
    if (!opts.ietfHeaders && !opts.dynamicMetadata) {
      if (log === undefined || !overLimit) return undefined;
    }
    const decisions: NamedDecision[] = [];
    let first = -1;
    let least = -1;
    for (let i = 0; i < matches.length; i++) {
      const m = matches[i];
      if (m === undefined) continue;
      const status = statuses[i];
      const spec = limitOf(m, status);
      if (spec === undefined) continue;
      if (status.code === 'OVER_LIMIT' && first < 0) first = decisions.length;
      if (least < 0 || status.limitRemaining < decisions[least]!.status.limitRemaining)
        least = decisions.length;
      decisions.push({ index: i, spec, status, moreMs: moreQuotaMsOf(status) });
    }
    if (log !== undefined && overLimit && first >= 0) {
      const d = decisions[first]!;
      log.record(req.domain, req.descriptors[d.index]!, d.spec, d.status);
    }
    if (decisions.length === 0) return undefined;
    if (opts.ietfHeaders) {
      const h = ietfHeaders(decisions, first);
      if (response.responseHeadersToAdd) response.responseHeadersToAdd.push(...h);
      else response.responseHeadersToAdd = h;
    }
    if (!opts.dynamicMetadata) return undefined;
    return {
      namedLimit: decisions[first >= 0 ? first : least]!.spec.name,
      namedLimits: namedMetadata(req.domain, decisions),
    };
  }

  private limitHeaders(names: HeaderNames, s: WireDescriptorStatus): WireHeader[] {
    return [
      { key: names.limit, value: String(s.currentLimit!.requestsPerUnit) },
      { key: names.remaining, value: String(s.limitRemaining) },
      { key: names.reset, value: String(s.durationUntilReset?.seconds ?? 0) },
    ];
  }

  /**
   * RESPONSE_DYNAMIC_METADATA, in the reference's shape: the domain, each descriptor's entries as
   * `key=value` strings with its `limit` override and `hitsAddend` when the request carries them, the
   * request's `hitsAddend` when not zero, and the `metadata` of the rules whose descriptors passed,
   * merged deeply with the first value of a key winning. Ours add `failureMode` and the named limits.
   */
  private dynamicMetadata(
    req: ParsedRequest,
    matches: readonly (LimitMatch | undefined)[],
    statuses: readonly WireDescriptorStatus[],
    decidedBy: readonly (FailureMode | undefined)[] | undefined,
    namedMeta: Record<string, unknown> | undefined,
  ): unknown {
    let merged: Record<string, unknown> | undefined;
    for (let i = 0; i < matches.length; i++) {
      const md = matches[i]?.rule.metadata;
      if (md && statuses[i].code !== 'OVER_LIMIT') mergeFirstWins((merged ??= {}), md);
    }
    const out: Record<string, unknown> = {
      domain: req.domain,
      descriptors: req.descriptors.map((d, i) => descriptorMetadata(d, req.wire.descriptors![i]!)),
    };
    if (req.wire.hitsAddend) out.hitsAddend = req.wire.hitsAddend;
    if (merged !== undefined && Object.keys(merged).length > 0) out.metadata = merged;
    if (decidedBy !== undefined) out.failureMode = failureModesOf(decidedBy);
    if (namedMeta !== undefined) Object.assign(out, namedMeta);
    return toStruct(out);
  }
}

/** One request descriptor in the dynamic metadata. */
function descriptorMetadata(d: RequestDescriptor, wire: WireDescriptor): Record<string, unknown> {
  const out: Record<string, unknown> = { entries: d.entries.map((e) => `${e.key}=${e.value ?? ''}`) };
  if (d.limit) {
    // The override as Go's protobuf text format prints it on one line; fields at their default are left out.
    const parts: string[] = [];
    if (d.limit.requestsPerUnit !== 0) parts.push(`requests_per_unit:${d.limit.requestsPerUnit}`);
    parts.push(`unit:${d.limit.unit}`);
    out.limit = parts.join(' ');
  }
  const h = wire.hitsAddend?.value;
  if (h !== undefined && h !== null) out.hitsAddend = Number(h);
  return out;
}

const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Merges `src` into `dest`: a key already in `dest` keeps its value, except that two objects under one
 * key are merged in turn. Objects taken from `src` are copied before they are merged into, so the
 * rules' own metadata never changes.
 */
function mergeFirstWins(dest: Record<string, unknown>, src: Readonly<Record<string, unknown>>): void {
  for (const k of Object.keys(src)) {
    const v = src[k];
    if (!Object.hasOwn(dest, k)) {
      Object.defineProperty(dest, k, { value: v, enumerable: true, writable: true, configurable: true });
      continue;
    }
    const d = dest[k];
    if (isPlainObject(d) && isPlainObject(v)) {
      const copy: Record<string, unknown> = {};
      mergeFirstWins(copy, d);
      mergeFirstWins(copy, v);
      dest[k] = copy;
    }
  }
}

/**
 * The `failureMode` dynamic metadata: which failure mode decided (the cache could not count), e.g.
 * `local`; several distinct modes in one request are joined with commas in descriptor order.
 */
function failureModesOf(decidedBy: readonly (FailureMode | undefined)[]): string {
  let out = '';
  for (const m of decidedBy) if (m !== undefined && !out.split(',').includes(m)) out += (out ? ',' : '') + m;
  return out;
}

/** A request's limit unit: its wire number, or (from /json) its exact upper-case name. */
function requestUnit(u: unknown, where: string): Unit {
  if (typeof u === 'number') {
    const unit = unitFromNumber(u);
    if (unit) return unit;
  } else if (typeof u === 'string' && (UNITS as readonly string[]).includes(u)) {
    return u as Unit;
  }
  throw new ServiceError(`${where}: unknown rate limit unit '${String(u)}'`);
}

/** Validates a request against the protocol's rules and turns it into matcher input. */
export function parseRequest(request: WireRateLimitRequest): ParsedRequest {
  const domain = request.domain ?? '';
  if (domain === '') throw new ServiceError('rate limit domain must not be empty');
  const wire = request.descriptors ?? [];
  if (wire.length === 0) throw new ServiceError('rate limit descriptor list must not be empty');
  const requestHits = request.hitsAddend && request.hitsAddend > 0 ? request.hitsAddend : 1;
  const descriptors: RequestDescriptor[] = new Array(wire.length);
  const hits: number[] = new Array(wire.length);
  let negative: boolean[] | undefined;
  for (let i = 0; i < wire.length; i++) {
    const d: WireDescriptor = wire[i];
    const entries = d.entries ?? [];
    if (entries.length === 0) throw new ServiceError(`descriptors[${i}].entries: must not be empty`);
    // An empty value is accepted although the proto says min_len 1: Envoy's request_headers action
    // sends one for a header that is present but empty, and the reference then matches the key-only
    // rule. An empty key cannot come from Envoy (its descriptor keys are required in its config).
    for (let j = 0; j < entries.length; j++) {
      if (!entries[j].key) throw new ServiceError(`descriptors[${i}].entries[${j}].key: must not be empty`);
    }
    let limit: RequestDescriptor['limit'] = null;
    if (d.limit) {
      limit = {
        requestsPerUnit: d.limit.requestsPerUnit ?? 0,
        unit: requestUnit(d.limit.unit ?? 0, `descriptors[${i}].limit.unit`),
      };
    }
    descriptors[i] = { entries: entries as RequestDescriptor['entries'], limit };
    // A refund: the same hits (the descriptor's hits_addend, else the request's) returned, not consumed.
    if (d.isNegativeHits === true) (negative ??= new Array<boolean>(wire.length).fill(false))[i] = true;
    const h = d.hitsAddend?.value;
    if (h === undefined || h === null) hits[i] = requestHits;
    else if (typeof h === 'number' && h <= MAX_HITS_ADDEND) hits[i] = h;
    else
      throw new ServiceError(
        `descriptors[${i}].hits_addend: ${h} is out of range (at most ${MAX_HITS_ADDEND})`,
      );
  }
  return { domain, descriptors, hits, negative, unlimited: undefined, wire: request, decidedBy: undefined };
}
