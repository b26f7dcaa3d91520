// Every benchmark phase, in the order a run executes them. A new phase is one module and one line here.
import { algorithmsPhase } from './algorithms.js';
import { checkPhase } from './check.js';
import { clusterPhase } from './cluster.js';
import { configMemoryPhase } from './config-memory.js';
import { h2loadPhase } from './h2load.js';
import { jsonPhase } from './json.js';
import { latencyPhase } from './latency.js';
import { nodesPhase } from './node-versions.js';
import { p99Phase } from './p99.js';
import type { Phase } from './phase.js';
export { AUX_CPUS, SERVICE_CPUS, type PhaseContext } from './phase.js';
import { reloadPhase } from './reload.js';
import { rlqsAccuracyPhase } from './rlqs-accuracy.js';
import { rssPhase } from './rss.js';
import { throughputPhase } from './throughput.js';
import { tokenBudgetPhase } from './token-budget.js';
import { xdsReloadPhase } from './xds-reload.js';
import { xdsPhase } from './xds.js';
import { xdsComparePhase } from './xds-compare.js';

export const PHASES: readonly Phase[] = [
  checkPhase,
  throughputPhase,
  p99Phase,
  latencyPhase,
  rssPhase,
  reloadPhase,
  jsonPhase,
  h2loadPhase,
  algorithmsPhase,
  nodesPhase,
  xdsPhase,
  xdsReloadPhase,
  xdsComparePhase,
  rlqsAccuracyPhase,
  clusterPhase,
  configMemoryPhase,
  tokenBudgetPhase,
];

export const PHASE_NAMES: string[] = PHASES.map((p) => p.name);
