// What the built service loads at start with default settings and a small config: none of the packages
// that only some settings need (they load on use), checked on the process itself through a module hook
// (harness/loaded-packages-preload.mjs). Default settings except where the test must say where
// (ports, the config directory, Redis).
import t from 'tap';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { registerHooks } from 'node:module';
import { BenchService, RuntimeDir } from '../bench/harness/services.js';
import { startRedis } from '../harness/redis/index.js';
import { REPO_ROOT } from '../harness/dist.js';
import { eventually } from './test-support.js';

/** Loaded only when a setting or a request needs them. */
const LAZY = [
  'fastify', // the HTTP and debug listeners' routes (GET /healthcheck is answered without it)
  '@grpc/grpc-js', // the xDS client (CONFIG_TYPE=GRPC_XDS_*)
  '@grpc/proto-loader', // protobufjs' codecs: responses the hand-written encoder leaves, RLQS, xDS
  'protobufjs',
  '@opentelemetry/api', // TRACING_ENABLED (and prom-client)
  '@opentelemetry/sdk-trace',
  'prom-client', // USE_PROMETHEUS
  'ajv', // the config validator, on the parse worker
  'yaml', // the YAML reader, on the parse worker
  'js-yaml',
];

t.test(
  'a default start loads none of the packages that load on use',
  { skip: !registerHooks && 'needs module.registerHooks (Node.js 22.15+)' },
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'rl-startup-modules-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    const redis = await startRedis({ args: ['--save', '', '--appendonly', 'no'] });
    t.teardown(() => redis.stop());
    const runtime = new RuntimeDir(join(dir, 'runtime'));
    runtime.write(
      'd.yaml',
      'domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: minute, requests_per_unit: 5}}\n',
    );
    const listFile = join(dir, 'packages.txt');
    const svc = await BenchService.start({
      kind: 'ours',
      runtime,
      redisUrl: redis.url,
      cpus: `0-${availableParallelism() - 1}`,
      logDir: dir,
      localCacheBytes: 0,
      nodeArgs: ['--import', join(REPO_ROOT, 'harness', 'loaded-packages-preload.mjs')],
      env: { LOADED_PACKAGES_FILE: listFile, USE_STATSD: 'true' },
    });
    t.teardown(() => svc.stop());
    const loaded = async (): Promise<string[]> => {
      rmSync(listFile, { force: true });
      process.kill(svc.pid, 'SIGUSR2');
      await eventually(() => existsSync(listFile), 10_000, 'the list of loaded packages');
      return readFileSync(listFile, 'utf8').split('\n').filter(Boolean);
    };

    const r = await svc.call({ domain: 'd', descriptors: [[['k', 'v']]], hitsAddend: 1 }, 30_000);
    t.equal(r.statuses[0]?.currentLimit?.requestsPerUnit, 5, 'the first answer applies the config');
    t.equal((await fetch(`http://127.0.0.1:${svc.httpPort}/healthcheck`)).status, 200, 'the readiness probe');
    const atStart = await loaded();
    t.ok(atStart.includes('ioredis'), 'the configured backend is loaded (the hook sees CommonJS packages)');
    t.same(
      LAZY.filter((p) => atStart.includes(p)),
      [],
      `none of the packages that load on use (loaded: ${atStart.join(', ')})`,
    );

    // What loads on use does load then: a request to the HTTP listener other than the probe.
    t.equal((await fetch(`http://127.0.0.1:${svc.httpPort}/nothing`)).status, 404);
    t.ok((await loaded()).includes('fastify'), 'fastify loads with the first request it answers');
  },
);
