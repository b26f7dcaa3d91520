// A fleet of simulated Envoys under a demand pattern, and the accuracy figures of what it admitted: the
// measurement behind the RLQS accuracy table (bench phase rlqs-accuracy) and its CI test. Each Envoy is a
// `FleetClient` (an RLQS filter emulation, or a per-request ShouldRateLimit caller); a ticker issues each
// Envoy's demand in requests/s (paced by elapsed time, so a late timer does not lower the load) and counts
// admitted requests per wall-clock window, aligned to whole seconds like the service's fixed windows.
import * as grpc from '@grpc/grpc-js';
import { LOOPBACK } from '../net.js';
import { RlsClient, request } from '../system.js';
import { RlqsEnvoyEmulator, type EnvoyEmulatorOptions } from './envoy.js';
import type { Json } from '../envoy-actions.js';
import {
  envoyProtos,
  RLQS_FILTER,
  rlqsServiceDefinition,
  type QuotaResponse,
  type UsageReports,
} from './wire.js';

/** One simulated Envoy: `send` issues one request and says whether it was admitted. */
export interface FleetClient {
  send(): boolean | Promise<boolean>;
  close(): void;
}

export type Scenario = 'steady' | 'skewed' | 'shifting';
export const SCENARIOS: readonly Scenario[] = ['steady', 'skewed', 'shifting'];

export interface FleetRunOptions {
  scenario: Scenario;
  /** The rule's budget, requests per second for the whole fleet. */
  budget: number;
  /** Total demand ÷ budget (default 1.5: the fleet always wants more than the budget). */
  demandFactor?: number;
  /** Measurement window (default 1000 ms: the budget's unit). */
  windowMs?: number;
  /** First windows not counted in the steady figure (the fleet subscribing). Default 3. */
  warmupWindows?: number;
  /** Windows of the steady figure (before the shift for `shifting`). Default 5. */
  steadyWindows?: number;
  /** `shifting`: windows measured after the shift. Default 6. */
  afterShiftWindows?: number;
  /** Convergence: a window is "back" when its admissions are within this fraction of the budget. */
  tolerance?: number;
  /** The reporting interval the convergence time is counted in (ms). */
  reportingIntervalMs: number;
}

export interface FleetRunResult {
  scenario: Scenario;
  n: number;
  budget: number;
  /** Admitted requests per window, from the first window. */
  admitted: number[];
  /** Requests sent per window. */
  sent: number[];
  /** Admitted ÷ budget of the steady windows (after warm-up, before any shift). */
  steadyRatios: number[];
  /** Admitted ÷ budget of the windows after the shift (`shifting` only). */
  afterShiftRatios: number[];
  /** Reporting intervals from the shift to the first window from which every window is within
   *  `tolerance`; null when the run ended before that (`shifting` only). */
  convergeIntervals: number | null | undefined;
  /** Requests whose call failed (counted as admitted: Envoy's failure mode allow). */
  failed: number;
}

/** Demand of Envoy `i` of `n` (requests/s) in the scenario; `shifted` after the shift. */
export function demandOf(
  scenario: Scenario,
  i: number,
  n: number,
  total: number,
  budget: number,
  shifted: boolean,
): number {
  switch (scenario) {
    case 'steady':
      return total / n;
    case 'skewed':
      // One hot Envoy wanting the whole budget alone, the others sharing the rest of the demand.
      return i === 0 ? budget : (total - budget) / (n - 1);
    case 'shifting': {
      // All the demand on the first half of the fleet, then all of it on the other half.
      const half = Math.max(1, Math.floor(n / 2));
      const first = i < half;
      if (!shifted) return first ? total / half : 0;
      return first ? 0 : total / (n - half);
    }
  }
}

const TICK_MS = 10;

/** Runs the fleet through the scenario and returns what it admitted per window. */
export async function runFleet(clients: FleetClient[], o: FleetRunOptions): Promise<FleetRunResult> {
  const n = clients.length;
  const windowMs = o.windowMs ?? 1000;
  const warmup = o.warmupWindows ?? 3;
  const steady = o.steadyWindows ?? 5;
  const after = o.scenario === 'shifting' ? (o.afterShiftWindows ?? 6) : 0;
  const total = warmup + steady + after;
  const shiftAt = warmup + steady;
  const totalDemand = o.budget * (o.demandFactor ?? 1.5);
  const admitted = new Array<number>(total).fill(0);
  const sent = new Array<number>(total).fill(0);
  const acc = new Array<number>(n).fill(0);
  let failed = 0;
  const pending = new Set<Promise<void>>();

  // Start on a whole second, as the service's fixed windows do.
  const t0 = Math.ceil((Date.now() + 50) / 1000) * 1000;
  await new Promise((r) => setTimeout(r, t0 - Date.now()));
  const countAt = (t: number) => {
    const w = Math.floor((t - t0) / windowMs);
    if (w < total) admitted[w]++;
  };
  let last = Date.now();
  await new Promise<void>((done) => {
    const tick = () => {
      const now = Date.now();
      const w = Math.floor((now - t0) / windowMs);
      if (w >= total) {
        done();
        return;
      }
      const dt = (now - last) / 1000;
      last = now;
      const shifted = w >= shiftAt;
      for (let i = 0; i < n; i++) {
        acc[i] += demandOf(o.scenario, i, n, totalDemand, o.budget, shifted) * dt;
        while (acc[i] >= 1) {
          acc[i] -= 1;
          sent[w]++;
          const r = clients[i].send();
          if (typeof r === 'boolean') {
            if (r) admitted[w]++;
          } else {
            // Counted in the window the answer arrives in: the service decided it then or just before
            // (a call queued behind others is decided late, in the service's next window).
            const p = r.then(
              (ok) => {
                if (ok) countAt(Date.now());
              },
              () => {
                failed++;
                countAt(Date.now());
              },
            );
            pending.add(p);
            void p.finally(() => pending.delete(p));
          }
        }
      }
      setTimeout(tick, TICK_MS);
    };
    tick();
  });
  await Promise.all(pending);

  const ratios = admitted.map((a) => a / ((o.budget * windowMs) / 1000));
  const result: FleetRunResult = {
    scenario: o.scenario,
    n,
    budget: o.budget,
    admitted,
    sent,
    steadyRatios: ratios.slice(warmup, shiftAt),
    afterShiftRatios: ratios.slice(shiftAt),
    convergeIntervals: undefined,
    failed,
  };
  if (o.scenario === 'shifting') {
    const tol = o.tolerance ?? 0.1;
    let c = total; // first window from which every window is within tol
    while (c > shiftAt && Math.abs(ratios[c - 1] - 1) <= tol) c--;
    result.convergeIntervals = c === total ? null : ((c - shiftAt) * windowMs) / o.reportingIntervalMs;
  }
  return result;
}

/** Median of a list (NaN when empty). */
export function median(xs: number[]): number {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** The value farthest from 1 (the worst window), NaN when empty. */
export function worst(xs: number[]): number {
  let w = NaN;
  for (const x of xs) if (Number.isNaN(w) || Math.abs(x - 1) > Math.abs(w - 1)) w = x;
  return w;
}

/** Envoys running the rate_limit_quota filter emulation, spread round-robin over `targets`; each sends
 *  requests with `headers`. */
export function rlqsFleet(
  filter: Json,
  n: number,
  targets: string[],
  headers: Record<string, string> = {},
  divergences?: EnvoyEmulatorOptions['divergences'],
): { clients: FleetClient[]; emulators: RlqsEnvoyEmulator[] } {
  const emulators = Array.from(
    { length: n },
    (_, i) => new RlqsEnvoyEmulator(filter, { target: targets[i % targets.length], divergences }),
  );
  const clients = emulators.map((em) => ({
    send: () => em.decide(headers).allowed,
    close: () => em.close(),
  }));
  return { clients, emulators };
}

/** Envoys calling ShouldRateLimit once per request (the exact baseline), spread over `grpcPorts`. */
export async function exactFleet(
  n: number,
  grpcPorts: number[],
  domain: string,
  entries: [string, string][],
): Promise<FleetClient[]> {
  const req = request(domain, ...entries);
  const clients = Array.from(
    { length: n },
    (_, i) => new RlsClient(`${LOOPBACK}:${grpcPorts[i % grpcPorts.length]}`),
  );
  await Promise.all(clients.map((c) => c.connect()));
  return clients.map((c) => ({
    send: () => c.call(req, 2000).then((res) => res.overallCode !== 'OVER_LIMIT'),
    close: () => c.close(),
  }));
}

/** The domain, bucket and rule of the accuracy measurement. */
export const ACCURACY_DOMAIN = 'rlqs-accuracy';
export const ACCURACY_BUCKET: [string, string] = ['name', 'api'];

/**
 * The service config of the measurement: one rule of `budget` requests per second. The quota server is
 * expected to find a bucket's rule as ShouldRateLimit finds a descriptor's: the bucket id's entries as
 * descriptor entries (bucket {name: api} → descriptor name=api).
 */
export function accuracyServiceConfig(budget: number): string {
  return [
    `domain: ${ACCURACY_DOMAIN}`,
    'descriptors:',
    `  - key: ${ACCURACY_BUCKET[0]}`,
    `    value: ${ACCURACY_BUCKET[1]}`,
    `    rate_limit: { unit: second, requests_per_unit: ${budget} }`,
    '',
  ].join('\n');
}

/**
 * The rate_limit_quota filter config of the measurement, before decoding: every request in the bucket
 * {name: api}, reported every `reportingIntervalMs`, Envoy's defaults otherwise (allow all before the
 * first assignment), the last assignment kept for 10 s when it expires.
 */
export function accuracyFilterConfig(reportingIntervalMs: number): Json {
  return {
    domain: ACCURACY_DOMAIN,
    rlqs_server: { envoy_grpc: { cluster_name: 'ratelimit' } },
    bucket_matchers: {
      on_no_match: {
        action: {
          name: 'api',
          typed_config: {
            '@type':
              'type.googleapis.com/envoy.extensions.filters.http.rate_limit_quota.v3.RateLimitQuotaBucketSettings',
            bucket_id_builder: {
              bucket_id_builder: { [ACCURACY_BUCKET[0]]: { string_value: ACCURACY_BUCKET[1] } },
            },
            reporting_interval: `${reportingIntervalMs / 1000}s`,
            expired_assignment_behavior: {
              expired_assignment_behavior_timeout: '10s',
              reuse_last_assignment: {},
            },
          },
        },
      },
    },
  };
}

/** A filter config decoded strictly with Envoy's protos (throws on any error), as the emulator takes it. */
export function decodeFilter(raw: Json): Json {
  const r = envoyProtos().decode(RLQS_FILTER, raw);
  if (r.errors.length) throw new Error(`rate_limit_quota filter config: ${r.errors.join('; ')}`);
  return r.value;
}

/**
 * Whether `target` serves StreamRateLimitQuotas: one report for the measurement's bucket, then the
 * first answer ('answers'), the stream's error code, or 'silent' after `deadlineMs`.
 */
export function probeRlqs(target: string, deadlineMs = 10_000): Promise<'answers' | 'silent' | number> {
  const Ctor = grpc.makeGenericClientConstructor(rlqsServiceDefinition(), 'RateLimitQuotaService');
  const client = new Ctor(target, grpc.credentials.createInsecure());
  return new Promise((resolve) => {
    const c = client as unknown as {
      StreamRateLimitQuotas(o: grpc.CallOptions): grpc.ClientDuplexStream<UsageReports, QuotaResponse>;
    };
    const s = c.StreamRateLimitQuotas({ deadline: Date.now() + deadlineMs });
    const finish = (v: 'answers' | 'silent' | number) => {
      s.removeAllListeners();
      s.on('error', () => undefined);
      s.cancel();
      client.close();
      resolve(v);
    };
    s.on('data', () => finish('answers'));
    s.on('error', (e: grpc.ServiceError) =>
      finish(e.code === grpc.status.DEADLINE_EXCEEDED ? 'silent' : (e.code ?? grpc.status.UNKNOWN)),
    );
    s.on('end', () => finish('silent'));
    s.write({
      domain: ACCURACY_DOMAIN,
      bucket_quota_usages: [
        {
          bucket_id: { bucket: { [ACCURACY_BUCKET[0]]: ACCURACY_BUCKET[1] } },
          time_elapsed: { seconds: 1 },
          num_requests_allowed: 1,
          num_requests_denied: 0,
        },
      ],
    });
  });
}

/** The service settings that turn its quota server on for `pods` pods and Envoys reporting every `intervalMs`. */
export function rlqsEnv(pods: number, intervalMs: number): Record<string, string> {
  return {
    RLQS_ENABLED: 'true',
    RLQS_REPORTING_INTERVAL: `${intervalMs}ms`,
    RLQS_EXPECTED_PODS: String(pods),
  };
}
