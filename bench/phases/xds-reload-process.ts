// xDS reload benchmark (ours only; the reference reads xDS too, but our control plane feeds it here):
// the built service (dist/, pinned to one core, BACKEND_TYPE=memory, loop-probe-preload.mjs loaded)
// takes its config from our AdsServer in this process. Each round pushes the 10k-descriptor config of the
// reload workload (cfg10kYaml, a new probe version each time) and reports the time until the new
// version serves (polled every 10 ms with the probe descriptor only that version limits), the main
// thread's longest event-loop stall from the push until then (+200 ms), and the longest stall in the
// second before the push (the control: the machine's own noise floor).
//   measureXdsReload({ outDir }) from the harness, or:
//   node --import tsx bench/phases/xds-reload-process.ts [rounds] [--service-bin=<bin/ratelimit.js of another build>]
//     [--node-flags="--max-semi-space-size=4 --single-threaded-gc"] (node / V8 flags of the service)
//     [--cpus=0,1] (the service's cores, default 1: with two, its parse worker has a core of its own)
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import type { WireRateLimitRequest, WireRateLimitResponse } from '../../proto/index.js';
import { builtBin, importBuilt, REPO_ROOT } from '../../harness/dist.js';
import { freePort, LOOPBACK, quietListenEnv, ServerProcess, waitForPort } from '../../harness/net.js';
import { longestStall } from '../harness/loop-probe.js';
import { cfg10kYaml } from '../../harness/fixtures.js';

export interface XdsReloadOptions {
  /** Where the service's log and the loop probe's file go. */
  outDir: string;
  /** Pushes measured (default 5). */
  rounds?: number;
  /** taskset list of the service's core (default '1'). */
  cpus?: string;
  /** The service's bin (default: this tree's bin/ratelimit.js); another build's for an A/B. */
  serviceBin?: string;
  /** Node / V8 flags of the service (the bench's --ours-node-flags and --trace-gc). */
  nodeFlags?: readonly string[];
}

export interface XdsReloadRound {
  /** From the push (setSnapshot) until the new version answers (ms). */
  appliedMs: number;
  /** Longest main-thread event-loop stall from the push until applied + 200 ms (ms). */
  stallMs: number;
  /** Longest stall in the second before the push (ms). */
  controlStallMs: number;
}

export interface XdsReloadResult {
  descriptors: number;
  rounds: XdsReloadRound[];
}

const DOMAIN = 'bench_cfg10k';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function measureXdsReload(o: XdsReloadOptions): Promise<XdsReloadResult> {
  const { AdsServer, InMemorySnapshotCache, resourceFromDocument } =
    await importBuilt<typeof import('../../control-plane/index.js')>('control-plane/index');
  const { parseYamlSource } =
    await importBuilt<typeof import('../../ratelimit/config/index.js')>('ratelimit/config/index');
  const { rateLimitServiceDefinition } =
    await importBuilt<typeof import('../../proto/index.js')>('proto/index');
  mkdirSync(o.outDir, { recursive: true });
  const probeFile = join(o.outDir, 'ours-xds-event-loop.txt');
  const docOf = (version: number) =>
    parseYamlSource({ name: 'bench_cfg10k.yaml', yaml: cfg10kYaml(version) });
  const resourceOf = (version: number) => resourceFromDocument('bench_cfg10k', docOf(version));

  const cache = new InMemorySnapshotCache();
  cache.setDefaultSnapshot([resourceOf(0)]);
  const ads = new AdsServer({ cache, listen: `${LOOPBACK}:0` });
  await ads.start();
  const [grpcPort, httpPort, debugPort] = [await freePort(), await freePort(), await freePort()];
  const proc = new ServerProcess(
    'ours-xds',
    'taskset',
    [
      '-c',
      o.cpus ?? '1',
      process.execPath,
      ...(o.nodeFlags ?? []),
      '--import',
      join(REPO_ROOT, 'bench', 'harness', 'loop-probe-preload.mjs'),
      o.serviceBin ?? builtBin('ratelimit'),
    ],
    {
      logPath: join(o.outDir, 'ours-xds.log'),
      cwd: REPO_ROOT,
      env: {
        ...process.env,
        CONFIG_TYPE: 'GRPC_XDS_SOTW',
        CONFIG_GRPC_XDS_SERVER_URL: `${LOOPBACK}:${ads.port}`,
        CONFIG_GRPC_XDS_NODE_ID: 'bench-pod',
        BACKEND_TYPE: 'memory',
        ...quietListenEnv(grpcPort, httpPort, debugPort),
        BENCH_LOOP_PROBE: probeFile,
      },
    },
  );
  const Ctor = grpc.makeGenericClientConstructor(rateLimitServiceDefinition(), 'RateLimitService');
  const client = new Ctor(`${LOOPBACK}:${grpcPort}`, grpc.credentials.createInsecure()) as unknown as {
    ShouldRateLimit(
      req: WireRateLimitRequest,
      opts: grpc.CallOptions,
      cb: (err: grpc.ServiceError | null, res: WireRateLimitResponse) => void,
    ): void;
    close(): void;
  };
  /** True once the probe of `version` is limited (limit 0): that version serves. */
  const serves = (version: number) =>
    new Promise<boolean>((resolve) =>
      client.ShouldRateLimit(
        {
          domain: DOMAIN,
          descriptors: [{ entries: [{ key: 'probe', value: `v${version}` }] }],
          hitsAddend: 0,
        },
        { deadline: Date.now() + 5000 },
        (err, res) => resolve(!err && res.overallCode === 'OVER_LIMIT'),
      ),
    );
  const until = async (version: number, deadlineMs: number): Promise<number> => {
    const started = Date.now();
    while (Date.now() - started < deadlineMs) {
      if (await serves(version)) return Date.now();
      await sleep(10);
    }
    throw new Error(`version ${version} did not serve within ${deadlineMs} ms\n${proc.logTail()}`);
  };
  try {
    await waitForPort(grpcPort, {
      deadlineMs: 60_000,
      what: 'ours-xds gRPC listener',
      abort: () => proc.exitReason(),
      context: () => proc.logTail(),
    });
    await until(0, 60_000);
    const rounds: XdsReloadRound[] = [];
    for (let r = 1; r <= (o.rounds ?? 5); r++) {
      // A quiet second (probed every 10 ms, as during the reload) is the control.
      const resource = resourceOf(r);
      await sleep(1200);
      const pushed = Date.now();
      cache.setDefaultSnapshot([resource]);
      const applied = await until(r, 30_000);
      // The probe writes its 100 ms windows once a second.
      await sleep(1500);
      const probe = readFileSync(probeFile, 'utf8');
      rounds.push({
        appliedMs: applied - pushed,
        stallMs: longestStall(probe, pushed, applied + 200),
        controlStallMs: longestStall(probe, pushed - 1000, pushed - 100),
      });
    }
    return { descriptors: 10_001, rounds };
  } finally {
    client.close();
    await proc.stop(10_000);
    await ads.close();
  }
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop()!)) {
  const rounds = Number(process.argv.find((a) => /^\d+$/.test(a)) ?? 5);
  const serviceBin = process.argv.find((a) => a.startsWith('--service-bin='))?.slice('--service-bin='.length);
  const outDir = join(REPO_ROOT, 'bench-results', `xds-reload-${Date.now()}`);
  const flags = process.argv.find((a) => a.startsWith('--node-flags='))?.slice('--node-flags='.length);
  const nodeFlags = flags?.split(' ').filter((f) => f !== '');
  const cpus = process.argv.find((a) => a.startsWith('--cpus='))?.slice('--cpus='.length);
  const result = await measureXdsReload({ outDir, rounds, serviceBin, nodeFlags, cpus });
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const col = (k: keyof XdsReloadRound) => {
    const xs = result.rounds.map((x) => x[k]);
    return `${median(xs).toFixed(1)} (${Math.min(...xs).toFixed(1)}-${Math.max(...xs).toFixed(1)})`;
  };
  console.log(JSON.stringify(result));
  console.log(
    `applied ms ${col('appliedMs')} | stall ms ${col('stallMs')} | control stall ms ${col('controlStallMs')}`,
  );
}
