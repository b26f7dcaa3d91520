// An emulation of Envoy's rate_limit_quota HTTP filter (the RLQS client), so the quota server can be
// measured and tested with clients that behave like Envoys without an Envoy binary on this machine. It
// follows the filter's documented behaviour (rate_limit_quota.proto, rlqs.proto) and, where the
// documentation is silent, what Envoy's implementation does:
//
// - a request is put into a bucket by `bucket_matchers` (an xds Matcher: a matcher_list of header
//   predicates and on_no_match); the bucket id comes from `bucket_id_builder` (fixed strings and request
//   header values). No match and no on_no_match: allowed and not reported. No bucket_id_builder: never
//   reported, limited by no_assignment_behavior only.
// - the first request of a new bucket is decided by no_assignment_behavior (default: allow all) and
//   reported at once; from then on every bucket is reported every reporting_interval on ONE stream per
//   filter, the domain in the first message of a stream only. time_elapsed is sent with its fractions of a
//   second (Envoy's current release sends whole seconds, so 0 s for a new bucket's first report).
// - an assignment is enforced locally: blanket_rule, token_bucket (rate tokens_per_fill per whole seconds
//   of fill_interval, as Envoy computes it; a new bucket starts full; an unchanged token bucket carries
//   over), requests_per_time_unit (a window of that unit; Envoy's current release logs such an
//   assignment as unsupported and keeps the previous one, the emulation applies it as documented).
// - assignment_time_to_live (whole seconds, as Envoy reads it): then expired_assignment_behavior
//   (fallback_rate_limit or reuse_last_assignment for expired_assignment_behavior_timeout), then the
//   bucket is abandoned. AbandonAction drops the bucket; its next request starts it again.
// - a broken stream is reopened on the next reporting tick (those usages are lost, as in Envoy).
import * as grpc from '@grpc/grpc-js';
import { stringMatches, type Json } from '../envoy-actions.js';
import {
  bucketKey,
  duration,
  envoyProtos,
  rlqsServiceDefinition,
  type BucketAction,
  type BucketId,
  type QuotaResponse,
  type RateLimitStrategy,
  type UsageReports,
} from './wire.js';

const HEADER_INPUT = 'envoy.type.matcher.v3.HttpRequestHeaderMatchInput';
const BUCKET_SETTINGS = 'envoy.extensions.filters.http.rate_limit_quota.v3.RateLimitQuotaBucketSettings';

const UNIT_MS: Record<string, number> = {
  SECOND: 1000,
  MINUTE: 60_000,
  HOUR: 3_600_000,
  DAY: 86_400_000,
  MONTH: 30 * 86_400_000,
  YEAR: 365 * 86_400_000,
};

/** Local enforcement of one RateLimitStrategy. */
export class Limiter {
  private tokens = 0;
  private last = 0;
  private windowStart = 0;
  private windowCount = 0;
  readonly rate: number; // token bucket: tokens per ms

  /** `exactFillInterval`: use the fill interval's fractions of a second (a divergence from Envoy, to
   *  measure what Envoy's whole-second reading costs); `initialTokens`: start with these instead of full. */
  constructor(
    readonly strategy: RateLimitStrategy,
    now: number,
    opts: { exactFillInterval?: boolean; initialTokens?: number } = {},
  ) {
    const tb = strategy.token_bucket;
    if (tb) {
      // Envoy: tokens_per_fill / fill_interval in whole seconds (a sub-second interval gives an
      // unbounded rate); tokens_per_fill defaults to 1 as the proto documents.
      const exact = Number(tb.fill_interval?.seconds ?? 0) + Number(tb.fill_interval?.nanos ?? 0) / 1e9;
      const seconds = opts.exactFillInterval ? exact : Math.floor(exact);
      const perFill = Number(tb.tokens_per_fill?.value ?? 1);
      this.rate = seconds > 0 ? perFill / (seconds * 1000) : Infinity;
      this.tokens = Math.min(Number(tb.max_tokens), opts.initialTokens ?? Infinity);
    } else this.rate = 0;
    this.last = now;
    this.windowStart = now;
  }

  /** Tokens in the bucket at `now` (token bucket only). */
  tokensAt(now: number): number {
    const max = Number(this.strategy.token_bucket?.max_tokens ?? 0);
    return Math.min(max, this.tokens + (now - this.last) * this.rate);
  }

  /** Whether one request may pass at `now` (ms, monotonic); takes a token when it does. */
  take(now: number): boolean {
    const s = this.strategy;
    if (s.token_bucket) {
      const max = Number(s.token_bucket.max_tokens);
      this.tokens = Math.min(max, this.tokens + (now - this.last) * this.rate);
      this.last = now;
      if (this.tokens < 1) return false;
      this.tokens -= 1;
      return true;
    }
    if (s.requests_per_time_unit) {
      const unit = UNIT_MS[s.requests_per_time_unit.time_unit] ?? 1000;
      if (now - this.windowStart >= unit) {
        this.windowStart = now - ((now - this.windowStart) % unit);
        this.windowCount = 0;
      }
      if (this.windowCount >= Number(s.requests_per_time_unit.requests_per_time_unit)) return false;
      this.windowCount++;
      return true;
    }
    return s.blanket_rule !== 'DENY_ALL';
  }

  /** Envoy keeps a token bucket across assignments whose token bucket is the same. */
  sameTokenBucket(s: RateLimitStrategy): boolean {
    const a = this.strategy.token_bucket;
    const b = s.token_bucket;
    return (
      !!a &&
      !!b &&
      Number(a.max_tokens) === Number(b.max_tokens) &&
      Number(a.tokens_per_fill?.value ?? 1) === Number(b.tokens_per_fill?.value ?? 1) &&
      Number(a.fill_interval?.seconds ?? 0) === Number(b.fill_interval?.seconds ?? 0) &&
      Number(a.fill_interval?.nanos ?? 0) === Number(b.fill_interval?.nanos ?? 0)
    );
  }
}

/** Decoded strategy (durations in ms, as EnvoyProtos.decode gives them) → the wire shape. */
function strategyFromConfig(s: Json): RateLimitStrategy {
  if (s.token_bucket) {
    const tb = s.token_bucket;
    return {
      token_bucket: {
        max_tokens: tb.max_tokens,
        tokens_per_fill: tb.tokens_per_fill === undefined ? undefined : { value: tb.tokens_per_fill },
        fill_interval: duration(tb.fill_interval),
      },
    };
  }
  if (s.requests_per_time_unit) return { requests_per_time_unit: s.requests_per_time_unit };
  return { blanket_rule: s.blanket_rule ?? 'ALLOW_ALL' };
}

type ValueBuilder = { fixed: string } | { header: string };

/** One RateLimitQuotaBucketSettings of the config. */
interface BucketSettings {
  idBuilder: [string, ValueBuilder][] | undefined;
  reportingIntervalMs: number;
  noAssignment: RateLimitStrategy | undefined;
  expired:
    | { kind: 'fallback'; strategy: RateLimitStrategy; timeoutMs: number }
    | { kind: 'reuse'; timeoutMs: number }
    | undefined;
  denyStatus: number;
  /** Without a bucket id: the one no_assignment_behavior limiter of these settings. */
  unreported?: Limiter;
}

function bucketSettings(a: Json): BucketSettings {
  if (a?.['@type'] !== BUCKET_SETTINGS) throw new Error(`matcher action ${a?.['@type']} is not emulated`);
  const b = a.bucket_id_builder?.bucket_id_builder as Record<string, Json> | undefined;
  const idBuilder = b
    ? Object.entries(b).map(([k, v]): [string, ValueBuilder] => {
        if (v.string_value !== undefined) return [k, { fixed: v.string_value }];
        const tc = v.custom_value?.typed_config;
        if (tc?.['@type'] === HEADER_INPUT) return [k, { header: String(tc.header_name).toLowerCase() }];
        throw new Error(`bucket id value ${JSON.stringify(v)} is not emulated`);
      })
    : undefined;
  const e = a.expired_assignment_behavior;
  const timeoutMs = Number(e?.expired_assignment_behavior_timeout ?? 0);
  return {
    idBuilder,
    reportingIntervalMs: Number(a.reporting_interval),
    noAssignment: a.no_assignment_behavior?.fallback_rate_limit
      ? strategyFromConfig(a.no_assignment_behavior.fallback_rate_limit)
      : undefined,
    expired: !e
      ? undefined
      : e.fallback_rate_limit
        ? { kind: 'fallback', strategy: strategyFromConfig(e.fallback_rate_limit), timeoutMs }
        : { kind: 'reuse', timeoutMs },
    denyStatus: httpStatus(a.deny_response_settings?.http_status?.code),
  };
}

/** envoy.type.v3.StatusCode (a name, as decoded) → its number; 429 when unset. */
function httpStatus(code: string | number | undefined): number {
  if (code === undefined) return 429;
  if (typeof code === 'number') return code;
  const n = envoyProtos().root.lookupEnum('envoy.type.v3.StatusCode').values[code];
  if (n === undefined) throw new Error(`http_status ${code} is not a StatusCode`);
  return n;
}

interface MatchRule {
  header: string;
  value: Json; // StringMatcher
  settings: BucketSettings;
}

/** The bucket_matchers subset emulated: a matcher_list of header predicates, then on_no_match. */
function compileMatcher(m: Json): { rules: MatchRule[]; noMatch: BucketSettings | undefined } {
  const rules: MatchRule[] = [];
  for (const fm of m.matcher_list?.matchers ?? []) {
    const sp = fm.predicate?.single_predicate;
    const input = sp?.input?.typed_config;
    if (!sp || input?.['@type'] !== HEADER_INPUT || !sp.value_match)
      throw new Error(`matcher predicate ${JSON.stringify(fm.predicate)} is not emulated`);
    if (!fm.on_match?.action) throw new Error('a nested matcher in on_match is not emulated');
    rules.push({
      header: String(input.header_name).toLowerCase(),
      value: sp.value_match,
      settings: bucketSettings(fm.on_match.action.typed_config),
    });
  }
  if (m.matcher_tree) throw new Error('matcher_tree is not emulated');
  const noMatch = m.on_no_match?.action ? bucketSettings(m.on_no_match.action.typed_config) : undefined;
  return { rules, noMatch };
}

interface Bucket {
  id: BucketId;
  key: string;
  settings: BucketSettings;
  allowed: number;
  denied: number;
  lastReport: number;
  /** The enforced strategy: the assignment, a fallback, or none (no_assignment_behavior). */
  limiter: Limiter | undefined;
  state: 'no-assignment' | 'assigned' | 'expired';
  timer: NodeJS.Timeout | undefined;
}

export interface EnvoyEmulatorOptions {
  /** The RLQS server, host:port (what rlqs_server's cluster resolves to). */
  target: string;
  /** Monotonic clock in ms (default performance.now). */
  now?: () => number;
  /**
   * Deliberate divergences from Envoy, off by default, to measure what each Envoy behaviour costs a
   * quota server: `carryTokens` — a changed token bucket assignment keeps the tokens left (at most its
   * max_tokens) instead of starting full; `exactFillInterval` — fill_interval read with its fractions of
   * a second instead of whole seconds.
   */
  divergences?: { carryTokens?: boolean; exactFillInterval?: boolean };
}

/** What a request got: allowed, or denied with the deny response's HTTP status. */
export type Decision = { allowed: true } | { allowed: false; status: number };
const ALLOWED: Decision = { allowed: true };

/** One Envoy's rate_limit_quota filter. */
export class RlqsEnvoyEmulator {
  readonly domain: string;
  private readonly rules: MatchRule[];
  private readonly noMatch: BucketSettings | undefined;
  private readonly buckets = new Map<string, Bucket>();
  private readonly client: grpc.Client;
  private stream: grpc.ClientDuplexStream<UsageReports, QuotaResponse> | undefined;
  private domainSent = false;
  private reportTimer: NodeJS.Timeout | undefined;
  private closed = false;
  private readonly now: () => number;
  private readonly divergences: NonNullable<EnvoyEmulatorOptions['divergences']>;
  /** gRPC status codes the stream ended with, in order (0 = OK). */
  readonly streamErrors: number[] = [];
  /** Messages sent and received on the stream, and responses naming a bucket this Envoy does not have. */
  readonly counters = { reports: 0, responses: 0, unknownBuckets: 0 };

  /** `filter`: a RateLimitQuotaFilterConfig decoded by EnvoyProtos (durations in ms). */
  constructor(filter: Json, opts: EnvoyEmulatorOptions) {
    this.domain = filter.domain;
    ({ rules: this.rules, noMatch: this.noMatch } = compileMatcher(filter.bucket_matchers));
    this.now = opts.now ?? (() => performance.now());
    this.divergences = opts.divergences ?? {};
    const Ctor = grpc.makeGenericClientConstructor(rlqsServiceDefinition(), 'RateLimitQuotaService');
    // A connection of its own, as a separate Envoy would have.
    this.client = new Ctor(opts.target, grpc.credentials.createInsecure(), {
      'grpc.use_local_subchannel_pool': 1,
    });
  }

  /** The filter's decision on one request with these (lower-case) headers. */
  decide(headers: Record<string, string>): Decision {
    const settings = this.match(headers);
    if (!settings) return ALLOWED;
    if (!settings.idBuilder) {
      if (!settings.noAssignment) return ALLOWED;
      const now = this.now();
      settings.unreported ??= new Limiter(settings.noAssignment, now);
      return settings.unreported.take(now) ? ALLOWED : { allowed: false, status: settings.denyStatus };
    }
    const id: BucketId = { bucket: {} };
    for (const [k, v] of settings.idBuilder) {
      const value = 'fixed' in v ? v.fixed : headers[v.header];
      if (value === undefined || value === '') return ALLOWED; // no bucket id: not limited, not reported
      id.bucket[k] = value;
    }
    const key = bucketKey(id);
    const now = this.now();
    let b = this.buckets.get(key);
    if (!b) {
      b = this.newBucket(id, key, settings, now);
      const ok = this.enforce(b, now);
      this.count(b, ok);
      this.report([b], now);
      return ok ? ALLOWED : { allowed: false, status: settings.denyStatus };
    }
    const ok = this.enforce(b, now);
    this.count(b, ok);
    return ok ? ALLOWED : { allowed: false, status: b.settings.denyStatus };
  }

  /** The buckets this Envoy holds, by canonical id, with their state (for tests). */
  bucketStates(): Map<string, Bucket['state']> {
    return new Map([...this.buckets].map(([k, b]) => [k, b.state]));
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.reportTimer);
    for (const b of this.buckets.values()) clearTimeout(b.timer);
    this.buckets.clear();
    this.stream?.cancel();
    this.stream = undefined;
    this.client.close();
  }

  private match(headers: Record<string, string>): BucketSettings | undefined {
    for (const r of this.rules) {
      const v = headers[r.header];
      if (v !== undefined && stringMatches(r.value, v)) return r.settings;
    }
    return this.noMatch;
  }

  private newBucket(id: BucketId, key: string, settings: BucketSettings, now: number): Bucket {
    const b: Bucket = {
      id,
      key,
      settings,
      allowed: 0,
      denied: 0,
      lastReport: now,
      limiter: settings.noAssignment ? new Limiter(settings.noAssignment, now) : undefined,
      state: 'no-assignment',
      timer: undefined,
    };
    this.buckets.set(key, b);
    if (!this.reportTimer) this.scheduleReports(settings.reportingIntervalMs);
    return b;
  }

  private enforce(b: Bucket, now: number): boolean {
    return b.limiter ? b.limiter.take(now) : true;
  }

  private count(b: Bucket, ok: boolean): void {
    if (ok) b.allowed++;
    else b.denied++;
  }

  private scheduleReports(intervalMs: number): void {
    const tick = () => {
      if (this.closed) return;
      this.reportTimer = setTimeout(tick, intervalMs);
      if (this.buckets.size) this.report([...this.buckets.values()], this.now());
    };
    this.reportTimer = setTimeout(tick, intervalMs);
  }

  private report(buckets: Bucket[], now: number): void {
    const msg: UsageReports = {
      bucket_quota_usages: buckets.map((b) => {
        const u = {
          bucket_id: b.id,
          time_elapsed: duration(Math.max(1, now - b.lastReport)),
          num_requests_allowed: b.allowed,
          num_requests_denied: b.denied,
        };
        b.allowed = 0;
        b.denied = 0;
        b.lastReport = now;
        return u;
      }),
    };
    const s = this.openStream();
    if (!this.domainSent) {
      msg.domain = this.domain;
      this.domainSent = true;
    }
    s.write(msg);
    this.counters.reports++;
  }

  private openStream(): grpc.ClientDuplexStream<UsageReports, QuotaResponse> {
    if (this.stream) return this.stream;
    const c = this.client as unknown as {
      StreamRateLimitQuotas(): grpc.ClientDuplexStream<UsageReports, QuotaResponse>;
    };
    const s = c.StreamRateLimitQuotas();
    this.stream = s;
    this.domainSent = false;
    const gone = (code: number) => {
      if (this.stream !== s) return;
      this.stream = undefined;
      this.streamErrors.push(code);
    };
    s.on('data', (r: QuotaResponse) => this.onResponse(r));
    s.on('error', (e: grpc.ServiceError) => gone(e.code ?? grpc.status.UNKNOWN));
    s.on('end', () => gone(grpc.status.OK));
    return s;
  }

  private onResponse(r: QuotaResponse): void {
    this.counters.responses++;
    const now = this.now();
    for (const a of r.bucket_action ?? []) {
      const b = a.bucket_id?.bucket ? this.buckets.get(bucketKey(a.bucket_id)) : undefined;
      if (!b) {
        this.counters.unknownBuckets++;
        continue;
      }
      this.apply(b, a, now);
    }
  }

  private apply(b: Bucket, a: BucketAction, now: number): void {
    if (a.abandon_action) {
      this.abandon(b);
      return;
    }
    const q = a.quota_assignment_action;
    if (!q) return;
    const s: RateLimitStrategy = q.rate_limit_strategy ?? { blanket_rule: 'ALLOW_ALL' };
    if (!(b.limiter && s.token_bucket && b.limiter.sameTokenBucket(s))) {
      const carry = this.divergences.carryTokens && b.limiter?.strategy.token_bucket && s.token_bucket;
      b.limiter = new Limiter(s, now, {
        exactFillInterval: this.divergences.exactFillInterval,
        initialTokens: carry ? b.limiter!.tokensAt(now) : undefined,
      });
    }
    b.state = 'assigned';
    clearTimeout(b.timer);
    // Envoy arms the expiry with the whole seconds of the TTL.
    const ttlMs = Number(q.assignment_time_to_live?.seconds ?? 0) * 1000;
    b.timer = setTimeout(() => this.expire(b), ttlMs);
  }

  private expire(b: Bucket): void {
    if (this.buckets.get(b.key) !== b) return;
    const e = b.settings.expired;
    if (!e || e.timeoutMs <= 0) {
      this.abandon(b);
      return;
    }
    if (e.kind === 'fallback') {
      const keep = b.limiter && e.strategy.token_bucket && b.limiter.sameTokenBucket(e.strategy);
      if (!keep) b.limiter = new Limiter(e.strategy, this.now());
    }
    b.state = 'expired';
    b.timer = setTimeout(() => this.buckets.get(b.key) === b && this.abandon(b), e.timeoutMs);
  }

  private abandon(b: Bucket): void {
    clearTimeout(b.timer);
    this.buckets.delete(b.key);
  }
}
