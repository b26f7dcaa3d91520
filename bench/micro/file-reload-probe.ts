// A file reload of the 10k-descriptor config, outside the harness: the built service (or another
// build's bin, for an A/B) pinned to core 1 with BACKEND_TYPE=memory and loop-probe-preload.mjs; the
// file is renamed into the watched directory three times; per reload: time until the new version serves
// (probe polled every 10 ms), the main thread's longest event-loop stall from the write until then
// (+200 ms), and in the second before the write (control).
//   node --import tsx bench/micro/file-reload-probe.ts [path/to/bin/ratelimit.js]
import { mkdirSync, readFileSync, writeFileSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { rateLimitServiceDefinition } from '../../proto/index.js';
import { builtBin, REPO_ROOT } from '../../harness/dist.js';
import { freePort, LOOPBACK, ServerProcess, waitForPort } from '../../harness/net.js';
import { longestStall } from '../harness/loop-probe.js';
import { cfg10kYaml } from '../../harness/fixtures.js';
const bin = process.argv[2] ?? builtBin('ratelimit');
const out = `/tmp/reload-prof/file-${Date.now()}`;
mkdirSync(join(out, 'rt', 'ratelimit', 'config'), { recursive: true });
mkdirSync(join(out, 'staging'));
const write = (v: number) => {
  writeFileSync(join(out, 'staging', 'c.yaml'), cfg10kYaml(v));
  renameSync(join(out, 'staging', 'c.yaml'), join(out, 'rt', 'ratelimit', 'config', 'c.yaml'));
};
write(0);
const [g, h, d] = [await freePort(), await freePort(), await freePort()];
const probe = join(out, 'probe.txt');
const proc = new ServerProcess(
  'f',
  'taskset',
  ['-c', '1', process.execPath, '--import', join(REPO_ROOT, 'bench/harness/loop-probe-preload.mjs'), bin],
  {
    logPath: join(out, 'log'),
    cwd: REPO_ROOT,
    env: {
      ...process.env,
      BACKEND_TYPE: 'memory',
      USE_STATSD: 'false',
      LOG_LEVEL: 'warn',
      RUNTIME_ROOT: join(out, 'rt'),
      RUNTIME_SUBDIRECTORY: 'ratelimit',
      RUNTIME_WATCH_ROOT: 'false',
      HOST: LOOPBACK,
      PORT: String(h),
      GRPC_HOST: LOOPBACK,
      GRPC_PORT: String(g),
      DEBUG_HOST: LOOPBACK,
      DEBUG_PORT: String(d),
      BENCH_LOOP_PROBE: probe,
    },
  },
);
await waitForPort(g, { deadlineMs: 60000 });
const C = grpc.makeGenericClientConstructor(rateLimitServiceDefinition(), 'S');
const c = new C(`${LOOPBACK}:${g}`, grpc.credentials.createInsecure()) as unknown as {
  ShouldRateLimit(req: unknown, cb: (e: unknown, res: { overallCode: string }) => void): void;
  close(): void;
};
const serves = (v: number) =>
  new Promise<boolean>((r) =>
    c.ShouldRateLimit(
      {
        domain: 'bench_cfg10k',
        descriptors: [{ entries: [{ key: 'probe', value: `v${v}` }] }],
        hitsAddend: 0,
      },
      (e, res) => r(!e && res.overallCode === 'OVER_LIMIT'),
    ),
  );
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
while (!(await serves(0))) await sleep(50);
for (let v = 1; v <= 3; v++) {
  await sleep(1200);
  const t0 = Date.now();
  write(v);
  while (!(await serves(v))) await sleep(10);
  const t1 = Date.now();
  await sleep(1500);
  const p = readFileSync(probe, 'utf8');
  console.log(
    `served ${t1 - t0} ms, stall ${longestStall(p, t0, t1 + 200)} ms, control ${longestStall(p, t0 - 1000, t0 - 100)} ms`,
  );
}
c.close();
await proc.stop();
