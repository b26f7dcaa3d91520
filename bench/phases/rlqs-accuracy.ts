// Phase `rlqs-accuracy` (standalone): how close a fleet of simulated Envoys stays to a rule's budget.
// Envoys running the rate_limit_quota filter emulation (harness/rlqs/envoy.ts) against our service's
// quota server, against the static "full quota to each Envoy" baseline, and Envoys calling ShouldRateLimit
// per request (the exact baseline), for fleet sizes × demand scenarios × pods (service processes on one
// Redis, the Envoys spread over them). Per run: fleet admissions ÷ budget per 1 s window (median and
// worst of the steady windows) and, after a shift of demand, the reporting intervals until every window
// is back within 10 %. The table goes to <out>/rlqs-accuracy.md (docs/rlqs-accuracy.md has the current one).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { makeTempDir, removeTempDir } from '../../harness/net.js';
import { startRedis } from '../../harness/redis/index.js';
import {
  ACCURACY_BUCKET,
  ACCURACY_DOMAIN,
  accuracyFilterConfig,
  accuracyServiceConfig,
  decodeFilter,
  exactFleet,
  median,
  probeRlqs,
  rlqsEnv,
  rlqsFleet,
  runFleet,
  SCENARIOS,
  startPods,
  StaticQuotaServer,
  worst,
  type FleetClient,
  type FleetRunResult,
  type Scenario,
} from '../../harness/rlqs/index.js';
import type { Phase, PhaseContext } from './phase.js';

/** The rule's budget (requests/s) and the fleet's demand (1.5 × the budget, always over it). */
export const RLQS_BUDGET = 500;
export const RLQS_DEMAND_FACTOR = 1.5;
export const RLQS_INTERVAL_MS = 1000;
const WARMUP_WINDOWS = 2;
const STEADY_WINDOWS = 4;
const AFTER_SHIFT_WINDOWS = 5;
const SERVERS = ['ours (RLQS)', 'static full quota', 'exact ShouldRateLimit'] as const;
/** `--rlqs-divergences`: our server again with simulated Envoys that diverge from Envoy (envoy.ts), to
 *  measure what each Envoy behaviour costs. */
const DIVERGENT = {
  'ours, Envoy keeping tokens on a change': { carryTokens: true },
  'ours, Envoy keeping tokens and reading fractional fill intervals': {
    carryTokens: true,
    exactFillInterval: true,
  },
} as const;
type ServerName = (typeof SERVERS)[number] | keyof typeof DIVERGENT;

export interface RlqsAccuracyRow {
  pods: number;
  n: number;
  scenario: Scenario;
  server: ServerName;
  steadyMedian: number;
  steadyWorst: number;
  convergeIntervals: number | null | undefined;
  failed: number;
  /** Lowest requests sent ÷ the fleet's demand over the steady windows (below 1: the load generator fell behind). */
  delivered: number;
  admitted: number[];
}

export interface RlqsAccuracyResult {
  budget: number;
  demandFactor: number;
  reportingIntervalMs: number;
  rows: RlqsAccuracyRow[];
  /** Why "ours" was not measured, when it was not. */
  oursMissing?: string;
}

const pct = (x: number) => (Number.isNaN(x) ? '–' : `${(x * 100).toFixed(1)} %`);

/** The markdown table of a result. */
export function rlqsAccuracyTable(r: RlqsAccuracyResult): string {
  const lines = [
    '| pods | Envoys | demand | server | admitted ÷ budget, median window | worst window | after the shift: reporting intervals until within 10 % | load delivered (lowest window) |',
    '|---|---|---|---|---|---|---|---|',
  ];
  for (const x of r.rows) {
    const conv =
      x.scenario !== 'shifting'
        ? ''
        : x.convergeIntervals === null
          ? 'not within the run'
          : String(x.convergeIntervals);
    const failed = x.failed ? ` (${x.failed} calls failed open)` : '';
    lines.push(
      `| ${x.pods} | ${x.n} | ${x.scenario} | ${x.server} | ${pct(x.steadyMedian)}${failed} | ${pct(x.steadyWorst)} | ${conv} | ${pct(x.delivered)} |`,
    );
  }
  return lines.join('\n');
}

async function measure(ctx: PhaseContext): Promise<RlqsAccuracyResult> {
  const { o, log } = ctx;
  const result: RlqsAccuracyResult = {
    budget: RLQS_BUDGET,
    demandFactor: RLQS_DEMAND_FACTOR,
    reportingIntervalMs: RLQS_INTERVAL_MS,
    rows: [],
  };
  const filter = decodeFilter(accuracyFilterConfig(RLQS_INTERVAL_MS));
  const redis = await startRedis({ args: ['--save', '', '--appendonly', 'no'] });
  const flush = redis.client();
  const root = makeTempDir('bench-rlqs');
  try {
    for (const p of o.rlqs.pods) {
      const pods = await startPods({
        count: p,
        redisUrl: redis.url,
        configYaml: accuracyServiceConfig(RLQS_BUDGET),
        root: join(root, `pods-${p}`),
        env: rlqsEnv(p, RLQS_INTERVAL_MS),
      });
      const statics = Array.from(
        { length: p },
        () => new StaticQuotaServer({ budgetPerSecond: () => RLQS_BUDGET }),
      );
      try {
        for (const s of statics) await s.start();
        const probe = await probeRlqs(pods.targets[0]);
        const oursOk = probe === 'answers';
        if (!oursOk) {
          result.oursMissing = `the service did not answer a usage report (${probe})`;
          log(`rlqs-accuracy: ours not measured: ${result.oursMissing}`);
        }
        for (const n of o.rlqs.fleets)
          for (const scenario of SCENARIOS)
            for (const server of [
              ...SERVERS,
              ...(o.rlqs.divergences ? (Object.keys(DIVERGENT) as (keyof typeof DIVERGENT)[]) : []),
            ]) {
              if (server.startsWith('ours') && !oursOk) continue;
              await flush.flushall();
              let clients: FleetClient[];
              if (server === 'ours (RLQS)') clients = rlqsFleet(filter, n, pods.targets).clients;
              else if (server in DIVERGENT)
                clients = rlqsFleet(
                  filter,
                  n,
                  pods.targets,
                  {},
                  DIVERGENT[server as keyof typeof DIVERGENT],
                ).clients;
              else if (server === 'static full quota')
                clients = rlqsFleet(
                  filter,
                  n,
                  statics.map((s) => s.target),
                ).clients;
              else clients = await exactFleet(n, pods.grpcPorts, ACCURACY_DOMAIN, [ACCURACY_BUCKET]);
              let r: FleetRunResult;
              try {
                r = await runFleet(clients, {
                  scenario,
                  budget: RLQS_BUDGET,
                  demandFactor: RLQS_DEMAND_FACTOR,
                  reportingIntervalMs: RLQS_INTERVAL_MS,
                  warmupWindows: WARMUP_WINDOWS,
                  steadyWindows: STEADY_WINDOWS,
                  afterShiftWindows: AFTER_SHIFT_WINDOWS,
                });
              } finally {
                for (const c of clients) c.close();
              }
              const row: RlqsAccuracyRow = {
                pods: p,
                n,
                scenario,
                server,
                steadyMedian: median(r.steadyRatios),
                steadyWorst: worst(r.steadyRatios),
                convergeIntervals: r.convergeIntervals,
                failed: r.failed,
                delivered: Math.min(
                  ...r.sent
                    .slice(WARMUP_WINDOWS, WARMUP_WINDOWS + STEADY_WINDOWS)
                    .map((x) => x / (RLQS_BUDGET * RLQS_DEMAND_FACTOR)),
                ),
                admitted: r.admitted,
              };
              result.rows.push(row);
              log(
                `rlqs-accuracy: ${p} pod(s) ${n} Envoys ${scenario} ${server}: median ${pct(row.steadyMedian)} worst ${pct(row.steadyWorst)}` +
                  (scenario === 'shifting' ? ` converge ${row.convergeIntervals}` : ''),
              );
            }
      } finally {
        for (const s of statics) await s.stop();
        await pods.stop();
      }
    }
  } finally {
    flush.disconnect();
    await redis.stop();
    removeTempDir(root);
  }
  return result;
}

export const rlqsAccuracyPhase: Phase = {
  name: 'rlqs-accuracy',
  needs: 'standalone',
  run: async (ctx) => {
    try {
      const r = await measure(ctx);
      ctx.results.extra['rlqs-accuracy'] = r;
      const md = [
        `Budget ${r.budget} requests/s, fleet demand ${r.demandFactor} × the budget, reporting interval ${r.reportingIntervalMs / 1000} s, 1 s windows.`,
        r.oursMissing ? `\nOurs not measured: ${r.oursMissing}.` : '',
        '',
        rlqsAccuracyTable(r),
        '',
      ].join('\n');
      writeFileSync(join(ctx.o.outDir, 'rlqs-accuracy.md'), md);
      ctx.log(`rlqs-accuracy table written to ${join(ctx.o.outDir, 'rlqs-accuracy.md')}`);
    } catch (err) {
      ctx.log(`rlqs-accuracy failed: ${(err as Error).message}`);
    }
  },
};
