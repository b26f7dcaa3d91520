// Named limits: which limit decided a request, said in the response (IETF RateLimit-Policy and
// RateLimit headers, dynamic metadata), in a sampled log line and in a per-name statistic. An on-call
// engineer can then trace a 429 to its rule from the response alone. Everything here runs only when
// a NAMED_LIMITS_* setting turns it on, and mostly only for descriptors that carry a limit.
import type { LimitSpec, RequestDescriptor } from '../config/index.js';
import type { WireDescriptorStatus, WireHeader } from '../../proto/index.js';

/** What the service needs to know of one descriptor's named limit. */
export interface NamedDecision {
  readonly index: number;
  readonly spec: LimitSpec;
  readonly status: WireDescriptorStatus;
  /**
   * Ms until the limit has more quota than now, from the limit script's verdict (0: nothing to wait
   * for); undefined when no verdict decided (a reference fixed window, a failure mode, the local cache).
   */
  readonly moreMs?: number | undefined;
}

/** The draft whose field syntax the headers follow (named in the docs). */
export const IETF_DRAFT = 'draft-ietf-httpapi-ratelimit-headers-11';

/**
 * The RateLimit `t` of a decision, in seconds (rounded up): how long until the limit has more quota
 * than it has now if no other hit comes; undefined (no `t`) when waiting brings none (nothing is
 * charged, or the quota is 0). A reference fixed window has more at its window's end once anything is
 * counted; without a verdict any other limit reports its reset.
 */
export function moreQuotaSeconds(d: NamedDecision): number | undefined {
  const ms = d.moreMs;
  if (ms === undefined) {
    const reset = d.status.durationUntilReset?.seconds ?? 0;
    if (d.spec.algorithm === 'fixed_window' && d.status.limitRemaining >= d.spec.requestsPerUnit)
      return undefined;
    return reset > 0 ? reset : undefined;
  }
  return ms > 0 ? Math.ceil(ms / 1000) : undefined;
}

const quoted = new WeakMap<LimitSpec, string>();

/**
 * A limit name as a Structured Field String (RFC 8941 3.3.3): quoted, with `"` and `\` escaped.
 * A String holds printable ASCII only, so other characters (bytes of a UTF-8 name) are written as
 * %XX. Computed once per limit.
 */
export function sfString(spec: LimitSpec): string {
  let q = quoted.get(spec);
  if (q === undefined) {
    let out = '"';
    for (const byte of Buffer.from(spec.name, 'utf8')) {
      if (byte === 0x22 || byte === 0x5c) out += '\\' + String.fromCharCode(byte);
      else if (byte === 0x25 || byte < 0x20 || byte > 0x7e)
        out += '%' + byte.toString(16).toUpperCase().padStart(2, '0');
      else out += String.fromCharCode(byte);
    }
    q = out + '"';
    quoted.set(spec, q);
  }
  return q;
}

/**
 * RateLimit-Policy and RateLimit (the draft's structured-field lists): one member per descriptor that
 * has a limit, the one that rejected first at the head, then the others in request order. Policy:
 * `"name";q=<quota>;w=<window seconds>`, with `qu="<unit>"` after `q` when the limit's quota_unit is
 * not the default (requests); service limit: `"name";r=<remaining>;t=<seconds until more>` (no `t` when
 * waiting brings no more). Quota and remaining count hits (hits_addend), in the limit's quota unit.
 */
export function ietfHeaders(decisions: readonly NamedDecision[], first: number): WireHeader[] {
  let policy = '';
  let state = '';
  // k = -1 stands for `first`; the loop then skips it in its place.
  for (let k = first >= 0 ? -1 : 0; k < decisions.length; k++) {
    if (k === first) continue;
    const d = decisions[k < 0 ? first : k]!;
    const name = sfString(d.spec);
    if (policy !== '') {
      policy += ', ';
      state += ', ';
    }
    const qu = d.spec.quotaUnit;
    policy +=
      qu === undefined
        ? `${name};q=${d.spec.requestsPerUnit};w=${d.spec.unitSeconds}`
        : `${name};q=${d.spec.requestsPerUnit};qu="${qu}";w=${d.spec.unitSeconds}`;
    state += `${name};r=${d.status.limitRemaining}`;
    const t = moreQuotaSeconds(d);
    if (t !== undefined) state += `;t=${t}`;
  }
  return [
    { key: 'RateLimit-Policy', value: policy },
    { key: 'RateLimit', value: state },
  ];
}

/** The `namedLimits` dynamic metadata: one struct per descriptor that has a limit. */
export function namedMetadata(domain: string, decisions: readonly NamedDecision[]): unknown[] {
  const out: unknown[] = new Array(decisions.length);
  for (let i = 0; i < decisions.length; i++) {
    const d = decisions[i]!;
    out[i] = {
      descriptor: d.index,
      name: d.spec.name,
      domain,
      limit: d.spec.requestsPerUnit,
      unit: d.spec.unit,
      remaining: d.status.limitRemaining,
      resetSeconds: d.status.durationUntilReset?.seconds ?? 0,
      algorithm: d.spec.algorithm,
      code: d.status.code,
    };
  }
  return out;
}

export interface OverLimitLogOptions {
  /** Share of over-limit decisions considered (0..1). */
  sampleRate: number;
  /** Lines per second at most; also the burst. */
  maxPerSecond: number;
  /** Descriptor keys whose values are written as <redacted>. */
  redactKeys: readonly string[];
  /** A longer value is cut to this many UTF-16 units plus `...`. */
  maxValueBytes: number;
  info: (msg: string) => void;
  /** Milliseconds (injectable for tests). */
  now?: () => number;
  random?: () => number;
}

export const REDACTED = '<redacted>';

/**
 * The sampled over-limit log: a line per sampled over-limit decision with the limit's name, the
 * domain and the descriptor's entries, at most maxPerSecond lines a second (a token bucket), values
 * of the listed keys redacted and long values cut.
 */
export class OverLimitLog {
  private tokens: number;
  private last: number;
  private readonly redact: ReadonlySet<string>;
  private readonly now: () => number;
  private readonly random: () => number;
  /** Lines left out by the sampling or the bound since start (shown in the next line written). */
  dropped = 0;

  constructor(private readonly opts: OverLimitLogOptions) {
    this.now = opts.now ?? Date.now;
    this.random = opts.random ?? Math.random;
    this.tokens = opts.maxPerSecond;
    this.last = this.now();
    this.redact = new Set(opts.redactKeys);
  }

  /** Whether a line may be written now (sampling, then the token bucket). */
  private admit(): boolean {
    if (this.opts.sampleRate < 1 && this.random() >= this.opts.sampleRate) return false;
    const t = this.now();
    const max = this.opts.maxPerSecond;
    this.tokens = Math.min(max, this.tokens + ((t - this.last) / 1000) * max);
    this.last = t;
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }

  private value(key: string, value: string): string {
    if (this.redact.has(key)) return REDACTED;
    const max = this.opts.maxValueBytes;
    if (Buffer.byteLength(value) <= max) return value;
    // Cut at a byte bound, dropping a split character.
    return (
      Buffer.from(value, 'utf8')
        .subarray(0, max)
        .toString('utf8')
        .replace(/\uFFFD$/, '') + '...'
    );
  }

  /** Logs one over-limit decision, if sampling and the per-second bound let it through. */
  record(domain: string, descriptor: RequestDescriptor, spec: LimitSpec, status: WireDescriptorStatus): void {
    if (!this.admit()) {
      this.dropped++;
      return;
    }
    const entries = descriptor.entries.map((e) => `${e.key}=${this.value(e.key, e.value)}`).join(',');
    this.opts.info(
      `over limit: limit=${JSON.stringify(spec.name)} domain=${JSON.stringify(domain)}` +
        ` descriptor=${JSON.stringify(entries)} limit_per_unit=${spec.requestsPerUnit} unit=${spec.unit}` +
        ` algorithm=${spec.algorithm} reset_seconds=${status.durationUntilReset?.seconds ?? 0}` +
        ` lines_dropped=${this.dropped}`,
    );
  }
}
