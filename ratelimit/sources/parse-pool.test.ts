import t from 'tap';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readBoundedFile } from '../../common/index.js';
import {
  buildConfigInSlices,
  checkedEntry,
  ConfigError,
  loadConfig,
  toCheckedDocument,
} from '../config/index.js';
import { cfg10kYaml, flatConfigYaml } from '../../harness/fixtures.js';
import { runCommand } from '../../harness/proc.js';
import { eventually } from '../test-support.js';
import {
  workerExecArgv,
  ConfigParsePool,
  SPARE_MIN_CHARS,
  WARM_UP_MAX_CHARS,
  WARM_UP_PARSES,
} from './parse-pool.js';

t.test(
  'config YAML is parsed and validated on the worker thread, errors come back as ConfigError',
  async (t) => {
    const p = new ConfigParsePool();
    t.teardown(() => p.close());
    const docs = await p.parse([
      { name: 'a.yaml', yaml: 'domain: d\ndescriptors:\n  - key: k\n  - key: j\n' },
    ]);
    t.same(
      docs.map((d) => ({
        name: d.name,
        domain: d.domain,
        keys: d.keys,
        entries: d.keys.map((_, i) => checkedEntry(d, i)),
      })),
      [{ name: 'a.yaml', domain: 'd', keys: ['k', 'j'], entries: [{ key: 'k' }, { key: 'j' }] }],
    );
    await t.rejects(p.parse([{ name: 'bad.yaml', yaml: 'domain: [unclosed\n' }]), ConfigError);
    await t.rejects(p.parse([{ name: 'bad.yaml', yaml: 'domain: [unclosed\n' }]), {
      message: /^bad\.yaml: error loading config file: yaml: /,
    });
    await t.rejects(
      p.parse([
        {
          name: 'v.yaml',
          yaml: 'domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: fortnight }\n',
        },
      ]),
      { message: /^v\.yaml: .*descriptors\[0\]\.rate_limit\.unit/ },
      'a validation error names the file and the field',
    );
    t.same(p.counts, { worker: 4, inline: 0, timedOut: 0, warmedUp: 0 }, 'every parse ran on the worker');
  },
);

t.test(
  'the sliced compile equals the one-shot compile, yields to the event loop, and names fields',
  async (t) => {
    const yaml = cfg10kYaml(3);
    const p = new ConfigParsePool();
    t.teardown(() => p.close());
    const docs = await p.parse([{ name: 'c.yaml', yaml }]);
    // Turns of the event loop's check phase during the compile; slices of 0 ms end after every few
    // hundred entries (10k are indexed in about a millisecond).
    let turns = 0;
    let ticking = true;
    const tick = () => {
      turns++;
      if (ticking) setImmediate(tick);
    };
    setImmediate(tick);
    const sliced = await buildConfigInSlices(docs, false, { sliceMs: 0 });
    ticking = false;
    const oneShot = loadConfig([{ name: 'c.yaml', yaml }]);
    t.equal(sliced.dump(), oneShot.dump(), 'same rules');
    t.same(sliced.domains, oneShot.domains);
    t.ok(turns > 5, `the event loop had ${turns} turns during the compile`);

    const dupMessage = "d.yaml: descriptors[2]: duplicate descriptor composite key 'd.a'";
    await t.rejects(
      p.parse([{ name: 'd.yaml', yaml: 'domain: d\ndescriptors:\n  - key: a\n  - key: b\n  - key: a\n' }]),
      { message: dupMessage },
      'the worker validates',
    );
    const dup = toCheckedDocument('d.yaml', {
      domain: 'd',
      descriptors: [{ key: 'a' }, { key: 'b' }, { key: 'a' }],
    });
    await t.rejects(
      buildConfigInSlices([dup], false),
      { message: dupMessage },
      'the compile names the same field',
    );
    const twice = await p.parse([
      { name: 'x.yaml', yaml: 'domain: d\ndescriptors:\n  - key: a\n' },
      { name: 'y.yaml', yaml: 'domain: d\ndescriptors:\n  - key: b\n' },
    ]);
    await t.rejects(buildConfigInSlices(twice, false), { message: /y\.yaml: domain: duplicate domain 'd'/ });
    t.same((await buildConfigInSlices(twice, true)).domains, ['d'], 'merged with MERGE_DOMAIN_CONFIG');
  },
);

t.test('the worker gets the node flags minus module hooks and profilers', async (t) => {
  t.same(
    workerExecArgv([
      '--import',
      'tsx',
      '--max-old-space-size=512',
      '--import=./probe.ts',
      '--cpu-prof',
      '--cpu-prof-dir=/tmp/x',
      '-r',
      'x.cjs',
      '--enable-source-maps',
    ]),
    ['--max-old-space-size=512', '--enable-source-maps'],
  );
});

t.test('a V8 flag on the command line (refused in a worker) still parses on the worker', async (t) => {
  // `node --max-old-space-size=... bin/ratelimit.js` is common in Kubernetes; Node refuses V8 flags in a
  // worker's execArgv, and the service used to come up without a config.
  const script = [
    `import { ConfigParsePool } from ${JSON.stringify(new URL('./parse-pool.ts', import.meta.url).href)};`,
    'const p = new ConfigParsePool();',
    "const d = await p.parse([{ name: 'a.yaml', yaml: 'domain: d\\ndescriptors:\\n  - key: a\\n' }]);",
    'console.log(JSON.stringify({ domain: d[0].domain, counts: p.counts }));',
    'await p.close();',
  ].join('\n');
  const r = await runCommand(
    process.execPath,
    [
      '--max-old-space-size=256',
      '--max-semi-space-size=8',
      '--import',
      'tsx',
      '--input-type=module',
      '-e',
      script,
    ],
    { timeoutMs: 120_000 },
  );
  t.equal(r.code, 0, r.stderr);
  t.same(JSON.parse(r.stdout.trim().split('\n').pop()!), {
    domain: 'd',
    counts: { worker: 1, inline: 0, timedOut: 0, warmedUp: 0 },
  });
});

t.test('an idle worker ends, and the next parse starts another', async (t) => {
  const p = new ConfigParsePool({ idleMs: 100 });
  t.teardown(() => p.close());
  const source = { name: 'a.yaml', yaml: 'domain: d\ndescriptors:\n  - key: a\n' };
  await p.parse([source]);
  const deadline = Date.now() + 10_000;
  while (p.workerRunning && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  t.notOk(p.workerRunning, 'the idle worker was ended');
  t.same((await p.parse([source]))[0]?.domain, 'd');
  t.same(p.counts, { worker: 2, inline: 0, timedOut: 0, warmedUp: 0 }, 'both parses ran on a worker');
});

t.test('warm() starts the worker before a parse, and it ends when no parse comes', async (t) => {
  const p = new ConfigParsePool({ idleMs: 200 });
  t.teardown(() => p.close());
  t.notOk(p.workerRunning, 'no worker before anything asks');
  p.warm();
  t.ok(p.workerRunning, 'started by warm()');
  const deadline = Date.now() + 10_000;
  while (p.workerRunning && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  t.notOk(p.workerRunning, 'ended after idleMs without a parse');
  p.warm();
  const source = { name: 'a.yaml', yaml: 'domain: d\ndescriptors:\n  - key: a\n' };
  t.same((await p.parse([source]))[0]?.domain, 'd');
  t.same(p.counts, { worker: 1, inline: 0, timedOut: 0, warmedUp: 0 }, 'the parse ran on the warmed worker');
});

t.test('with a spare, the used worker is replaced by a fresh one that is not ended when idle', async (t) => {
  const p = new ConfigParsePool({ spare: true, spareDelayMs: 50, idleMs: 100, spareMinChars: 0 });
  t.teardown(() => p.close());
  const source = { name: 'a.yaml', yaml: 'domain: d\ndescriptors:\n  - key: a\n' };
  await p.parse([source]);
  t.equal(p.workersStarted, 1, 'the first parse started a worker');
  let deadline = Date.now() + 10_000;
  while (p.workersStarted < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  t.equal(p.workersStarted, 2, 'a spare was started after the parse');
  // Three idle periods without a parse: an idle worker would have been ended by now.
  await new Promise((r) => setTimeout(r, 300));
  t.ok(p.workerRunning, 'the spare is kept');
  t.equal(p.workersStarted, 2, 'and not replaced while unused');
  t.same((await p.parse([source]))[0]?.domain, 'd');
  t.equal(p.workersStarted, 2, 'the second parse ran on the spare: no worker was started for it');
  deadline = Date.now() + 10_000;
  while (p.workersStarted < 3 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  t.equal(p.workersStarted, 3, 'the used spare was replaced in turn');
  t.match(p.counts, { worker: 2, inline: 0, timedOut: 0 }, 'both parses ran on a worker');
});

t.test('a small config keeps no spare: its worker ends after the parse; a large one keeps one', async (t) => {
  const small = { name: 'a.yaml', yaml: 'domain: d\ndescriptors:\n  - key: a\n' };
  t.ok(small.yaml.length < SPARE_MIN_CHARS);
  const byDefault = new ConfigParsePool({ spare: true, spareDelayMs: 20 });
  t.teardown(() => byDefault.close());
  await byDefault.parse([small]);
  await eventually(() => !byDefault.workerRunning, 10_000, 'the used worker ended');
  t.equal(byDefault.workersStarted, 1, 'no spare was started');

  const p = new ConfigParsePool({ spare: true, spareDelayMs: 20, spareMinChars: 1000 });
  t.teardown(() => p.close());
  await p.parse([small]);
  await eventually(() => !p.workerRunning, 10_000, 'the used worker ended');
  const large = { name: 'b.yaml', yaml: flatConfigYaml(20) };
  t.ok(large.yaml.length >= 1000);
  await p.parse([large]);
  t.equal(p.workersStarted, 2, 'the next parse started a worker');
  await eventually(() => p.workersStarted === 3, 10_000, 'a spare after the large parse');
  t.ok(p.workerRunning, 'the spare is kept');
});

t.test("the spare parses the last files before it is used, and those replies are nobody's", async (t) => {
  const p = new ConfigParsePool({ spare: true, spareDelayMs: 20, spareMinChars: 0 });
  t.teardown(() => p.close());
  const big = { name: 'big.yaml', yaml: cfg10kYaml(1) };
  const first = await p.parse([big]);
  const deadline = Date.now() + 60_000;
  while (p.counts.warmedUp < WARM_UP_PARSES && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 20));
  }
  t.equal(p.workersStarted, 2, 'a spare was started');
  t.equal(p.counts.warmedUp, WARM_UP_PARSES, `and parsed the last files ${WARM_UP_PARSES} times`);
  t.equal(p.counts.worker, 1, 'the warm-up is not counted as a parse');
  const second = await p.parse([big]);
  t.same(second, first, 'the next parse, on the warmed spare, answers as the first');
  t.equal(p.workersStarted, 2, 'on the same spare');
});

t.test('the spare does not parse a config larger than WARM_UP_MAX_CHARS ahead of time', async (t) => {
  const p = new ConfigParsePool({ spare: true, spareDelayMs: 20, spareMinChars: 0 });
  t.teardown(() => p.close());
  const large = { name: 'large.yaml', yaml: flatConfigYaml(30_000) };
  t.ok(large.yaml.length > WARM_UP_MAX_CHARS, 'the file is past the warm-up bound');
  await p.parse([large]);
  const deadline = Date.now() + 60_000;
  while (p.workersStarted < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  t.equal(p.workersStarted, 2, 'a spare was started');
  // The worker answers in order: a warm-up posted to the spare would have replied before this parse.
  const small = await p.parse([{ name: 'small.yaml', yaml: 'domain: d\ndescriptors:\n  - key: a\n' }]);
  t.equal(small[0]?.domain, 'd');
  t.equal(p.workersStarted, 2, 'the small parse ran on the spare');
  t.equal(p.counts.warmedUp, 0, 'which had not parsed the large config again (its heap stays small)');
});

t.test(
  'a file goes to the worker as its bytes, moved (not copied); an unchanged digest is not parsed; the spare warms up on a copy',
  async (t) => {
    const p = new ConfigParsePool({ spare: true, spareDelayMs: 20, spareMinChars: 0 });
    t.teardown(() => p.close());
    const dir = mkdtempSync(join(tmpdir(), 'rl-bytes-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    writeFileSync(join(dir, 'a.yaml'), 'domain: a\ndescriptors:\n  - key: k\n');
    writeFileSync(join(dir, 'b.yaml'), 'domain: b\ndescriptors:\n  - key: k\n');
    // As the file source reads them: a Buffer from the bounded reader.
    const read = async (name: string) => ({
      name,
      bytes: await readBoundedFile(join(dir, name), { maxBytes: 1024 }),
    });
    const a = await read('a.yaml');
    const b = await read('b.yaml');
    const first = await p.parseFiles([a, b], []);
    t.equal(
      a.bytes.byteLength,
      0,
      'the bytes moved to the worker: the main thread neither copied nor decoded them',
    );
    t.same(
      first.documents.map((d) => d?.domain),
      ['a', 'b'],
    );
    const again = await p.parseFiles(
      [await read('a.yaml'), await read('b.yaml')],
      [first.digests[0], 'other'],
    );
    t.same(again.digests, first.digests, 'the same bytes, the same digests');
    t.same(
      again.documents.map((d) => d?.domain ?? null),
      [null, 'b'],
      'a file whose digest is the known one is not parsed again',
    );
    const deadline = Date.now() + 60_000;
    while (p.counts.warmedUp < WARM_UP_PARSES && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
    }
    t.equal(p.counts.warmedUp, WARM_UP_PARSES, 'the spare parsed its copy of the last files');
  },
);
