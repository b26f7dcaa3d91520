// Smoke test of the benchmark harness: quick mode, one workload, a few seconds of load with two load shapes
// and, when its binary is built, the independent Go driver beside ours. Checks that the result files are
// written with sane figures per shape and driver, and that our decisions equal the reference's (when it is
// built). Plus the pure parts: shape parsing and the combination of several runs.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { makeTempDir, removeTempDir } from '../harness/net.js';
import { goDriverPath, parseShapes } from './harness/drivers.js';
import { stat } from './harness/measure.js';
import type { Figure } from './report/table.js';
import { ALL_PHASES, helpText, parseArgs, runBench, type BenchResults } from './run.js';
import { referenceAvailable } from './harness/services.js';
import { combineRuns, summaryTable } from './report/summary.js';

// The Go driver is used only when already built (`npm run bench` builds it): the test never compiles Go.
const goBuilt = existsSync(goDriverPath());

t.test(
  'quick bench on the hot-key workload writes results, chart, report and summary per shape',
  async (t) => {
    const out = makeTempDir('bench-test');
    t.teardown(() => removeTempDir(out));
    const o = parseArgs([
      '--quick',
      '--workloads=hot',
      '--rounds=1',
      '--duration=1',
      '--phases=check,throughput,latency',
      '--latency-workloads=hot',
      '--rates=500',
      '--latency-rounds=1',
      '--latency-duration=1',
      '--shapes=2x8,8x1',
      `--drivers=${goBuilt ? 'loadgen,go' : 'loadgen'}`,
    ]);
    o.outDir = out;
    o.warmupMs = 300;
    o.warmupPassMs = 500;
    const logs: string[] = [];
    o.log = (m) => {
      logs.push(m);
      t.comment(m);
    };
    await runBench(o);

    const r = JSON.parse(readFileSync(join(out, 'results.json'), 'utf8')) as BenchResults;
    t.ok(existsSync(join(out, 'chart.svg')), 'chart written');
    t.match(
      readFileSync(join(out, 'report.md'), 'utf8'),
      /decisions per core-second at saturation \[2x8, loadgen\]/,
    );
    const summary = readFileSync(join(out, 'summary.md'), 'utf8');
    const drivers = goBuilt ? ['loadgen', 'go'] : ['loadgen'];
    for (const shape of ['2x8', '8x1'])
      for (const driver of drivers) {
        const ours = r.samples.filter(
          (s) =>
            s.service === 'ours' &&
            s.workload === 'hot' &&
            s.shape === shape &&
            s.driver === driver &&
            s.mode === 'closed',
        );
        t.equal(ours.length, 1, `one round of ours with ${shape} and ${driver}`);
        t.ok(ours[0].completed > 0, `decisions > 0 (${shape}, ${driver})`);
        t.equal(ours[0].errors, 0, `no errors (${shape}, ${driver}): ${ours[0].firstError ?? ''}`);
        t.equal(ours[0].ok, ours[0].completed, `every hot-key decision is OK (${shape}, ${driver})`);
        t.ok(ours[0].redisCommandsPerDecision > 0, 'Redis commands counted');
        t.ok(ours[0].serviceCpuSec > 0, 'service CPU sampled');
        t.match(summary, new RegExp(`\\| one hot key \\| ${shape} \\| ${driver} \\| [0-9]`), 'summary row');
      }
    // The open-loop rounds: our driver reports its own event-loop lateness, which the tails table shows
    // and puts a p99.9 down to when it is as long (tails.ts).
    const open = r.samples.filter((s) => s.mode === 'open' && s.driver === 'loadgen');
    t.ok(open.length >= 2, 'open-loop rounds of our driver');
    for (const s of open)
      t.ok(
        typeof s.driverLoopMaxMs === 'number' && s.driverLoopMaxMs >= 0,
        `the driver's own lateness is reported (${s.service} ${s.shape}): ${s.driverLoopMaxMs}`,
      );
    t.match(readFileSync(join(out, 'tails.md'), 'utf8'), /driver's event loop max ms/);
    // Every open-loop round is also timed from each call's actual send: the same calls, so no quantile
    // is above the one counted from the intended start.
    for (const s of r.samples.filter((x) => x.mode === 'open')) {
      t.ok(s.sentLatency, `latency from send reported (${s.service} ${s.shape} ${s.driver})`);
      t.ok(s.sentLatency!.p50Us <= s.latency.p50Us && s.sentLatency!.p99Us <= s.latency.p99Us);
    }
    t.match(readFileSync(join(out, 'report.md'), 'utf8'), /p99 from send at 500\/s/);
    t.equal(logs.filter((m) => m === 'warm-up pass done').length, 2, 'throughput and latency warm up first');
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
  },
);

t.test('--latency-probe is on unless off; another value names the option', async (t) => {
  t.equal(parseArgs([]).latencyProbe, true);
  t.equal(parseArgs(['--latency-probe=off']).latencyProbe, false);
  t.throws(() => parseArgs(['--latency-probe=no']), /--latency-probe: "no"/);
});

t.test('shapes parse as <connections>x<in flight>, bad ones name the option', async (t) => {
  t.same(parseShapes('2x50,64x2'), [
    { connections: 2, inFlight: 50, label: '2x50' },
    { connections: 64, inFlight: 2, label: '64x2' },
  ]);
  t.throws(() => parseShapes('2x'), /--shapes/);
  t.throws(() => parseShapes('0x5'), /--shapes/);
  t.throws(() => parseArgs(['--drivers=wrk']), /unknown driver wrk/);
  t.throws(() => parseArgs(['--runs=0']), /--runs/);
});

t.test('--help lists every phase; --phases= accepts exactly the registry names', async (t) => {
  const help = helpText();
  t.ok(ALL_PHASES.length > 0, 'the registry has phases');
  for (const p of ALL_PHASES) t.match(help, new RegExp(`[ ,]${p}(,|\\n)`), `--help names ${p}`);
  t.same([...parseArgs([`--phases=${ALL_PHASES.join(',')}`]).phases], ALL_PHASES);
  t.throws(() => parseArgs(['--phases=check,nope']), /unknown phase nope/);
});

t.test('several runs combine into the median of the per-run medians with the runs spread', async (t) => {
  const fig = (ours: number[], ref: number[]): Figure => ({
    group: 'one hot key',
    name: 'decisions per core-second at saturation [2x50, loadgen]',
    unit: 'calls / CPU-s',
    better: 'higher',
    ours: stat(ours),
    reference: stat(ref),
    key: { workload: 'hot', metric: 'decisionsPerCoreSecond', shape: '2x50', driver: 'loadgen' },
    target: { text: '≥ 1.5x', met: undefined, rule: { ratioMin: 1.5 } },
  });
  const run = (f: Figure) => ({ figures: [f] }) as unknown as BenchResults;
  // Per-run medians: ours 100, 160, 130; reference 100, 100, 80. Ratios per run: 1.0, 1.6, 1.625.
  const [c] = combineRuns([
    run(fig([90, 100, 500], [100, 100, 100])),
    run(fig([160], [100])),
    run(fig([120, 140], [70, 90])),
  ]);
  t.same([c.ours.median, c.ours.min, c.ours.max, c.ours.n], [130, 100, 160, 3]);
  t.same([c.reference!.median, c.reference!.min, c.reference!.max], [100, 80, 100]);
  t.same([c.ratioRuns!.min, c.ratioRuns!.max], [1.0, 1.625]);
  t.equal(c.target?.met, false, '130/100 = 1.3x misses ≥ 1.5x although two runs met it');
  t.match(
    summaryTable([c]),
    /\| one hot key \| 2x50 \| loadgen \| 130 \(100–160\) \| 100 \(80\.0–100\) \| 1\.30x \(1\.00–1\.63\) ❌ \|/,
  );
});
