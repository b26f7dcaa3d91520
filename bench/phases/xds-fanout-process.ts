// xDS fan-out benchmark, two processes:
//   server  — our AdsServer with an InMemorySnapshotCache; waits until every client runs the first version,
//             then publishes `changes` new versions and reports, per change, the time until the 1st, 50th
//             and last client ACKed it. Prints one JSON line.
//   clients — `n` XdsConfigClients (the service's own xDS client, compiling each config as the service
//             does) against the server.
//   node --import tsx bench/phases/xds-fanout-process.ts server <clients> <changes>
//   node --import tsx bench/phases/xds-fanout-process.ts clients <port> <clients>
import { importBuilt } from '../../harness/dist.js';
import type { XdsConfigClient } from '../../ratelimit/sources/index.js';
import type { XdsResult } from '../report/results.js';

// The measured code is the build's (dist/), typed by its sources.
const { AdsServer, InMemorySnapshotCache, resourceFromDocument } =
  await importBuilt<typeof import('../../control-plane/index.js')>('control-plane/index');
const { RATELIMIT_CONFIG_TYPE_URL } = await importBuilt<typeof import('../../proto/index.js')>('proto/index');
const { compileConfig } =
  await importBuilt<typeof import('../../ratelimit/config/index.js')>('ratelimit/config/index');
const { XdsConfigClient: BuiltXdsConfigClient } =
  await importBuilt<typeof import('../../ratelimit/sources/index.js')>('ratelimit/sources/index');

function doc(version: number, descriptors: number): unknown {
  const d: unknown[] = [];
  for (let i = 0; i < descriptors; i++)
    d.push({
      key: 'tenant',
      value: `t${i}`,
      rate_limit: { unit: 'minute', requests_per_unit: 1000 + version },
    });
  return { domain: 'xds_bench', descriptors: d };
}

async function server(clients: number, changes: number, descriptors: number): Promise<void> {
  const cache = new InMemorySnapshotCache();
  const publish = (v: number) =>
    cache
      .setDefaultSnapshot([resourceFromDocument('xds_bench', doc(v, descriptors))])
      .resourceSet(RATELIMIT_CONFIG_TYPE_URL).version;
  let version = publish(0);
  const ads = new AdsServer({ cache, listen: '127.0.0.1:0' });
  await ads.start();
  let acked = 0;
  let onAck: (() => void) | undefined;
  ads.on('ack', (e) => {
    if (e.version === version) {
      acked++;
      onAck?.();
    }
  });
  process.stdout.write(`PORT ${ads.port}\n`);
  const waitFor = (n: number, timeoutMs: number) =>
    new Promise<void>((resolve, reject) => {
      if (acked >= n) return resolve();
      const t = setTimeout(
        () => reject(new Error(`only ${acked} of ${n} clients ACKed ${version}`)),
        timeoutMs,
      );
      onAck = () => {
        if (acked >= n) {
          clearTimeout(t);
          onAck = undefined;
          resolve();
        }
      };
    });
  await waitFor(clients, 120_000);
  const milestones = [1, 50, clients].filter((m, i, a) => m <= clients && a.indexOf(m) === i);
  const result: XdsResult = { clients, descriptors, changes: [], milestones };
  for (let c = 1; c <= changes; c++) {
    await new Promise((r) => setTimeout(r, 300));
    acked = 0;
    const ms: Record<string, number> = {};
    const t0 = performance.now();
    let m = 0;
    onAck = () => {
      while (m < milestones.length && acked >= milestones[m])
        ms[String(milestones[m++])] = performance.now() - t0;
    };
    version = publish(c);
    const deadline = Date.now() + 60_000;
    while (m < milestones.length && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
    onAck = undefined;
    result.changes.push({ ms });
  }
  process.stdout.write(JSON.stringify(result) + '\n');
  await ads.close();
  process.exit(0);
}

async function runClients(port: number, n: number): Promise<void> {
  const clients: XdsConfigClient[] = [];
  for (let i = 0; i < n; i++) {
    const c = new BuiltXdsConfigClient({
      nodeId: `bench-${i}`,
      serverUrl: `127.0.0.1:${port}`,
      onConfig: (documents) => {
        try {
          compileConfig(documents);
          return undefined;
        } catch (err) {
          return (err as Error).message;
        }
      },
    });
    c.start();
    clients.push(c);
  }
  process.on('SIGTERM', () => {
    void Promise.all(clients.map((c) => c.close())).then(() => process.exit(0));
  });
}

const [mode, a, b, c] = process.argv.slice(2);
if (mode === 'server') void server(Number(a), Number(b), Number(c ?? 100));
else if (mode === 'clients') void runClients(Number(a), Number(b));
else {
  process.stderr.write(
    'usage: xds-bench.ts server <clients> <changes> [descriptors] | clients <port> <clients>\n',
  );
  process.exit(2);
}
