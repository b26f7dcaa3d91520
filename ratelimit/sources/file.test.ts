// Hot reload from files: direct edits (RUNTIME_WATCH_ROOT=false), symlink swaps of the root
// (the default), a bad file keeping the last good config, MERGE_DOMAIN_CONFIG, and files that are not
// regular files or are too large.
import t from 'tap';
import {
  closeSync,
  constants,
  mkdirSync,
  mkdtempSync,
  openSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { mkfifo, sparseFile, watchProcess } from '../../harness/files.js';
import { descriptor, eventually, startTestApp } from '../test-support.js';
import { FileConfigProvider, type FileProviderOptions } from './file.js';
import type { ConfigParsePool } from './parse-pool.js';
import type { ConfigUpdate } from './source.js';

const limitYaml = (n: number) => `
domain: reload
descriptors:
  - key: k
    rate_limit: { unit: minute, requests_per_unit: ${n} }
`;

t.test('editing a file changes decisions (RUNTIME_WATCH_ROOT=false)', async (t) => {
  const svc = await startTestApp({ files: { 'a.yaml': limitYaml(5) } });
  t.teardown(() => svc.close());
  const first = await svc.call({ domain: 'reload', descriptors: [descriptor(['k', '1'])] });
  t.equal(first.statuses[0].currentLimit!.requestsPerUnit, 5);
  svc.writeConfig('a.yaml', limitYaml(7));
  await eventually(
    async () => {
      const r = await svc.call({ domain: 'reload', descriptors: [descriptor(['k', '2'])] });
      return r.statuses[0].currentLimit?.requestsPerUnit === 7;
    },
    20_000,
    'the new limit',
  );
  t.pass('new limit served');
  t.equal(svc.app.stats.snapshot()['ratelimit.service.config_load_success'], 2);
});

t.test(
  'a bad file is rejected with the file and field named; the last good config keeps serving',
  async (t) => {
    const svc = await startTestApp({ files: { 'a.yaml': limitYaml(5) } });
    t.teardown(() => svc.close());
    const logged: string[] = [];
    const orig = svc.app.logger.error.bind(svc.app.logger);
    svc.app.logger.error = ((msg: string) => {
      logged.push(String(msg));
      return orig(msg);
    }) as typeof svc.app.logger.error;
    svc.writeConfig(
      'b.yaml',
      'domain: other\ndescriptors:\n  - key: x\n    rate_limit: { unit: fortnight, requests_per_unit: 1 }\n',
    );
    await eventually(
      () => svc.app.stats.snapshot()['ratelimit.service.config_load_error'] === 1,
      20_000,
      'config_load_error',
    );
    t.match(logged.join('\n'), /b\.yaml/);
    t.match(logged.join('\n'), /unit/);
    const r = await svc.call({ domain: 'reload', descriptors: [descriptor(['k', '1'])] });
    t.equal(r.statuses[0].currentLimit!.requestsPerUnit, 5, 'old config still serving');
    const other = await svc.call({ domain: 'other', descriptors: [descriptor(['x', '1'])] });
    t.notOk(other.statuses[0].currentLimit, 'nothing of the bad file was loaded');
  },
);

t.test('duplicate domains are rejected unless MERGE_DOMAIN_CONFIG=true', async (t) => {
  const a = 'domain: m\ndescriptors:\n  - key: a\n    rate_limit: { unit: second, requests_per_unit: 1 }\n';
  const b = 'domain: m\ndescriptors:\n  - key: b\n    rate_limit: { unit: second, requests_per_unit: 2 }\n';
  const merged = await startTestApp({
    files: { 'a.yaml': a, 'b.yaml': b },
    env: { MERGE_DOMAIN_CONFIG: 'true' },
  });
  t.teardown(() => merged.close());
  const r = await merged.call({ domain: 'm', descriptors: [descriptor(['a', '1']), descriptor(['b', '1'])] });
  t.equal(r.statuses[0].currentLimit!.requestsPerUnit, 1);
  t.equal(r.statuses[1].currentLimit!.requestsPerUnit, 2);

  const strict = await startTestApp({
    files: { 'a.yaml': a },
    env: { FORCE_START_WITHOUT_INITIAL_CONFIG: 'true' },
  });
  t.teardown(() => strict.close());
  strict.writeConfig('b.yaml', b);
  await eventually(
    () => strict.app.stats.snapshot()['ratelimit.service.config_load_error'] === 1,
    20_000,
    'rejection',
  );
  const s = await strict.call({ domain: 'm', descriptors: [descriptor(['b', '1'])] });
  t.notOk(s.statuses[0].currentLimit, 'b.yaml not merged');
});

t.test('RUNTIME_WATCH_ROOT=true reloads when the root symlink is swapped', async (t) => {
  const base = mkdtempSync(join(tmpdir(), 'rl-swap-'));
  t.teardown(() => rmSync(base, { recursive: true, force: true }));
  const v1 = join(base, 'v1');
  const v2 = join(base, 'v2');
  for (const [dir, n] of [
    [v1, 3],
    [v2, 9],
  ] as const) {
    mkdirSync(join(dir, 'config'), { recursive: true });
    writeFileSync(join(dir, 'config', 'c.yaml'), limitYaml(n));
  }
  const current = join(base, 'current');
  symlinkSync(v1, current);
  const svc = await startTestApp({ env: { RUNTIME_ROOT: current, RUNTIME_WATCH_ROOT: 'true' } });
  t.teardown(() => svc.close());
  const r1 = await svc.call({ domain: 'reload', descriptors: [descriptor(['k', '1'])] });
  t.equal(r1.statuses[0].currentLimit!.requestsPerUnit, 3);
  // the atomic swap deployments use: a new link renamed over the old one
  symlinkSync(v2, join(base, 'next'));
  renameSync(join(base, 'next'), current);
  await eventually(
    async () => {
      const r = await svc.call({ domain: 'reload', descriptors: [descriptor(['k', '1'])] });
      return r.statuses[0].currentLimit?.requestsPerUnit === 9;
    },
    20_000,
    'the swapped config',
  );
  t.pass('swapped config served');
});

t.test('RUNTIME_IGNOREDOTFILES skips dot files', async (t) => {
  const svc = await startTestApp({
    files: { 'a.yaml': limitYaml(5), '.hidden.yaml': 'domain: hidden\ndescriptors: []\n' },
    env: { RUNTIME_IGNOREDOTFILES: 'true' },
  });
  t.teardown(() => svc.close());
  t.same(svc.app.service.getConfig()!.domains, ['reload']);
});

t.test('a reload parses only the files that changed; a removed file is dropped', async (t) => {
  const root = mkdtempSync(join(tmpdir(), 'rl-cache-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  const dir = join(root, 'config');
  mkdirSync(dir);
  const domainYaml = (d: string, n: number) =>
    `domain: ${d}\ndescriptors:\n  - key: k\n    rate_limit: { unit: minute, requests_per_unit: ${n} }\n`;
  writeFileSync(join(dir, 'a.yaml'), domainYaml('a', 1));
  writeFileSync(join(dir, 'b.yaml'), domainYaml('b', 1));
  writeFileSync(join(dir, 'c.yaml'), domainYaml('c', 1));
  const debug: string[] = [];
  const updates: ConfigUpdate[] = [];
  const provider = new FileConfigProvider(
    {
      root,
      appDirectory: 'config',
      watchRoot: false,
      pollIntervalMs: 50,
      logger: { debug: (m: string) => void debug.push(m) } as FileProviderOptions['logger'],
    },
    (u) => updates.push(u),
  );
  t.teardown(() => provider.close());
  await provider.start();
  t.ok(debug.includes('parsed 3 of 3 files (the others are unchanged)'), 'the first load parses every file');
  const limitOf = (u: ConfigUpdate | undefined, domain: string) =>
    u && 'config' in u
      ? u.config.getLimit(domain, { entries: [{ key: 'k', value: 'v' }] })?.rule.requestsPerUnit
      : undefined;
  writeFileSync(join(dir, 'b.yaml'), domainYaml('b', 2));
  await eventually(() => limitOf(updates.at(-1), 'b') === 2, 10_000, 'the edit of b.yaml');
  t.ok(debug.includes('parsed 1 of 3 files (the others are unchanged)'), 'only b.yaml is parsed again');
  t.equal(limitOf(updates.at(-1), 'a'), 1, 'the unchanged files still serve');
  t.equal(limitOf(updates.at(-1), 'c'), 1);
  rmSync(join(dir, 'c.yaml'));
  await eventually(() => limitOf(updates.at(-1), 'c') === undefined, 10_000, 'the removal of c.yaml');
  t.ok(debug.includes('parsed 0 of 2 files (the others are unchanged)'), 'a removal parses nothing');
  t.equal(limitOf(updates.at(-1), 'b'), 2);
});

t.test('a reload runs on the spare worker: no worker is started for it', async (t) => {
  const root = mkdtempSync(join(tmpdir(), 'rl-spare-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  const dir = join(root, 'config');
  mkdirSync(dir);
  writeFileSync(join(dir, 'a.yaml'), limitYaml(1));
  const startedAtUpdate: number[] = [];
  const limits: (number | undefined)[] = [];
  const provider: FileConfigProvider = new FileConfigProvider(
    { root, appDirectory: 'config', watchRoot: false, pollIntervalMs: 50, spareMinChars: 0 },
    (u) => {
      startedAtUpdate.push(parser.workersStarted);
      limits.push(
        'config' in u
          ? u.config.getLimit('reload', { entries: [{ key: 'k', value: 'v' }] })?.rule.requestsPerUnit
          : undefined,
      );
    },
  );
  const parser = (provider as unknown as { parser: ConfigParsePool }).parser;
  t.teardown(() => provider.close());
  await provider.start();
  t.same(startedAtUpdate, [1], 'the first load started a worker');
  await eventually(() => parser.workersStarted === 2, 10_000, 'the spare');
  t.ok(parser.workerRunning, 'the spare waits for the next reload');
  writeFileSync(join(dir, 'a.yaml'), limitYaml(2));
  await eventually(() => limits.at(-1) === 2, 10_000, 'the reload');
  t.equal(startedAtUpdate.at(-1), 2, 'the reload was parsed on the spare');
});

t.test(
  'a FIFO named *.yaml, and a symlink to one, are logged and skipped; a later edit still applies',
  async (t) => {
    const svc = await startTestApp({ files: { 'a.yaml': limitYaml(5) } });
    const fifo = join(svc.configDir, 'b.yaml');
    const outside = join(svc.root, 'pipe');
    t.teardown(async () => {
      // Any reader still blocked on a FIFO (the bug) is released, so the service can close.
      for (const p of [fifo, outside]) {
        try {
          closeSync(openSync(p, constants.O_WRONLY | constants.O_NONBLOCK));
        } catch {
          // no reader waiting
        }
      }
      await svc.close();
    });
    const warned: string[] = [];
    const warn = svc.app.logger.warn.bind(svc.app.logger);
    svc.app.logger.warn = ((msg: string) => {
      warned.push(String(msg));
      return warn(msg);
    }) as typeof svc.app.logger.warn;
    mkfifo(fifo);
    mkfifo(outside);
    symlinkSync(outside, join(svc.configDir, 'c.yaml'));
    svc.writeConfig('a.yaml', limitYaml(7));
    await eventually(
      async () => {
        const r = await svc.call({ domain: 'reload', descriptors: [descriptor(['k', '1'])] });
        return r.statuses[0].currentLimit?.requestsPerUnit === 7;
      },
      20_000,
      'the edit after the FIFOs appeared',
    );
    t.ok(
      warned.includes(`config file skipped: ${fifo}: not a regular file (a FIFO); not read`),
      warned.join('\n'),
    );
    t.ok(
      warned.includes(
        `config file skipped: ${join(svc.configDir, 'c.yaml')}: not a regular file (a FIFO); not read`,
      ),
      'the symlink is named',
    );
    t.equal(svc.app.stats.snapshot()['ratelimit.service.config_load_error'] ?? 0, 0, 'no load failed');
    svc.writeConfig('a.yaml', limitYaml(9));
    await eventually(
      async () => {
        const r = await svc.call({ domain: 'reload', descriptors: [descriptor(['k', '1'])] });
        return r.statuses[0].currentLimit?.requestsPerUnit === 9;
      },
      20_000,
      'the next edit',
    );
    t.pass('every later edit applies');
  },
);

t.test('a 50 MB file is refused from its size without being read; the last good config serves', async (t) => {
  const svc = await startTestApp({ files: { 'a.yaml': limitYaml(5) } });
  t.teardown(() => svc.close());
  const errors: string[] = [];
  const error = svc.app.logger.error.bind(svc.app.logger);
  svc.app.logger.error = ((msg: string) => {
    errors.push(String(msg));
    return error(msg);
  }) as typeof svc.app.logger.error;
  const watch = await watchProcess(async () => {
    sparseFile(join(svc.configDir, 'big.yaml'), 50 * 1000 * 1000);
    await eventually(
      () => svc.app.stats.snapshot()['ratelimit.service.config_load_error'] === 1,
      20_000,
      'config_load_error',
    );
  });
  t.match(
    errors.join('\n'),
    /big\.yaml: error loading config file: the file's size \(50000000 bytes\) exceeds the limit of 8388608 \(CONFIG_YAML_MAX_BYTES\)/,
  );
  t.ok(watch.rssGrowth < 64 * 1024 * 1024, `RSS grew ${(watch.rssGrowth / 2 ** 20).toFixed(1)} MiB`);
  t.ok(watch.maxLoopDelayMs < 200, `the loop was held ${watch.maxLoopDelayMs.toFixed(0)} ms at most`);
  const r = await svc.call({ domain: 'reload', descriptors: [descriptor(['k', '1'])] });
  t.equal(r.statuses[0].currentLimit!.requestsPerUnit, 5, 'the last good config serves');
});
