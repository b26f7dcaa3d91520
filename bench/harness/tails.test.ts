// Tail attribution (tails.ts, loop-probe.ts): the idle probe processes write their slots (the last ones
// too, when stopped), a window picks the slots that overlap it, and a sample's p99.9 is put down to the
// machine, the service or neither by the rule the README states.
import t from 'tap';
import { makeTempDir, removeTempDir } from '../../harness/net.js';
import {
  parseProbe,
  probeTimeOrigin,
  readProbe,
  startJitterProbes,
  windowAllocation,
  windowJitter,
  type ProbeSlot,
} from './loop-probe.js';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT } from './services.js';
import type { Sample } from './measure.js';
import { attribute, parseTraceGc, tailRows, tailsMarkdown } from './tails.js';

t.test('an idle probe process writes one slot per 100 ms, the last ones when stopped', async (t) => {
  const dir = makeTempDir('bench-tails-test');
  t.teardown(() => removeTempDir(dir));
  const probes = startJitterProbes(dir, { a: '0' });
  t.teardown(() => probes.stop());
  // The probe writes 10 slots at a time: wait for the first batch, then let 9 more collect in its buffer.
  const deadline = Date.now() + 30_000;
  while (readProbe(probes.files.a!).length < 10) {
    if (Date.now() > deadline) throw new Error('no slots written within 30 s');
    await new Promise((r) => setTimeout(r, 50));
  }
  await new Promise((r) => setTimeout(r, 900));
  const stopAt = Date.now();
  await probes.stop();
  const slots = readProbe(probes.files.a!);
  t.ok(slots.length > 10, `the buffered slots were written at the stop (${slots.length})`);
  t.ok(slots.at(-1)![0] >= stopAt - 500, 'the last slot is from just before the stop');
  for (let i = 1; i < slots.length; i++) t.ok(slots[i]![0] > slots[i - 1]![0], 'in time order');
  t.ok(
    slots.every(([, max]) => Number.isFinite(max) && max >= 0),
    'each slot holds a lateness in ms',
  );
});

t.test('a window takes the slots that overlap it', async (t) => {
  const slots: ProbeSlot[] = [
    [1000, 1],
    [1100, 9],
    [1200, 2],
    [1300, 30],
  ];
  t.same(windowJitter(slots, 1050, 1150), { maxMs: 9, slotsOver5ms: 1, slots: 2 });
  t.same(windowJitter(slots, 1210, 1290), { maxMs: 30, slotsOver5ms: 1, slots: 1 });
  t.same(windowJitter(slots, 2000, 3000), { maxMs: 0, slotsOver5ms: 0, slots: 0 });
});

t.test('p99.9 is put down to the machine, the service, or neither', async (t) => {
  t.equal(attribute(1.5, 40, 40), 'none', 'a p99.9 of 2 ms or less needs no cause');
  t.equal(attribute(20, 12, 12), 'machine', 'an idle process on a core was as late');
  t.equal(attribute(20, 1, 15), 'service', 'only our event loop was');
  t.equal(attribute(20, 1, undefined), 'unexplained', 'the reference has no loop probe');
  t.equal(attribute(20, 3, 4), 'unexplained');
  t.equal(
    attribute(20, 3, 4, undefined, 12),
    'driver',
    'the driver was as late: its stall is counted as latency',
  );
  t.equal(attribute(20, 12, 4, undefined, 12), 'machine', 'a core-wide stall first');
  t.equal(attribute(20, 3, 15, 12, 4), 'service: GC', 'a driver late by less than half is not the cause');

  const sample = (service: string, p999Ms: number, start: number): Sample =>
    ({
      service,
      mode: 'open',
      latency: { p50Us: 100, p99Us: 1000, p999Us: p999Ms * 1000, maxUs: p999Ms * 1000 },
      windowStartMs: start,
      windowEndMs: start + 300,
      stealMs: [0, 10],
    }) as unknown as Sample;
  const rows = tailRows(
    [sample('ours', 20, 1000), sample('reference', 20, 2000)],
    {
      services: [
        [1100, 15],
        [2100, 1],
      ],
    },
    [[2100, 18]],
    (s) => `w ${s.service}`,
  );
  t.same(
    rows.map((r) => [r.service, r.cause, r.probeMaxMs.services, r.loopMaxMs]),
    [
      ['ours', 'machine', 15, 0],
      ['reference', 'unexplained', 1, undefined],
    ],
  );
  const md = tailsMarkdown(rows);
  t.match(md, /- ours: machine 1/);
  t.match(
    md,
    /\| w reference \| reference \| 1\.0 \| 20\.0 \| 1\.0 \(0\) \| {2}\| {2}\| 0\/10 \| unexplained \|/,
  );
});

t.test(
  'the probe header gives the process start; --trace-gc lines become pauses on the epoch clock',
  async (t) => {
    const probe = '# timeOrigin 1700000000000.5\n1700000000100 1.20\n1700000000200 3.40\n';
    t.equal(probeTimeOrigin(probe), 1700000000000.5);
    t.same(parseProbe(probe), [
      [1700000000100, 1.2],
      [1700000000200, 3.4],
    ]);
    const log = [
      '{"level":40,"msg":"connecting to redis"}',
      '[7170:0x26983d90]       29 ms: Scavenge 3.8 (4.0) -> 3.4 (5.0) MB, 2.33 / 0.00 ms  (average mu = 1.000, current mu = 1.000) allocation failure; ',
      '[7170:0x26983d90]     1500 ms: Scavenge (interleaved) 40.1 (52.0) -> 30.2 (52.0) MB, pooled: 0.0 MB, 0.91 / 0.00 ms  (average mu = 0.990, current mu = 0.990) task; ',
      '[7170:0x26983d90]     2100 ms: Mark-Compact 60.5 (70.1) -> 41.0 (66.3) MB, pooled: 0.0 MB, 14.25 / 0.00 ms  (+ 5.1 ms in 20 steps since start of marking, biggest step 1.2 ms, walltime since start of marking 300 ms) finalize incremental marking via stack guard; GC in old space requested',
    ].join('\n');
    t.same(parseTraceGc(log, 1000), [
      { atMs: 1029, pauseMs: 2.33, kind: 'Scavenge' },
      { atMs: 2500, pauseMs: 0.91, kind: 'Scavenge' },
      { atMs: 3100, pauseMs: 14.25, kind: 'Mark-Compact' },
    ]);
    t.equal(attribute(20, 3, 15, 12), 'service: GC', 'a pause of at least half the p99.9');
    t.equal(attribute(20, 3, 15, 2), 'service', 'the loop was late, not because of a pause');
    t.equal(attribute(20, 12, 15, 12), 'machine', 'a core-wide stall first');
  },
);

/** A Node process running `script` with our service's probe loaded, writing to `file`. */
function probed(file: string, script: string): ChildProcess {
  return spawn(
    process.execPath,
    [
      '--import',
      join(REPO_ROOT, 'bench/harness/loop-probe-preload.mjs'),
      '-e',
      `${script} process.on('SIGTERM', () => process.exit(0))`,
    ],
    { env: { ...process.env, BENCH_LOOP_PROBE: file }, stdio: 'ignore' },
  );
}

t.test('the probe counts the heap bytes a process allocates, and its GC pauses', async (t) => {
  // A process that allocates 64-byte-ish objects at a known rate under the probe: the window's
  // allocation is at least what it made, and its young-generation GCs show up as pauses.
  const dir = makeTempDir('bench-alloc-test');
  t.teardown(() => removeTempDir(dir));
  const file = join(dir, 'probe.txt');
  const child = probed(
    file,
    // 10,000 arrays of 16 numbers every 10 ms (each at least 16 * 8 bytes of elements).
    'let keep; setInterval(() => { for (let i = 0; i < 10000; i++) keep = new Array(16).fill(i + 0.5); }, 10);',
  );
  t.teardown(() => child.kill('SIGKILL'));
  const deadline = Date.now() + 60_000;
  let text = '';
  const lines = () => text.split('\n').filter((l) => /^\d/.test(l));
  while (lines().length < 20 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100));
    text = existsSync(file) ? readFileSync(file, 'utf8') : '';
  }
  child.kill('SIGTERM');
  const slots = lines().map((l) => Number(l.split(' ')[0]));
  const a = windowAllocation(text, slots[0], slots[slots.length - 1]);
  t.ok(a, 'the probe writes the allocation column');
  // The process ran at most as often as its timer: count what it made from the span, at the rate it
  // could at most reach (elements only), then require a fifth of it (timers run late on a busy machine).
  const made = (a!.spanMs / 10) * 10_000 * 16 * 8;
  t.ok(
    a!.bytes >= made / 5,
    `${a!.bytes} bytes allocated over ${a!.spanMs} ms (their elements alone: ${made})`,
  );
  t.ok(a!.gcPausesMs.length > 0, `${a!.gcPausesMs.length} GC pauses seen`);
  t.same(parseProbe(text).length, slots.length, 'GC lines are not read as slots');
});

t.test('the probe pauses while its .off file exists (--latency-probe=off)', async (t) => {
  const dir = makeTempDir('bench-probe-off-test');
  t.teardown(() => removeTempDir(dir));
  const file = join(dir, 'probe.txt');
  writeFileSync(`${file}.off`, '');
  const child = probed(file, 'setInterval(() => {}, 1000);');
  t.teardown(() => child.kill('SIGKILL'));
  const slots = () => (existsSync(file) ? parseProbe(readFileSync(file, 'utf8')).length : 0);
  // Paused: the process runs (its header is written at exit) but no slot is written for 1.5 s, the
  // time in which a running probe writes about 15.
  await new Promise((r) => setTimeout(r, 1500));
  t.equal(slots(), 0, 'no slots while paused');
  rmSync(`${file}.off`);
  const deadline = Date.now() + 60_000;
  while (slots() < 5 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  t.ok(slots() >= 5, `slots written once resumed: ${slots()}`);
  child.kill('SIGTERM');
});
