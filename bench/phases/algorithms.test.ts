// The benchmark's `algorithms` phase on a real Redis and the built service: one short round per variant.
// Checks what the figures rest on: every variant is counted by its own algorithm (the scripted ones with
// one EVALSHA per descriptor, the fixed window with INCRBY + EXPIRE), every call is answered OK, and the
// ratios and report rows are computed. No speed is asserted.
import t from 'tap';
import { makeTempDir, removeTempDir } from '../../harness/net.js';
import { algorithmFigures, runAlgorithmsPhase } from './algorithms.js';
import { BenchRedis } from '../harness/services.js';

t.test(
  'the algorithms phase measures four variants through gRPC with the right Redis commands',
  async (t) => {
    const tmp = makeTempDir('bench-algorithms-test');
    t.teardown(() => removeTempDir(tmp));
    const redis = await BenchRedis.start('1');
    t.teardown(() => redis.stop());
    const r = await runAlgorithmsPhase({
      redis,
      serviceCpus: '0',
      auxCpus: '1',
      logDir: tmp,
      tmpDir: tmp,
      localCacheBytes: 1 << 20,
      rounds: 1,
      durationMs: 1500,
      warmupMs: 300,
      warmupPassMs: 300,
      log: (m) => t.comment(m),
    });
    // Per-decision counts are read around the window while up to 64 calls are in flight at each edge: on
    // a loaded machine (a few hundred calls in 1.5 s) that is tens of per cent, so the bounds only tell
    // one script call (1) from INCRBY + EXPIRE (2) and the script's own commands (3-6) from none.
    for (const [name, v] of Object.entries(r.variants)) {
      const s = v.samples[0]!;
      t.ok(s.completed > 0, `${name}: decisions measured`);
      t.equal(s.errors, 0, `${name}: no errors`);
      t.equal(s.ok, s.completed, `${name}: every decision OK (the limits are never reached)`);
      if (name === 'fixed_window') {
        t.ok(s.redisByCommand.incrby! > 0.5 && !s.redisByCommand.evalsha, `${name}: INCRBY, no script`);
      } else {
        t.ok(Math.abs(v.commandsSentPerDescriptor.median - 1) < 0.5, `${name}: one EVALSHA per descriptor`);
        t.ok(v.commandsExecutedPerDescriptor.median > 1.5, `${name}: the script's own commands counted`);
        t.ok(v.ratioToFixedWindow.n === 1 && v.ratioToFixedWindow.median > 0, `${name}: ratio computed`);
      }
    }
    const rows = algorithmFigures(r);
    t.ok(
      rows.some((f) => f.name.startsWith('token_bucket: ÷ fixed_window') && f.target),
      'the report has the ratio row with its target',
    );
  },
);
