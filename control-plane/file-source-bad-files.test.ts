// Files that are not config files: a FIFO, a symlink to one (a ConfigMap mount is all symlinks), a
// directory named *.yaml, and a 50 MB file. The control plane skips the first ones with a warning and
// keeps serving and answering subscribers; it refuses the large one from its size without reading it
// or holding its event loop; and the service's file source says the same words about the same files.
import t from 'tap';
import { spawn } from 'node:child_process';
import { closeSync, constants, mkdirSync, openSync, renameSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { decodeRateLimitConfig, RATELIMIT_CONFIG_TYPE_URL } from '../proto/index.js';
import { FileConfigProvider, type ConfigUpdate } from '../ratelimit/sources/index.js';
import { mkfifo, sparseFile, watchProcess } from '../harness/files.js';
import { makeTempDir, removeTempDir, waitUntil } from '../harness/net.js';
import { silentLogger, type Logger } from '../common/index.js';
import { InMemorySnapshotCache } from './cache.js';
import { DirectoryConfigSource } from './file-source.js';
import { openRawAdsStream } from './testing.js';

const plain = (domain: string, rpu: number) =>
  `domain: ${domain}\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: minute\n      requests_per_unit: ${rpu}\n`;

function tempDir(t: { teardown(fn: () => unknown): void }): string {
  const dir = makeTempDir('rl-cp-bad');
  t.teardown(() => removeTempDir(dir));
  return dir;
}

function put(dir: string, name: string, text: string): void {
  writeFileSync(join(dir, `.${name}.tmp`), text);
  renameSync(join(dir, `.${name}.tmp`), join(dir, name));
}

/** Opens each FIFO for writing without blocking: a reader blocked on it (the bug) is released. */
function release(...fifos: string[]): void {
  for (const p of fifos) {
    try {
      closeSync(openSync(p, constants.O_WRONLY | constants.O_NONBLOCK));
    } catch {
      // no reader waiting
    }
  }
}

/** A logger that keeps the messages of each level. */
function recordingLogger() {
  const lines = { warn: [] as string[], error: [] as string[] };
  const log: Logger = {
    ...silentLogger,
    warn: (obj: object | string, msg?: string) => void lines.warn.push(msg ?? String(obj)),
    error: (obj: object | string, msg?: string) => void lines.error.push(msg ?? String(obj)),
    child: () => log,
  };
  return { log, lines };
}

t.test(
  'standalone: a *.yaml symlink to a FIFO is skipped; subscribers are answered and edits still pushed',
  async (t) => {
    const dir = tempDir(t);
    put(dir, 'a.yaml', plain('a', 1));
    const fifo = join(dir, '.pipe');
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        'control-plane/main.ts',
        '--dir',
        dir,
        '--listen',
        '127.0.0.1:0',
        '--rescan-interval',
        '100',
        '--debounce',
        '50',
        '--log-format',
        'json',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    t.teardown(() => {
      release(fifo);
      child.kill('SIGKILL');
    });
    let logs = '';
    child.stderr.on('data', (d) => (logs += d));
    const port = await waitUntil(
      () => {
        const m = /"port":(\d+)[^\n]*ratelimit-control-plane ready/.exec(logs);
        return m ? Number(m[1]) : undefined;
      },
      { deadlineMs: 30_000, what: 'the control plane', context: () => logs },
    );
    const first = openRawAdsStream(`127.0.0.1:${port}`, 'pod-1');
    t.teardown(() => first.close());
    first.send({ versionInfo: '' });
    const r1 = await first.next(20_000);
    first.send({ versionInfo: r1.versionInfo, responseNonce: r1.nonce });

    // A ConfigMap-style link to a FIFO nobody writes, a FIFO, and a directory, all named *.yaml.
    mkfifo(fifo);
    symlinkSync(fifo, join(dir, 'pipe.yaml'));
    mkfifo(join(dir, 'fifo.yaml'));
    mkdirSync(join(dir, 'dir.yaml'));
    await waitUntil(() => logs.includes('config file skipped: pipe.yaml'), {
      deadlineMs: 20_000,
      what: 'the skipped link logged',
      context: () => logs,
    });
    t.match(logs, 'config file skipped: pipe.yaml: not a regular file (a FIFO); not read');
    t.match(logs, 'config file skipped: fifo.yaml: not a regular file (a FIFO); not read');
    t.match(logs, 'config file skipped: dir.yaml: not a regular file (a directory); not read');

    // A new subscriber is answered, and an edit still reaches the first one.
    const second = openRawAdsStream(`127.0.0.1:${port}`, 'pod-2');
    t.teardown(() => second.close());
    second.send({ versionInfo: '' });
    t.equal((await second.next(20_000)).versionInfo, r1.versionInfo, 'a new subscriber gets the snapshot');
    put(dir, 'a.yaml', plain('a', 2));
    const r2 = await first.next(20_000);
    t.not(r2.versionInfo, r1.versionInfo);
    t.equal(decodeRateLimitConfig(r2.resources![0]!.value!).descriptors[0]!.rateLimit?.requestsPerUnit, 2);
    t.notMatch(logs, /config rejected/, 'nothing was rejected');
  },
);

t.test('a 50 MB file is refused from fstat: no read, no memory, no held event loop', async (t) => {
  const dir = tempDir(t);
  put(dir, 'a.yaml', plain('a', 1));
  const cache = new InMemorySnapshotCache();
  const { log, lines } = recordingLogger();
  const src = new DirectoryConfigSource({ dir, cache, rescanIntervalMs: 0, logger: log });
  t.same(await src.rescan(), []);
  const good = cache.getSnapshot('any')!.resourceSet(RATELIMIT_CONFIG_TYPE_URL).version;
  sparseFile(join(dir, 'big.yaml'), 50 * 1000 * 1000);
  const rejected: string[] = [];
  src.on('rejected', (e) => rejected.push(e.error));
  const results: string[][] = [];
  // The first scan and two rescans of the unchanged folder.
  const watch = await watchProcess(async () => {
    for (let i = 0; i < 3; i++) results.push(await src.rescan());
  });
  t.same(results[0], ['*'], 'the group is refused');
  t.same(rejected, [
    "big.yaml: error loading config file: the file's size (50000000 bytes) exceeds the limit of 8388608 (CONFIG_YAML_MAX_BYTES)",
  ]);
  t.equal(lines.error.length, 1, 'logged once while the folder is unchanged');
  t.equal(
    cache.getSnapshot('any')!.resourceSet(RATELIMIT_CONFIG_TYPE_URL).version,
    good,
    'the last good serves',
  );
  t.ok(watch.rssGrowth < 64 * 1024 * 1024, `RSS grew ${(watch.rssGrowth / 2 ** 20).toFixed(1)} MiB`);
  t.ok(watch.maxLoopDelayMs < 200, `the loop was held ${watch.maxLoopDelayMs.toFixed(0)} ms at most`);
});

t.test('the service and the control plane say the same about the same bad files', async (t) => {
  const base = tempDir(t);
  const dir = join(base, 'config');
  mkdirSync(dir);
  writeFileSync(join(dir, 'a.yaml'), plain('a', 1));
  mkfifo(join(base, 'pipe'));
  symlinkSync(join(base, 'pipe'), join(dir, 'link.yaml'));
  mkfifo(join(dir, 'fifo.yaml'));
  mkdirSync(join(dir, 'dir.yaml'));
  t.teardown(() => release(join(base, 'pipe'), join(dir, 'fifo.yaml')));

  const read = async () => {
    const cp = recordingLogger();
    const rejected: string[] = [];
    const src = new DirectoryConfigSource({ dir, cache: new InMemorySnapshotCache(), logger: cp.log });
    src.on('rejected', (e) => rejected.push(e.error));
    await src.rescan();
    const svc = recordingLogger();
    const updates: ConfigUpdate[] = [];
    const provider = new FileConfigProvider(
      { root: base, appDirectory: 'config', watchRoot: false, pollIntervalMs: 60_000, logger: svc.log },
      (u) => updates.push(u),
    );
    await provider.start();
    await provider.close();
    const relative = (s: string) => s.replaceAll(`${dir}/`, '');
    return {
      cp: { skipped: cp.lines.warn.filter((l) => l.startsWith('config file skipped')), rejected },
      svc: {
        skipped: svc.lines.warn.map(relative).filter((l) => l.startsWith('config file skipped')),
        rejected: updates.flatMap((u) => ('error' in u ? [relative(u.error.message)] : [])),
        domains: updates.flatMap((u) => ('config' in u ? [[...u.config.domains]] : [])),
      },
    };
  };

  const skipping = await read();
  const skipped = [
    'config file skipped: dir.yaml: not a regular file (a directory); not read',
    'config file skipped: fifo.yaml: not a regular file (a FIFO); not read',
    'config file skipped: link.yaml: not a regular file (a FIFO); not read',
  ];
  t.same(skipping.cp.skipped.sort(), skipped, 'the control plane skips them');
  t.same(skipping.svc.skipped.sort(), skipped, 'the service skips them with the same words');
  t.same(skipping.cp.rejected, [], 'and loads the rest');
  t.same(skipping.svc.domains, [['a']]);

  sparseFile(join(dir, 'big.yaml'), 50 * 1000 * 1000);
  const refusing = await read();
  const tooLarge =
    "big.yaml: error loading config file: the file's size (50000000 bytes) exceeds the limit of 8388608 (CONFIG_YAML_MAX_BYTES)";
  t.same(refusing.cp.rejected, [tooLarge], 'the control plane refuses the large file');
  t.same(refusing.svc.rejected, [tooLarge], 'the service refuses it with the same words');
});

t.test(
  'a skipped file is said once, through the re-reads of a failing group and later rescans',
  async (t) => {
    const dir = tempDir(t);
    put(dir, 'a.yaml', plain('a', 1).replace('minute', 'fortnight'));
    mkfifo(join(dir, 'fifo.yaml'));
    t.teardown(() => release(join(dir, 'fifo.yaml')));
    const { log, lines } = recordingLogger();
    const src = new DirectoryConfigSource({
      dir,
      cache: new InMemorySnapshotCache(),
      rescanIntervalMs: 0,
      rereadDelayMs: 20,
      rereadAttempts: 3,
      logger: log,
    });
    (src as unknown as { watchDirs(): void }).watchDirs = () => {};
    t.teardown(() => src.close());
    let rereads = 0;
    src.on('reread', () => rereads++);
    const rejected = new Promise((r) => src.once('rejected', r));
    await src.start();
    await rejected;
    for (let i = 0; i < 3; i++) await src.rescan();
    t.equal(rereads, 3, 'the failing group was read again');
    t.same(
      lines.warn.filter((l) => l.startsWith('config file skipped')),
      ['config file skipped: fifo.yaml: not a regular file (a FIFO); not read'],
      'the skip is said once',
    );
  },
);
