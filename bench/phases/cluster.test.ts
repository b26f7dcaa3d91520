// The benchmark's `cluster` phase on a real three-master Redis Cluster and the built service: one short
// round of the three-descriptor workload, saturated and at 1k/s. Checks what the figures rest on: the
// calls are answered without errors, the commands are counted on every master (the descriptors' keys are
// spread over the slots), and the report rows are computed. No speed is asserted.
import t from 'tap';
import { makeTempDir, removeTempDir } from '../../harness/net.js';
import { loadgenDriver } from '../harness/drivers.js';
import { clusterFigures, runClusterPhase } from './cluster.js';

t.test('the cluster phase measures through gRPC on three masters', async (t) => {
  const tmp = makeTempDir('bench-cluster-test');
  t.teardown(() => removeTempDir(tmp));
  const r = await runClusterPhase({
    workloads: ['desc3'],
    rates: [1000],
    shapes: [{ label: '2x8', connections: 2, inFlight: 8 }],
    drivers: [loadgenDriver],
    rounds: 1,
    durationMs: 1500,
    latencyRounds: 1,
    latencyDurationMs: 1000,
    warmupMs: 300,
    warmupPassMs: 300,
    reference: false,
    oursNodeArgs: [],
    logDir: tmp,
    tmpDir: tmp,
    log: (m) => t.comment(m),
  });
  t.equal(r.masters, 3, 'three masters');
  t.equal(r.cells.length, 2, 'one saturated cell and one at 1k/s');
  for (const c of r.cells) {
    const s = c.samples.ours![0]!;
    t.ok(s.completed > 0, `${c.rate ?? 'saturation'}: decisions measured`);
    t.equal(s.errors, 0, `${c.rate ?? 'saturation'}: no errors (${s.firstError ?? ''})`);
    t.equal(s.ok, s.completed, 'every decision OK (the limits are never reached)');
  }
  // Three descriptors per call, each an INCRBY + EXPIRE: about 6 commands per decision, counted on the
  // masters (a window edge cuts calls in flight, so the bound is loose).
  const sat = r.cells.find((c) => c.rate === undefined)!.samples.ours![0]!;
  t.ok(
    sat.redisCommandsPerDecision > 4 && sat.redisCommandsPerDecision < 8,
    `commands per decision ${sat.redisCommandsPerDecision}`,
  );
  t.ok(sat.redisByCommand.incrby! > 2, 'INCRBY on the masters');
  t.ok(sat.redisCpuUsPerDecision > 0, 'Redis CPU summed over the masters');
  const rows = clusterFigures(r);
  t.ok(
    rows.some((f) => f.name.startsWith('decisions per core-second') && f.ours.n === 1),
    'the report has the decisions per core-second row',
  );
});
