import t from 'tap';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, renameSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decodeRateLimitConfig, RATELIMIT_CONFIG_TYPE_URL } from '../proto/index.js';
import { compileConfig, type ParsedConfigSource } from '../ratelimit/config/index.js';
import { XdsConfigClient } from '../ratelimit/sources/index.js';
import { Registry } from 'prom-client';
import { InMemorySnapshotCache } from './cache.js';
import { registerSourceMetrics } from './metrics.js';
import { DirectoryConfigSource, parseConfigFile } from './file-source.js';
import { USAGE_FLAGS } from './usage.js';
import { AdsServer } from './server.js';
import { openRawAdsStream } from './testing.js';

const plain = (domain: string, rpu: number) =>
  `domain: ${domain}\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: minute\n      requests_per_unit: ${rpu}\n`;
const crd = (name: string, domain: string, rpu: number) => `apiVersion: ratelimit.envoyproxy.io/v1alpha1
kind: RateLimitConfig
metadata:
  name: ${name}
  namespace: team
spec:
  domain: ${domain}
  descriptors:
    - key: k
      rate_limit: { unit: hour, requests_per_unit: ${rpu} }
`;

function tempDir(t: { teardown(fn: () => unknown): void }): string {
  const dir = mkdtempSync(join(tmpdir(), 'rl-cp-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Atomic write, as editors and ConfigMap updates do. */
function put(dir: string, name: string, text: string): void {
  const tmp = join(dir, `.${name}.tmp`);
  writeFileSync(tmp, text);
  renameSync(tmp, join(dir, name));
}

const names = (cache: InMemorySnapshotCache, node: string) =>
  (cache.getSnapshot(node)?.resourceSet(RATELIMIT_CONFIG_TYPE_URL).resources ?? []).map((r) => r.name);

function until<T>(emitter: NodeJS.EventEmitter, event: string, ms = 5000): Promise<T[]> {
  return Promise.race([
    once(emitter, event) as Promise<T[]>,
    new Promise<never>((_, reject) =>
      setTimeout(() => reject(new Error(`no ${event} within ${ms} ms`)), ms).unref(),
    ),
  ]);
}

t.test('parses custom resources and plain files, multi-document', async (t) => {
  const s = parseConfigFile('x.yaml', `${crd('a', 'da', 1)}---\n${plain('db', 2)}`);
  t.same(
    s.map((x) => x.name),
    ['team/a', 'x.yaml#1'],
  );
  t.same((s[0].document as any).domain, 'da');
  t.throws(
    () => parseConfigFile('y.yaml', crd('a', 'd', 1).replace('ratelimit.envoyproxy.io', 'example.com')),
    /group/,
  );
  t.ok(
    parseConfigFile(
      'z.yaml',
      crd('a', 'd', 1).replace('ratelimit.envoyproxy.io', 'policy.ratelimit.envoyproxy.io'),
    ).length,
  );
  t.throws(() => parseConfigFile('bad.yaml', 'domain: [unclosed'), /bad\.yaml/);
});

t.test('directory source: add, modify, break (last good keeps serving), fix, per-node folders', async (t) => {
  const dir = tempDir(t);
  const cache = new InMemorySnapshotCache();
  put(dir, 'a.yaml', plain('a', 1));
  const src = new DirectoryConfigSource({ dir, cache, debounceMs: 50, rescanIntervalMs: 0 });
  t.teardown(() => src.close());
  await src.start();
  t.same(names(cache, 'any'), ['a.yaml']);

  let loaded = until(src, 'loaded');
  put(dir, 'b.yaml', crd('b', 'b', 2));
  await loaded;
  t.same(names(cache, 'any'), ['a.yaml', 'team/b']);

  loaded = until(src, 'loaded');
  put(dir, 'a.yaml', plain('a', 3));
  await loaded;
  const a = cache.getSnapshot('any')!.resourceSet(RATELIMIT_CONFIG_TYPE_URL).resources[0];
  t.equal(decodeRateLimitConfig(a.value).descriptors[0].rateLimit?.requestsPerUnit, 3);

  const goodVersion = cache.getSnapshot('any')!.resourceSet(RATELIMIT_CONFIG_TYPE_URL).version;
  const rejected = until<{ error: string }>(src, 'rejected');
  put(dir, 'a.yaml', plain('a', 3).replace('minute', 'fortnight'));
  const [r] = await rejected;
  t.match(
    r.error,
    /a\.yaml: descriptors\[0\]\.rate_limit\.unit/,
    'the validator message names file and field',
  );
  t.equal(
    cache.getSnapshot('any')!.resourceSet(RATELIMIT_CONFIG_TYPE_URL).version,
    goodVersion,
    'last good serves',
  );

  // The same broken content is not re-reported on a rescan.
  let reports = 0;
  src.on('rejected', () => reports++);
  await src.rescan();
  t.equal(reports, 0);

  loaded = until(src, 'loaded');
  put(dir, 'a.yaml', plain('a', 4));
  await loaded;
  t.not(cache.getSnapshot('any')!.resourceSet(RATELIMIT_CONFIG_TYPE_URL).version, goodVersion);

  // A node folder overrides the default for that node, and removing it falls back.
  mkdirSync(join(dir, 'nodes', 'canary'), { recursive: true });
  put(join(dir, 'nodes', 'canary'), 'c.yaml', plain('c', 1));
  await src.rescan();
  t.same(names(cache, 'canary'), ['nodes/canary/c.yaml']);
  t.same(names(cache, 'other'), ['a.yaml', 'team/b']);
  rmSync(join(dir, 'nodes', 'canary'), { recursive: true });
  await src.rescan();
  t.same(names(cache, 'canary'), ['a.yaml', 'team/b']);

  // Deleting a file removes its resource.
  loaded = until(src, 'loaded');
  unlinkSync(join(dir, 'b.yaml'));
  await loaded;
  t.same(names(cache, 'any'), ['a.yaml']);
});

t.test('a change reaches the streams at once, not after the coalescing window', async (t) => {
  // A window far longer than the deadline: the first change must not wait for it.
  const dir = tempDir(t);
  const cache = new InMemorySnapshotCache();
  put(dir, 'a.yaml', plain('a', 1));
  const src = new DirectoryConfigSource({ dir, cache, debounceMs: 120_000, rescanIntervalMs: 0 });
  t.teardown(() => src.close());
  await src.start();
  const server = new AdsServer({ cache, listen: '127.0.0.1:0' });
  await server.start();
  t.teardown(() => server.close());
  const s = openRawAdsStream(`127.0.0.1:${server.port}`, 'pod-1');
  t.teardown(() => s.close());
  s.send({ versionInfo: '' });
  const r1 = await s.next(30_000);
  s.send({ versionInfo: r1.versionInfo, responseNonce: r1.nonce });

  put(dir, 'a.yaml', plain('a', 2));
  const r2 = await s.next(30_000);
  t.not(r2.versionInfo, r1.versionInfo);
  t.equal(decodeRateLimitConfig(r2.resources![0].value!).descriptors[0].rateLimit?.requestsPerUnit, 2);
});

t.test('changes within the coalescing window after a read are read together once', async (t) => {
  const dir = tempDir(t);
  const cache = new InMemorySnapshotCache();
  put(dir, 'a.yaml', plain('a', 1));
  const src = new DirectoryConfigSource({ dir, cache, debounceMs: 3000, rescanIntervalMs: 0 });
  t.teardown(() => src.close());
  await src.start();
  let loads = 0;
  src.on('loaded', () => loads++);
  const first = until(src, 'loaded', 30_000);
  put(dir, 'a.yaml', plain('a', 2));
  await first;
  put(dir, 'b.yaml', plain('b', 1));
  put(dir, 'c.yaml', plain('c', 1));
  const deadline = Date.now() + 30_000;
  while (names(cache, 'any').length < 3 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  t.same(names(cache, 'any'), ['a.yaml', 'b.yaml', 'c.yaml']);
  t.equal(loads, 2, 'the first change, then both later ones in one read');
});

t.test('two files with the same domain are rejected unless merging is on', async (t) => {
  const dir = tempDir(t);
  put(dir, 'a.yaml', plain('same', 1));
  put(dir, 'b.yaml', plain('same', 2).replace('key: k', 'key: other'));
  const strict = new DirectoryConfigSource({ dir, cache: new InMemorySnapshotCache(), rescanIntervalMs: 0 });
  t.same(await strict.rescan(), ['*']);
  const merging = new DirectoryConfigSource({
    dir,
    cache: new InMemorySnapshotCache(),
    rescanIntervalMs: 0,
    mergeDomainConfig: true,
  });
  t.same(await merging.rescan(), []);
});

t.test('the periodic rescan picks up changes fs.watch would miss', async (t) => {
  const dir = tempDir(t);
  const cache = new InMemorySnapshotCache();
  const src = new DirectoryConfigSource({ dir, cache, rescanIntervalMs: 100 });
  (src as any).watchDirs = () => {}; // no fs.watch: only the rescan
  t.teardown(() => src.close());
  await src.start();
  const loaded = until(src, 'loaded');
  put(dir, 'a.yaml', plain('a', 1));
  await loaded;
  t.same(names(cache, 'x'), ['a.yaml']);
});

t.test('ratelimit-control-plane --help lists every flag', async (t) => {
  const child = spawn(process.execPath, ['--import', 'tsx', 'control-plane/main.ts', '--help'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  const [code] = await once(child, 'exit');
  t.equal(code, 0);
  for (const flag of USAGE_FLAGS) t.match(out, flag);
});

t.test(
  'standalone process: a client gets the folder, then an update, and a broken file is not served',
  async (t) => {
    const dir = tempDir(t);
    put(dir, 'a.yaml', plain('a', 1));
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
        '--debounce',
        '50',
        '--log-format',
        'json',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    t.teardown(() => child.kill('SIGTERM'));
    let logs = '';
    const port = await new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`not ready: ${logs}`)), 20_000);
      child.stderr.on('data', (d) => {
        logs += d;
        const m = /"port":(\d+)[^\n]*ratelimit-control-plane ready/.exec(logs);
        if (m) {
          clearTimeout(timer);
          resolve(Number(m[1]));
        }
      });
    });
    let current: string[] = [];
    const client = new XdsConfigClient({
      nodeId: 'pod',
      serverUrl: `127.0.0.1:${port}`,
      backoff: { initialMs: 100, maxMs: 200 },
      onConfig: (docs: ParsedConfigSource[]) => {
        try {
          current = [...compileConfig(docs).domains];
          return undefined;
        } catch (err) {
          return (err as Error).message;
        }
      },
    });
    t.teardown(() => client.close());
    let got = until(client, 'config', 10_000);
    client.start();
    await got;
    t.same(current, ['a']);

    got = until(client, 'config', 10_000);
    put(dir, 'b.yaml', crd('b', 'b', 5));
    await got;
    t.same(current.sort(), ['a', 'b']);

    let nacks = 0;
    client.on('nack', () => nacks++);
    put(dir, 'b.yaml', crd('b', 'b', 5).replace('hour', 'eon'));
    const deadline = Date.now() + 20_000;
    while (!/config rejected/.test(logs) && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 50));
    t.match(logs, /config rejected/);
    t.match(logs, /b\.yaml \(RateLimitConfig team\/b\): descriptors\[0\]\.rate_limit\.unit/);
    t.equal(nacks, 0, 'the broken file never reached the client');
    t.same(current.sort(), ['a', 'b']);

    got = until(client, 'config', 10_000);
    put(dir, 'b.yaml', crd('b', 'b2', 5));
    await got;
    t.same(current.sort(), ['a', 'b2']);
  },
);

/** A process's exit status and output (through tsx, from the repository root). */
function run(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['--import', 'tsx', ...args], { timeout: 120_000 }, (err, stdout, stderr) =>
      resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : -1, stdout, stderr }),
    );
  });
}

const refused = {
  empty: '',
  'only a comment': '# the domain went missing\n',
  null: '~\n',
  'no domain': 'descriptors:\n  - key: k\n    rate_limit: { unit: minute, requests_per_unit: 1 }\n',
  'an empty custom resource spec': crd('r', 'd', 1).replace(/spec:[\s\S]*$/, 'spec: {}\n'),
};

t.test(
  'an empty, null or domain-less file is refused by --check with the message ratelimit-config validate gives',
  async (t) => {
    t.same(parseConfigFile('e.yaml', ''), [{ name: 'e.yaml', source: 'e.yaml', document: null }]);
    for (const [what, text] of Object.entries(refused)) {
      const dir = tempDir(t);
      put(dir, 'example.yaml', text);
      const validate = await run(['cli/ratelimit-config/cli.ts', 'validate', join(dir, 'example.yaml')]);
      t.equal(validate.code, 1, `${what}: ratelimit-config validate refuses it`);
      // `<file>:<line>:<col>: <field>: <message>`: the validator's words after the place. For a custom
      // resource the command line names the field from the manifest's root (spec.), the control
      // plane's running source from the spec it serves.
      const message = /^.*?:\d+:\d+: (?:spec\.)?(.*)$/m.exec(validate.stdout)?.[1];
      t.ok(message, validate.stdout);
      const check = await run(['control-plane/main.ts', '--dir', dir, '--check']);
      t.equal(check.code, 1, `${what}: --check refuses it`);
      t.ok(check.stderr.includes(`example.yaml`) && check.stderr.includes(message!), check.stderr);

      const cache = new InMemorySnapshotCache();
      const src = new DirectoryConfigSource({ dir, cache, rescanIntervalMs: 0 });
      const rejected: string[] = [];
      src.on('rejected', (e) => rejected.push(e.error));
      t.same(await src.rescan(), ['*'], `${what}: the folder source refuses it`);
      t.ok(rejected[0]?.endsWith(message!), rejected[0]);
      t.equal(cache.getSnapshot('any'), undefined, 'nothing is served');
    }
  },
);

/** A started source without fs.watch and without the periodic rescan: every read is the test's. */
async function manualSource(t: { teardown(fn: () => unknown): void }, dir: string, rereadDelayMs: number) {
  const cache = new InMemorySnapshotCache();
  const src = new DirectoryConfigSource({
    dir,
    cache,
    rescanIntervalMs: 0,
    rereadDelayMs,
    rereadAttempts: 3,
  });
  (src as any).watchDirs = () => {};
  t.teardown(() => src.close());
  const loaded: number[] = [];
  const rejected: string[] = [];
  src.on('loaded', (e) => loaded.push(e.resources));
  src.on('rejected', (e) => rejected.push(e.error));
  await src.start();
  return { cache, src, loaded, rejected };
}

const version = (cache: InMemorySnapshotCache) =>
  cache.getSnapshot('any')?.resourceSet(RATELIMIT_CONFIG_TYPE_URL).version;

t.test('a truncated file is read again, then rejected; the last good snapshot keeps serving', async (t) => {
  const dir = tempDir(t);
  put(dir, 'example.yaml', plain('example', 1));
  const { cache, src, loaded, rejected } = await manualSource(t, dir, 50);
  const good = version(cache);
  t.same(names(cache, 'any'), ['example.yaml']);
  let rereads = 0;
  src.on('reread', () => rereads++);
  const registry = new Registry();
  registerSourceMetrics(src, { registry });
  const gotRejected = until<{ error: string }>(src, 'rejected', 20_000);
  writeFileSync(join(dir, 'example.yaml'), '');
  await src.rescan();
  const [r] = await gotRejected;
  t.equal(rereads, 3, 'read three more times before it is rejected');
  t.match(r.error, 'example.yaml: domain: config file cannot have empty domain');
  t.same(rejected.length, 1);
  t.equal(version(cache), good, 'the last good snapshot still serves');
  t.same(loaded, [1], 'the empty file was never loaded');
  const metrics = await registry.metrics();
  t.match(metrics, /ratelimit_control_plane_config_rejected_total\{node_id="\*"\} 1\n/);
  t.match(metrics, /ratelimit_control_plane_config_reread_total\{node_id="\*"\} 3\n/);
  t.match(metrics, /ratelimit_control_plane_config_rejected\{node_id="\*"\} 1\n/);
});

t.test(
  'truncate, then write within the settle pause: the new content is served, never the empty one',
  async (t) => {
    const dir = tempDir(t);
    put(dir, 'example.yaml', plain('example', 1));
    const { cache, src, loaded, rejected } = await manualSource(t, dir, 300);
    const served = until(src, 'loaded', 20_000);
    // An editor's save: truncate, (a read catches the empty file), then the new text.
    writeFileSync(join(dir, 'example.yaml'), '');
    await src.rescan();
    t.equal(names(cache, 'any').length, 1, 'while empty on disk, the last good snapshot serves');
    writeFileSync(join(dir, 'example.yaml'), plain('example', 7));
    await served;
    const a = cache.getSnapshot('any')!.resourceSet(RATELIMIT_CONFIG_TYPE_URL).resources[0];
    t.equal(
      decodeRateLimitConfig(a.value).descriptors[0].rateLimit?.requestsPerUnit,
      7,
      'the new content serves',
    );
    t.same(loaded, [1, 1], 'every load had the domain');
    t.same(rejected, [], 'nothing was rejected');
  },
);
