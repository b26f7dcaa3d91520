// The state the quota server keeps: per bucket its rule, budget, fleet view and subscribed streams; per
// stream its domain, its buckets and its reporting interval. Plain data; server.ts changes it.
import type { LimitMatch } from '../config/index.js';
import type { WireQuotaResponse, WireRateLimitStrategy } from '../../proto/index.js';
import type { Budget } from './allocator.js';
import { newFleetState, type FleetState } from './fleet.js';
import type { RuleMetrics } from './metrics.js';

/** The sending side of a stream, as the gRPC layer gives it. */
export interface QuotaStreamOut {
  send(msg: WireQuotaResponse): void;
  end(code: 'ok' | 'invalid' | 'exhausted' | 'unavailable', message?: string): void;
  readonly closed: boolean;
}

export interface Subscription {
  demand: number;
  reports: number;
  lastReportMs: number;
  /** Whole tokens per second last sent (-1: nothing sent yet), its strategy kind and the strategy. */
  sentTokens: number;
  sentKind: string;
  sent: WireRateLimitStrategy | undefined;
  /** When an assignment was last sent (a refresh included), and when the sent one last changed. */
  sentAtMs: number;
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
  constructor(
    readonly key: string,
    readonly domain: string,
    readonly bucket: Readonly<Record<string, string>>,
    readonly fleetKey: string,
  ) {}
  get subscribers(): number {
    return this.subs.size;
  }
  /** This pod's demand: its subscribers' demand, one without a sample yet counted as their average. */
  localDemand(): number {
    let d = 0;
    let sampled = 0;
    for (const s of this.subs.values()) {
      if (s.reports === 0) continue;
      d += s.demand;
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
  constructor(
    readonly out: QuotaStreamOut,
    defaultIntervalMs: number,
    nowMs: number,
  ) {
    this.intervalMs = defaultIntervalMs;
    this.lastReportMs = nowMs;
  }
}
