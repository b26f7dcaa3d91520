// The shape of results.json: every sample of a run, the per-phase records and the figures of the table.
import type { Sample } from '../harness/measure.js';
import type { Figure } from './table.js';

/** The xDS fan-out phase's record (phases/xds-fanout-process.ts writes it as one JSON line). */
export interface XdsResult {
  clients: number;
  descriptors: number;
  /** Per change: ms until the k-th client ACKed, for k in `milestones`. */
  changes: { ms: Record<string, number> }[];
  milestones: number[];
}

export interface CheckResult {
  requests: number;
  identical: boolean | undefined;
  mismatches: { index: number; ours: unknown; reference: unknown }[];
  oursOverLimit: number;
}

export interface BenchResults {
  meta: Record<string, unknown>;
  check?: CheckResult;
  samples: Sample[];
  p99Under5ms: Record<string, Record<string, number>>;
  rss: Record<
    string,
    { keys: number; beforeMiB: number; afterMiB: number; deltaMiB: number; bytesPerKey: number }
  >;
  reload: Record<
    string,
    {
      reloadMs: number[];
      maxLatencyUs: number[];
      p999Us: number[];
      stallMs?: number[];
      idleStallMs?: number[];
    }
  >;
  json: Record<string, { requestsPerSecond: number[]; cpuUsPerRequest: number[] }>;
  h2load: Record<string, { callsPerSecond: number; loadgenCallsPerSecond: number }>;
  xds?: XdsResult;
  /** Records of phases added later, by phase name (a new phase needs no new field here). */
  extra: Record<string, unknown>;
  figures: Figure[];
}
