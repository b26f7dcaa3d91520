// The harness' options and their command-line form (`npm run bench -- --quick --workloads=hot ...`).
// Every option is documented in bench/README.md.
import { join } from 'node:path';
import { DEFAULT_SHAPES, DRIVER_NAMES, parseShapes, type DriverName, type Shape } from './harness/drivers.js';
import { REPO_ROOT } from './harness/services.js';
import { WORKLOADS, type WorkloadName } from './load/workloads.js';

export interface BenchOptions {
  quick: boolean;
  reference: boolean;
  workloads: WorkloadName[];
  rounds: number;
  durationMs: number;
  warmupMs: number;
  /** Fixed open-loop rates for the latency figures. */
  rates: number[];
  latencyRounds: number;
  latencyDurationMs: number;
  /** Unrecorded load per service and workload before the first round (JIT warm-up). */
  warmupPassMs: number;
  latencyWorkloads: WorkloadName[];
  /** config-memory: descriptor counts of the generated configs (`--config-sizes=1,1000,10000,100000`), and
   *  the services started per count (`--config-memory-rounds`). */
  configSizes: number[];
  configMemoryRounds: number;
  /** Distinct keys sent for the RSS figure. */
  rssKeys: number;
  reloads: number;
  xdsClients: number;
  xdsChanges: number;
  /** xds-compare: pod counts and domain counts (every pair), rounds per server, pushes per round, descriptors per domain. */
  xdsPods: string;
  xdsDomains: string;
  xdsRounds: number;
  xdsPushes: number;
  xdsDescriptors: number;
  /**
   * Another build of this repository (a directory holding its bin/ and dist/): the `cluster` and
   * `xds-compare` phases measure it as one more arm, `ours-base`, interleaved with ours (`--base=DIR`).
   */
  base: string | undefined;
  /** xds-compare: the arms to measure (default every one available). */
  xdsArms: string[] | undefined;
  /** Load shapes of the saturation and latency phases (`--shapes=2x50,64x2`). */
  shapes: Shape[];
  /** Load drivers of the saturation and latency phases, interleaved in the same rounds (`--drivers=`). */
  drivers: DriverName[];
  /** Whole runs (`--runs=N`): figures are the median of the per-run medians, min–max of the runs. */
  runs: number;
  /** Phases to run (all by default). */
  phases: Set<string>;
  outDir: string;
  /** Write a V8 CPU profile of our service to outDir (--profile). */
  profile: boolean;
  /** Run our service with --trace-gc: its GC pauses join the latency phase's tail attribution. */
  traceGc: boolean;
  /**
   * Our service's in-process probe during the latency rounds (`--latency-probe=off` pauses it): it gives
   * the loop lateness, garbage per decision and GC pause columns and the tail attribution, and costs our
   * service a 1 ms timer the reference does not carry.
   */
  latencyProbe: boolean;
  /** Extra node/V8 flags for our service (`--ours-node-flags="--max-semi-space-size=4"`), e.g. GC settings. */
  oursNodeFlags: string[];
  /** Node binary that runs our service (--node), and the one the `nodes` phase compares it with. */
  node?: string;
  compareNode?: string;
  log: (msg: string) => void;
  /** RLQS accuracy phase: fleet sizes (`--rlqs-fleets=2,10,50`), pod counts (`--rlqs-pods=1,3`), and
   *  `--rlqs-divergences`: also our server with simulated Envoys diverging from Envoy on purpose. */
  rlqs: { fleets: number[]; pods: number[]; divergences: boolean };
  /** Token budget phase: concurrent streams per cell (`--budget-streams=10,100,1000`), the algorithms
   *  (`--budget-algorithms=fixed_window,sliding_window`) and measured 1 s windows per cell (`--budget-windows=`). */
  budget: { streams: number[]; algorithms: BudgetAlgorithm[]; windows: number };
}

/** The algorithms the `token-budget` phase can measure a budget on. */
export const BUDGET_ALGORITHMS = ['fixed_window', 'sliding_window'] as const;
export type BudgetAlgorithm = (typeof BUDGET_ALGORITHMS)[number];

function budgetAlgorithms(v: string[] | undefined): BudgetAlgorithm[] {
  if (!v) return [...BUDGET_ALGORITHMS];
  for (const a of v)
    if (!(BUDGET_ALGORITHMS as readonly string[]).includes(a))
      throw new Error(`--budget-algorithms: "${a}" is not one of ${BUDGET_ALGORITHMS.join(', ')}`);
  return v as BudgetAlgorithm[];
}

function parseLatencyProbe(v: string | undefined): boolean {
  if (v === undefined || v === 'on') return true;
  if (v === 'off') return false;
  throw new Error(`--latency-probe: "${v}" is not on or off`);
}

/** The value of `--name=value` in argv, if present. */
export function argValue(argv: string[], name: string): string | undefined {
  return argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
}

/**
 * The options of `argv`. `phaseNames` are the phases `--phases=` may name (run.ts passes its registry's
 * names, so this file does not import the phases, which import its BenchOptions type).
 */
export function parseArgs(argv: string[], phaseNames: readonly string[]): BenchOptions {
  const get = (name: string) => argValue(argv, name);
  const quick = argv.includes('--quick');
  const list = (v: string | undefined) => v?.split(',').filter(Boolean);
  const workloads = (list(get('workloads')) as WorkloadName[] | undefined) ?? [...WORKLOADS];
  for (const w of workloads) if (!WORKLOADS.includes(w)) throw new Error(`unknown workload ${w}`);
  const phases = list(get('phases')) ?? [...phaseNames];
  for (const p of phases) if (!phaseNames.includes(p)) throw new Error(`unknown phase ${p}`);
  const drivers = (list(get('drivers')) ?? [...DRIVER_NAMES]) as DriverName[];
  for (const d of drivers) if (!DRIVER_NAMES.includes(d)) throw new Error(`unknown driver ${d}`);
  const runs = Number(get('runs') ?? 1);
  if (!Number.isInteger(runs) || runs < 1 || runs > 50) throw new Error('--runs must be 1..50');
  const stamp = new Date().toISOString().replace(/[:.]/g, '-').slice(0, 19);
  return {
    quick,
    reference: !argv.includes('--no-reference'),
    workloads,
    rounds: Number(get('rounds') ?? (quick ? 2 : 3)),
    durationMs: Number(get('duration') ?? (quick ? 3 : 8)) * 1000,
    warmupMs: quick ? 1000 : 2000,
    rates: (list(get('rates')) ?? ['1000', '2000', '5000']).map(Number),
    latencyRounds: Number(get('latency-rounds') ?? (quick ? 1 : 2)),
    latencyDurationMs: Number(get('latency-duration') ?? (quick ? 3 : 5)) * 1000,
    warmupPassMs: quick ? 1000 : 3000,
    latencyWorkloads: (list(get('latency-workloads')) as WorkloadName[] | undefined) ?? ['hot', 'uniform'],
    configSizes: (
      list(get('config-sizes')) ?? (quick ? ['1', '1000', '10000'] : ['1', '1000', '10000', '100000'])
    ).map(Number),
    configMemoryRounds: Number(get('config-memory-rounds') ?? (quick ? 1 : 2)),
    rssKeys: Number(get('rss-keys') ?? (quick ? 50_000 : 1_000_000)),
    reloads: Number(get('reloads') ?? (quick ? 2 : 3)),
    xdsClients: Number(get('xds-clients') ?? 500),
    xdsChanges: Number(get('xds-changes') ?? (quick ? 2 : 5)),
    xdsPods: get('xds-pods') ?? (quick ? '100' : '100,1000'),
    xdsDomains: get('xds-domains') ?? '10,1000',
    xdsRounds: Number(get('xds-rounds') ?? (quick ? 1 : 2)),
    xdsPushes: Number(get('xds-pushes') ?? (quick ? 3 : 5)),
    xdsDescriptors: Number(get('xds-descriptors') ?? 10),
    base: get('base'),
    xdsArms: list(get('xds-arms')),
    shapes: parseShapes(get('shapes') ?? DEFAULT_SHAPES),
    drivers,
    runs,
    phases: new Set(phases),
    outDir: get('out') ?? join(REPO_ROOT, 'bench-results', stamp),
    profile: argv.includes('--profile'),
    traceGc: argv.includes('--trace-gc'),
    latencyProbe: parseLatencyProbe(get('latency-probe')),
    oursNodeFlags: (get('ours-node-flags') ?? '').split(' ').filter(Boolean),
    node: get('node'),
    compareNode: get('compare-node'),
    log: (m) => process.stderr.write(`[bench] ${m}\n`),
    rlqs: {
      fleets: (list(get('rlqs-fleets')) ?? (quick ? ['2', '10'] : ['2', '10', '50'])).map(Number),
      pods: (list(get('rlqs-pods')) ?? (quick ? ['1'] : ['1', '3'])).map(Number),
      divergences: argv.includes('--rlqs-divergences'),
    },
    budget: {
      streams: (list(get('budget-streams')) ?? ['10', '100', '1000']).map(Number),
      algorithms: budgetAlgorithms(list(get('budget-algorithms'))),
      windows: Number(get('budget-windows') ?? (quick ? 3 : 5)),
    },
  };
}
