// The state the quota server keeps: per bucket its rule, budget, fleet view and subscribed streams; per
// stream its domain, its buckets and its reporting interval. Plain data; server.ts changes it.
import type { LimitMatch } from '../config/index.js';
import type { WireBucketAction, WireQuotaResponse, WireRateLimitStrategy } from '../../proto/index.js';
import type { Budget } from './allocator.js';
import { newFleetState, type FleetState } from './fleet.js';
import type { RuleMetrics } from './metrics.js';

/** The sending side of a stream, as the gRPC layer gives it. */
export interface QuotaStreamOut {
  send(msg: WireQuotaResponse): void;
  end(code: 'ok' | 'invalid' | 'exhausted' | 'unavailable', message?: string): void;
  readonly closed: boolean;
  /** Bytes sent but not yet taken by the client (waiting for its flow-control window). */
  readonly queuedBytes: number;
}

export interface Subscription {
  demand: number;
  reports: number;
  lastReportMs: number;
  /** Whole tokens per second last sent (-1: nothing sent yet), its strategy kind and the strategy. */
  sentTokens: number;
  sentKind: string;
  sent: WireRateLimitStrategy | undefined;
  /** When an assignment was last sent (a refresh included), its time to live, and when the sent one last changed. */
  sentAtMs: number;
  sentTtlMs: number;
  changedAtMs: number;
  /** Share computed by the last division (requests per second), and its whole tokens per second. */
  share: number;
  tokens: number;
}

export class Bucket {
  readonly subs = new Map<QuotaStream, Subscription>();
  match: LimitMatch | undefined;
  budget: Budget = { kind: 'allow' };
  rule!: RuleMetrics;
  readonly fleet: FleetState = newFleetState();
  /** Sum of the shares of the last division (requests per second). */
  assigned = 0;
  /** UTF-8 bytes of the bucket's id (its key: the domain, keys and values), as counted by the bounds. */
  readonly bytes: number;
  constructor(
    readonly key: string,
    readonly domain: string,
    readonly bucket: Readonly<Record<string, string>>,
    readonly fleetKey: string,
  ) {
    this.bytes = Buffer.byteLength(key, 'utf8');
  }
  get subscribers(): number {
    return this.subs.size;
  }
  /** The most one subscriber's demand counts: the budget (nobody can use more). */
  demandCap(): number {
    return this.budget.kind === 'rate' ? this.budget.perSecond : Infinity;
  }
  /**
   * This pod's demand: its subscribers' demand, each capped at the budget, one without a sample yet
   * counted as the average of those with one.
   */
  localDemand(): number {
    return this.fold(Infinity);
  }
  /**
   * This pod's guaranteed demand (allocator.ts guaranteedDemand): the sum of its subscribers' demands,
   * each counted up to the budget over the fleet's subscribers (as last read; this pod's own while none
   * was read).
   */
  guaranteed(): number {
    if (this.budget.kind !== 'rate') return 0;
    const fleetSubs = Math.max(this.subs.size, this.fleet.view?.subscribers ?? 0);
    return this.fold(this.budget.perSecond / Math.max(1, fleetSubs));
  }
  /** Sum of min(capped demand, level) over the subscribers with a sample, scaled to all of them. */
  private fold(level: number): number {
    const cap = Math.min(level, this.demandCap());
    let d = 0;
    let sampled = 0;
    for (const s of this.subs.values()) {
      if (s.reports === 0) continue;
      d += Math.min(s.demand, cap);
      sampled++;
    }
    return sampled === 0 ? 0 : (d * this.subs.size) / sampled;
  }
  /** Whether any subscriber has a demand sample. */
  sampled(): boolean {
    for (const s of this.subs.values()) if (s.reports > 0) return true;
    return false;
  }
}

let nextStreamId = 1;

export class QuotaStream {
  readonly id = nextStreamId++;
  domain: string | undefined;
  readonly buckets = new Map<string, Bucket>();
  /** The Envoy's reporting interval as seen in its reports (time_elapsed), until then the setting. */
  intervalMs: number;
  reports = 0;
  responses = 0;
  /** When the stream last sent a report (or opened). */
  lastReportMs: number;
  /** UTF-8 bytes of the ids of the buckets it subscribes to (Bucket.bytes). */
  bucketBytes = 0;
  /**
   * Actions held back while the client has not taken the last response (its queuedBytes > 0), the latest
   * per bucket; sent as one response once the queue is empty.
   */
  pending: Map<string, WireBucketAction> | undefined;
  /** While actions are held back: since when the queue has not shrunk, and its size then. */
  stalledSinceMs = 0;
  stalledBytes = 0;
  constructor(
    readonly out: QuotaStreamOut,
    defaultIntervalMs: number,
    nowMs: number,
  ) {
    this.intervalMs = defaultIntervalMs;
    this.lastReportMs = nowMs;
  }
}
