// The quota server: the state of every bucket this pod serves, the streams subscribed to them, and the
// tick that keeps assignments fresh. Per bucket it keeps each subscribed stream's smoothed demand; on
// each report, on each tick and on each config change it divides the bucket's budget (allocator.ts) and
// pushes to a stream the assignments that moved beyond RLQS_REASSIGN_THRESHOLD_PERCENT, that are new, or
// whose copy the client holds has run through more than 3/8 of its time to live. Memory is bounded:
// RLQS_MAX_STREAMS streams, RLQS_MAX_BUCKETS buckets and RLQS_MAX_BUCKET_BYTES of their ids per pod,
// RLQS_MAX_BUCKETS_PER_STREAM buckets and RLQS_MAX_BUCKET_BYTES_PER_STREAM per stream; buckets idle past
// RLQS_IDLE_TIMEOUT are abandoned (AbandonAction) and forgotten; a stream holds at most one response the
// client has not taken (later actions wait, merged per bucket) and is ended when the client takes none of
// it for RLQS_SEND_TIMEOUT.
import { createHash } from 'node:crypto';
import type { Logger } from '../../common/index.js';
import type {
  RequestBounds,
  WireBucketAction,
  WireRateLimitStrategy,
  WireUsageReports,
} from '../../proto/index.js';
import type { RateLimitConfig } from '../config/index.js';
import type { CounterStore } from '../counting/index.js';
import type { QuotaSettings } from '../settings/index.js';
import type { StatsStore } from '../stats/index.js';
import {
  budgetOf,
  divide,
  movedBeyond,
  podFraction,
  strategyFor,
  wholeShares,
  type Demand,
} from './allocator.js';
import { BucketMatcher, bucketKey } from './bucket-match.js';
import { FleetDemand, othersDemand, type FleetBucket } from './fleet.js';
import { Bucket, QuotaStream, type QuotaStreamOut } from './state.js';
import { QuotaMetrics } from './metrics.js';
import { Outbox } from './outbox.js';
import { readReports, StreamError, type Usage } from './stream.js';

/**
 * An assignment the client holds is sent again once more than this fraction of the time to live it was
 * sent with has passed, and by REFRESH_BY of it at the latest (the timer's deadline): the client always
 * has at least half its time to live left (at least half a second) when a refresh is due, margin for an
 * event loop busy with other streams.
 */
const REFRESH_AFTER = 3 / 8;
const REFRESH_BY = 1 / 2;

export interface QuotaServerOptions {
  settings: QuotaSettings;
  bounds: RequestBounds;
  /** Where fleet demand is added up (the service's counter store). */
  store: CounterStore;
  keyPrefix: string;
  stats: StatsStore;
  logger: Logger;
  now?: () => number;
}

export class QuotaServer {
  private readonly q: QuotaSettings;
  private readonly now: () => number;
  private readonly streams = new Set<QuotaStream>();
  private readonly buckets = new Map<string, Bucket>();
  private readonly fleet: FleetDemand;
  readonly metrics: QuotaMetrics;
  private matcher: BucketMatcher | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** The pass period, and when the next pass runs. */
  private tickMs: number;
  private nextPassMs = Infinity;
  /** A refresh due before the next pass: its timer and when it fires. */
  private refreshTimer: NodeJS.Timeout | undefined;
  private refreshAtMs = Infinity;
  /** Streams holding actions back until their client takes its queued response. */
  private readonly outbox: Outbox;
  /** UTF-8 bytes of the ids of the buckets this pod tracks. */
  private bucketBytes = 0;
  private exchanging = false;
  private closing = false;
  private readonly shares: number[] = [];
  private readonly held: number[] = [];
  private readonly tokens: number[] = [];

  constructor(private readonly opts: QuotaServerOptions) {
    this.q = opts.settings;
    this.now = opts.now ?? Date.now;
    this.fleet = new FleetDemand(opts.store, this.q.reportingIntervalMs);
    this.metrics = new QuotaMetrics(opts.stats);
    this.outbox = new Outbox({
      now: this.now,
      sendTimeoutMs: this.q.sendTimeoutMs,
      responses: this.metrics.responses,
      fail: (s, err) => this.fail(s, err),
    });
    this.tickMs = Math.max(10, Math.floor(this.q.reportingIntervalMs / 4));
  }

  /** Checks a config for buckets (throws ConfigError when ambiguous); `apply` the result once it serves. */
  prepare(config: RateLimitConfig): BucketMatcher {
    return new BucketMatcher(config);
  }

  /** Serves a new config: every bucket is matched again and every subscriber gets its new assignment now. */
  apply(matcher: BucketMatcher): void {
    this.matcher = matcher;
    for (const b of this.buckets.values()) this.rematch(b);
    for (const b of this.buckets.values()) this.reallocate(b, true);
    this.outbox.flush();
  }

  start(): void {
    this.nextPassMs = this.now() + this.tickMs;
    this.timer = setInterval(() => this.tick(), this.tickMs);
    this.timer.unref();
  }

  /** A new stream; throws StreamError (RESOURCE_EXHAUSTED) past RLQS_MAX_STREAMS. */
  open(out: QuotaStreamOut): QuotaStream {
    if (this.closing) throw new StreamError('server shutting down', 'exhausted');
    if (this.streams.size >= this.q.maxStreams) {
      this.metrics.streamErrors.inc();
      throw new StreamError(
        `this pod serves ${this.q.maxStreams} quota streams (RLQS_MAX_STREAMS)`,
        'exhausted',
      );
    }
    const s = new QuotaStream(out, this.q.reportingIntervalMs, this.now());
    this.streams.add(s);
    this.metrics.streams.set(this.streams.size);
    return s;
  }

  /** One report message of a stream; a bad one ends the stream (the caller's error only). */
  report(s: QuotaStream, msg: WireUsageReports): void {
    if (this.closing || s.out.closed) return;
    let usages: Usage[];
    try {
      const r = readReports(msg, s.domain, this.q, this.opts.bounds);
      s.domain = r.domain;
      usages = r.usages;
      this.checkNewBuckets(s, usages);
    } catch (err) {
      this.fail(s, err);
      return;
    }
    s.reports++;
    this.metrics.reports.inc();
    const now = this.now();
    s.lastReportMs = now;
    const touched: Bucket[] = [];
    let maxElapsed = 0;
    for (const u of usages) {
      const key = bucketKey(s.domain!, u.bucket);
      let b = s.buckets.get(key) ?? this.buckets.get(key);
      if (b === undefined) {
        b = this.createBucket(key, s.domain!, u.bucket);
        this.readFleetSoon(b);
      }
      let sub = b.subs.get(s);
      if (sub === undefined) {
        sub = {
          demand: 0,
          reports: 0,
          lastReportMs: now,
          sentTokens: -1,
          sentKind: '',
          sent: undefined,
          sentAtMs: 0,
          sentTtlMs: 0,
          changedAtMs: 0,
          share: 0,
          tokens: 0,
        };
        b.subs.set(s, sub);
        s.buckets.set(key, b);
        s.bucketBytes += b.bytes;
      }
      // A report covering less than a quarter of the reporting interval (Envoy's first report of a new
      // bucket, sent as it is created) subscribes without a demand sample: one request over a few
      // microseconds is no rate. The subscriber then weighs as a newcomer (allocator.ts).
      if (u.elapsedSeconds * 1000 >= this.q.reportingIntervalMs / 4) {
        // Nobody can use more than the budget: a larger report counts as the budget (allocator.ts divide).
        const rate = Math.min(b.demandCap(), (u.allowed + u.denied) / u.elapsedSeconds);
        // An Envoy that wanted less than its share (it denied nothing it had to) is satisfied: its rate
        // is taken at once, so one that went idle hands its share to the others within one report.
        // One held back by its share is smoothed (its denials make the rate noisy).
        const a = this.q.demandSmoothing;
        sub.demand =
          sub.reports === 0 || (rate < sub.share && rate < sub.demand)
            ? rate
            : a * rate + (1 - a) * sub.demand;
        sub.reports++;
        maxElapsed = Math.max(maxElapsed, u.elapsedSeconds);
      }
      sub.lastReportMs = now;
      b.rule.allowed.inc(u.allowed);
      b.rule.denied.inc(u.denied);
      touched.push(b);
    }
    if (maxElapsed > 0) s.intervalMs = Math.min(3_600_000, Math.max(40, maxElapsed * 1000));
    for (const b of touched) this.reallocate(b, false);
    this.outbox.flush();
  }

  /** The client half-closed or went away: its subscriptions go. */
  close(s: QuotaStream): void {
    if (!this.streams.delete(s)) return;
    this.metrics.streams.set(this.streams.size);
    this.outbox.forget(s);
    for (const b of s.buckets.values()) this.unsubscribe(b, s);
    s.buckets.clear();
  }

  /**
   * Graceful shutdown: every stream gets its assignments again with a time to live of 0 (Envoy falls
   * back to its expired-assignment behaviour while it reconnects to another pod); then the streams end.
   */
  shutdown(): void {
    this.closing = true;
    clearInterval(this.timer);
    clearTimeout(this.refreshTimer);
    this.outbox.stop();
    for (const s of this.streams) {
      const actions: WireBucketAction[] = [];
      for (const b of s.buckets.values()) {
        const sub = b.subs.get(s)!;
        if (sub.sent) actions.push(this.assignment(b, sub.sent, 0));
      }
      this.outbox.replace(s, actions);
      s.out.end('unavailable', 'server shutting down: reconnect');
    }
  }

  /** For the debug endpoint and explain: streams and buckets with their current assignments. */
  snapshot(limit = 1000): unknown {
    const buckets = [];
    for (const b of this.buckets.values()) {
      if (buckets.length >= limit) break;
      buckets.push({
        domain: b.domain,
        bucket: b.bucket,
        rule: b.match ? b.match.rule.statKey : null,
        budget: b.budget,
        fleet: {
          othersDemand: othersDemand(b.fleet) ?? null,
          window: b.fleet.readWindow,
          pods: b.fleet.view?.pods ?? null,
        },
        subscribers: [...b.subs].map(([s, sub]) => ({
          stream: s.id,
          demand: sub.demand,
          share: sub.share,
          sent: sub.sentTokens,
        })),
      });
    }
    return {
      streams: [...this.streams].slice(0, limit).map((s) => ({
        id: s.id,
        domain: s.domain ?? null,
        buckets: s.buckets.size,
        reports: s.reports,
        responses: s.responses,
        intervalMs: s.intervalMs,
      })),
      buckets,
      truncated: this.buckets.size > limit || this.streams.size > limit,
    };
  }

  /** Ends a stream for its own error; its slot and subscriptions go at once (not when the client leaves). */
  private fail(s: QuotaStream, err: unknown): void {
    this.metrics.streamErrors.inc();
    this.close(s);
    if (err instanceof StreamError) s.out.end(err.code, err.message);
    else {
      this.opts.logger.error({ err }, 'unexpected error in a rate limit quota stream');
      s.out.end('unavailable', (err as Error)?.message ?? String(err));
    }
  }

  /** The bounds on new buckets, checked before anything of the message is applied. */
  private checkNewBuckets(s: QuotaStream, usages: readonly Usage[]): void {
    let newForStream = 0;
    let newForPod = 0;
    let bytesForStream = 0;
    let bytesForPod = 0;
    const seen = new Set<string>();
    for (const u of usages) {
      const key = bucketKey(s.domain!, u.bucket);
      if (s.buckets.has(key) || seen.has(key)) continue;
      seen.add(key);
      const bytes = Buffer.byteLength(key, 'utf8');
      newForStream++;
      bytesForStream += bytes;
      if (!this.buckets.has(key)) {
        newForPod++;
        bytesForPod += bytes;
      }
    }
    if (s.bucketBytes + bytesForStream > this.q.maxBucketBytesPerStream) {
      throw new StreamError(
        `the bucket ids of a stream may take ${this.q.maxBucketBytesPerStream} bytes (RLQS_MAX_BUCKET_BYTES_PER_STREAM); this one's take ${s.bucketBytes + bytesForStream}`,
      );
    }
    if (this.bucketBytes + bytesForPod > this.q.maxBucketBytes) {
      throw new StreamError(
        `this pod tracks ${this.q.maxBucketBytes} bytes of bucket ids (RLQS_MAX_BUCKET_BYTES)`,
        'exhausted',
      );
    }
    if (s.buckets.size + newForStream > this.q.maxBucketsPerStream) {
      throw new StreamError(
        `a stream may report ${this.q.maxBucketsPerStream} buckets (RLQS_MAX_BUCKETS_PER_STREAM); this one reports ${s.buckets.size + newForStream}`,
      );
    }
    if (this.buckets.size + newForPod > this.q.maxBuckets) {
      throw new StreamError(`this pod tracks ${this.q.maxBuckets} buckets (RLQS_MAX_BUCKETS)`, 'exhausted');
    }
  }

  private createBucket(key: string, domain: string, bucket: Readonly<Record<string, string>>): Bucket {
    const hash = createHash('sha1').update(key).digest('hex');
    const b = new Bucket(key, domain, bucket, `${this.opts.keyPrefix}rlqs_${hash}`);
    this.rematch(b);
    this.buckets.set(key, b);
    this.bucketBytes += b.bytes;
    this.metrics.buckets.set(this.buckets.size);
    return b;
  }

  private rematch(b: Bucket): void {
    b.match = this.matcher?.match(b.domain, b.bucket);
    b.budget = budgetOf(b.match?.rule);
    b.rule = this.metrics.rule(b.match?.rule.statKey);
    if (b.match === undefined) this.metrics.unknownBuckets.inc();
  }

  private unsubscribe(b: Bucket, s: QuotaStream): void {
    if (!b.subs.delete(s)) return;
    s.bucketBytes -= b.bytes;
    if (b.subs.size === 0) {
      this.buckets.delete(b.key);
      this.bucketBytes -= b.bytes;
      this.metrics.buckets.set(this.buckets.size);
    } else this.reallocate(b, false);
  }

  /**
   * Divides the bucket's budget into whole tokens per second and queues the assignments that must be
   * sent. Envoy starts a changed token bucket full, so a stream's bucket changes only when its whole
   * tokens moved by more than RLQS_REASSIGN_THRESHOLD_PERCENT; a share that shrinks goes at once, one that
   * grows goes at once when the shrinking ones left room for it (the whole tokens in force stay within the
   * pod's part), otherwise once a reporting interval has passed since the stream's last change (so the
   * shares sent add up to the budget or less while they move); a config change (`force`) and a change of kind go
   * at once. Otherwise the bucket last sent is sent again unchanged (Envoy keeps an identical bucket's
   * tokens) once more than REFRESH_AFTER of the time to live *it was sent with* has passed: that is the
   * copy the client holds, and a stream whose reporting interval grew would otherwise wait for half the
   * new, longer one while its short-lived copy runs out. A refresh timer makes sure that moment is not
   * missed when it falls before the next pass.
   */
  private reallocate(b: Bucket, force: boolean): void {
    const subs = [...b.subs];
    const demands: Demand[] = subs.map(([, sub]) => ({
      demand: sub.demand,
      // One sample is a rate (over at least a quarter interval): waiting for a second one weighed an
      // Envoy as the others' average meanwhile, and swung its neighbours' shares as each got its second.
      established: sub.reports >= 1,
      sampled: sub.reports >= 1,
    }));
    let podShare = 0;
    if (b.budget.kind === 'rate') {
      podShare = b.budget.perSecond * podFraction(b.fleet.view, this.q.expectedPods, b.budget.perSecond);
    }
    divide(podShare, demands, this.shares, b.demandCap());
    this.held.length = subs.length;
    for (let i = 0; i < subs.length; i++) this.held[i] = subs[i]![1].sentTokens;
    wholeShares(this.shares, this.held, this.tokens);
    const now = this.now();
    // Room for growing shares at once: the whole tokens to hand out less those in force once this
    // division's other changes (new subscribers, changes of kind, shrinking shares) are sent.
    let room = 0;
    for (let i = 0; i < subs.length; i++) {
      const sub = subs[i]![1];
      const t = this.tokens[i]!;
      const kind = this.kindOf(b, this.shares[i]!);
      const sentNow =
        force ||
        sub.sent === undefined ||
        kind !== sub.sentKind ||
        (kind === 'rate' &&
          sub.sentTokens > t &&
          movedBeyond(sub.sentTokens, t, this.q.reassignThresholdPercent));
      room += t - (sentNow ? t : kind === 'rate' ? Math.max(0, sub.sentTokens) : 0);
    }
    let assigned = 0;
    for (let i = 0; i < subs.length; i++) {
      const [s, sub] = subs[i]!;
      sub.share = this.shares[i]!;
      sub.tokens = this.tokens[i]!;
      assigned += sub.share;
      const kind = this.kindOf(b, sub.share);
      // Envoy reads the time to live in whole seconds: rounded up, never to less than asked.
      const ttlMs = Math.ceil((this.q.ttlIntervals * s.intervalMs) / 1000) * 1000;
      let change = force || sub.sent === undefined || kind !== sub.sentKind;
      if (
        !change &&
        kind === 'rate' &&
        movedBeyond(sub.sentTokens, sub.tokens, this.q.reassignThresholdPercent)
      ) {
        const growth = sub.tokens - Math.max(0, sub.sentTokens);
        if (growth <= 0) change = true;
        else if (growth <= room || now - sub.changedAtMs >= s.intervalMs) {
          change = true;
          room -= growth;
        }
      }
      if (change) {
        sub.sent = strategyFor(b.budget, sub.tokens, sub.share);
        sub.sentTokens = sub.tokens;
        sub.sentKind = kind;
        sub.changedAtMs = now;
      } else if (now - sub.sentAtMs <= sub.sentTtlMs * REFRESH_AFTER) {
        this.refreshBy(sub.sentAtMs + sub.sentTtlMs * REFRESH_BY);
        continue;
      }
      sub.sentAtMs = now;
      sub.sentTtlMs = ttlMs;
      this.refreshBy(now + ttlMs * REFRESH_BY);
      this.outbox.queue(s, this.assignment(b, sub.sent!, ttlMs));
    }
    b.assigned = assigned;
  }

  /** What kind of assignment a share of the bucket is: its budget's, or deny for a rated share of 0. */
  private kindOf(b: Bucket, share: number): string {
    return b.budget.kind === 'rate' && share <= 0 ? 'deny' : b.budget.kind;
  }

  private assignment(b: Bucket, strategy: WireRateLimitStrategy, ttlMs: number): WireBucketAction {
    return {
      bucketId: { bucket: b.bucket },
      quotaAssignmentAction: {
        assignmentTimeToLive: { seconds: Math.floor(ttlMs / 1000), nanos: (ttlMs % 1000) * 1e6 },
        rateLimitStrategy: strategy,
      },
    };
  }

  /** Makes sure the assignments are passed over by `atMs`: a refresh timer when the next pass is later. */
  private refreshBy(atMs: number): void {
    if (this.closing || this.timer === undefined) return;
    if (atMs >= this.nextPassMs || atMs >= this.refreshAtMs) return;
    clearTimeout(this.refreshTimer);
    this.refreshAtMs = atMs;
    this.refreshTimer = setTimeout(
      () => {
        this.refreshAtMs = Infinity;
        this.refreshTimer = undefined;
        try {
          for (const b of this.buckets.values()) this.reallocate(b, false);
          this.outbox.flush();
        } catch (err) {
          this.opts.logger.error({ err }, 'rate limit quota refresh failed');
        }
      },
      Math.max(0, atMs - this.now()),
    );
    this.refreshTimer.unref();
  }

  /** The periodic pass; an unexpected error is logged, never thrown out of the timer (the process stays up). */
  private tick(): void {
    try {
      this.pass();
    } catch (err) {
      this.opts.logger.error({ err }, 'rate limit quota pass failed');
    }
  }

  /** Abandons idle buckets, exchanges fleet demand once per window, refreshes assignments. */
  private pass(): void {
    const now = this.now();
    this.nextPassMs = now + this.tickMs;
    for (const s of this.streams) {
      let abandoned: WireBucketAction[] | undefined;
      for (const b of s.buckets.values()) {
        if (now - b.subs.get(s)!.lastReportMs < this.q.idleTimeoutMs) continue;
        (abandoned ??= []).push({ bucketId: { bucket: b.bucket }, abandonAction: {} });
        b.rule.abandoned.inc();
        s.buckets.delete(b.key);
        this.unsubscribe(b, s);
      }
      if (abandoned) this.outbox.send(s, abandoned);
      // A stream with nothing to watch that has been silent as long ends, so silent streams cannot hold
      // RLQS_MAX_STREAMS slots for ever (Envoy opens a new one with its next report).
      if (s.buckets.size === 0 && now - s.lastReportMs >= this.q.idleTimeoutMs) {
        this.close(s);
        s.out.end('ok', `no report for ${this.q.idleTimeoutMs}ms (RLQS_IDLE_TIMEOUT)`);
      }
    }
    for (const b of this.buckets.values()) this.reallocate(b, false);
    this.outbox.flush();
    this.metrics.refresh(this.buckets.values());
    if (this.exchanging || this.buckets.size === 0) return;
    this.exchanging = true;
    const rated = [...this.buckets.values()].filter((b) => b.budget.kind === 'rate');
    this.exchangeFleet(rated, now).finally(() => (this.exchanging = false));
  }

  /** Buckets new to this pod, read from the fleet together right after the reports that created them. */
  private fresh: Bucket[] = [];

  /**
   * A bucket new to this pod reads the fleet at once rather than at the next pass: until then it takes
   * the unknown fleet's part (budget / RLQS_EXPECTED_PODS), right when every pod starts together, too
   * much when the others already share the budget without it.
   */
  private readFleetSoon(b: Bucket): void {
    if (this.fresh.push(b) > 1) return;
    setImmediate(() => {
      const list = this.fresh.filter((x) => x.budget.kind === 'rate' && this.buckets.get(x.key) === x);
      this.fresh = [];
      if (list.length > 0 && !this.closing) void this.exchangeFleet(list, this.now());
    });
  }

  /** Exchanges fleet demand for `buckets`; those whose view was read are divided again at once. */
  private async exchangeFleet(buckets: FleetBucket[], now: number): Promise<void> {
    try {
      const r = await this.fleet.exchange(buckets, now);
      if (!r.ok) this.metrics.fleetErrors.inc();
      if (this.closing) return;
      for (const b of r.read as Bucket[]) if (this.buckets.get(b.key) === b) this.reallocate(b, false);
      this.outbox.flush();
    } catch (err) {
      this.opts.logger.error({ err }, 'rate limit quota fleet exchange failed');
    }
  }
}
