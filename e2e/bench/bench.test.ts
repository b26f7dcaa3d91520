// Smoke test of the benchmark harness: quick mode, one workload, a few seconds of load. Checks that the
// result file is written with sane figures and that our decisions equal the reference's (when it is built).
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { makeTempDir, removeTempDir } from '../harness/net.js';
import { parseArgs, runBench, type BenchResults } from './run.js';
import { referenceAvailable } from './services.js';

t.test('quick bench on the hot-key workload writes results, chart and report', async (t) => {
  const out = makeTempDir('bench-test');
  t.teardown(() => removeTempDir(out));
  const o = parseArgs([
    '--quick',
    '--workloads=hot',
    '--rounds=1',
    '--duration=2',
    '--phases=check,throughput',
  ]);
  o.outDir = out;
  o.warmupMs = 500;
  o.warmupPassMs = 500;
  o.log = (m) => t.comment(m);
  await runBench(o);

  const r = JSON.parse(readFileSync(join(out, 'results.json'), 'utf8')) as BenchResults;
  t.ok(existsSync(join(out, 'chart.svg')), 'chart written');
  t.match(readFileSync(join(out, 'report.md'), 'utf8'), /decisions per core-second/);
  const ours = r.samples.filter((s) => s.service === 'ours' && s.workload === 'hot');
  t.equal(ours.length, 1, 'one round of ours');
  t.ok(ours[0].completed > 0, 'decisions > 0');
  t.equal(ours[0].errors, 0, 'no errors');
  t.equal(ours[0].ok, ours[0].completed, 'every hot-key decision is OK');
  t.ok(ours[0].redisCommandsPerDecision > 0, 'Redis commands counted');
  t.ok(ours[0].serviceCpuSec > 0, 'service CPU sampled');
  t.ok(r.check && r.check.oursOverLimit > 0, 'the decision check reaches over-limit answers');
  if (referenceAvailable()) {
    t.equal(
      r.check?.identical,
      true,
      `identical decisions: ${JSON.stringify(r.check?.mismatches.slice(0, 3))}`,
    );
    t.ok(
      r.samples.some((s) => s.service === 'reference' && s.completed > 0),
      'reference measured',
    );
  } else {
    t.equal(r.check?.identical, undefined, 'no reference: nothing to compare');
  }
});
