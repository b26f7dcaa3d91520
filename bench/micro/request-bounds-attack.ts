// Measures what one hostile request costs the built service (docs/decisions/003-request-bounds.md):
// the attacks of oversized requests are sent to a started bin/ratelimit.js while a victim sends
// ordinary requests one after another; printed per attack are the answers, the victim's worst latency
// during it (how long the event loop was held) and the service's peak RSS (VmHWM). Not a test: the
// figures depend on the machine. Run against this build, or another one's bin to compare:
//   node --import tsx bench/micro/request-bounds-attack.ts [path/to/bin/ratelimit.js]
import * as grpc from '@grpc/grpc-js';
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { gzipSync } from 'node:zlib';
import { SHOULD_RATE_LIMIT_PATH } from '../../proto/index.js';
import { builtBin } from '../../harness/dist.js';
import {
  freePort,
  LOOPBACK,
  loopbackListenEnv,
  makeTempDir,
  removeTempDir,
  ServerProcess,
  waitForPort,
} from '../../harness/net.js';
import { compressedCall } from '../../harness/grpc-raw.js';

const bin = process.argv[2] ?? builtBin('ratelimit');

function varint(n: number): Buffer {
  const out: number[] = [];
  while (n >= 0x80) {
    out.push((n & 0x7f) | 0x80);
    n = Math.floor(n / 128);
  }
  out.push(n);
  return Buffer.from(out);
}
const ld = (field: number, b: Buffer) =>
  Buffer.concat([Buffer.from([(field << 3) | 2]), varint(b.length), b]);
const str = (field: number, s: string) => ld(field, Buffer.from(s));
const entry = (k: string, v: string) => ld(1, Buffer.concat([str(1, k), str(2, v)]));
/** `n` descriptors of one entry k=<11 bytes>: 20 bytes each, 200,000 of them ~4 MB. */
const manyDescriptors = (n: number) =>
  Buffer.concat([str(1, 'd'), ...Array<Buffer>(n).fill(ld(2, entry('k', 'v'.repeat(11))))]);
/** One descriptor, then ~`bytes` of 2-byte unknown varint fields (field 15) for the decoder to walk. */
const unknownFields = (bytes: number) =>
  Buffer.concat([str(1, 'd'), ld(2, entry('k', 'v')), Buffer.alloc(bytes, Buffer.from([0x78, 0x01]))]);
/** One descriptor whose `limit` field repeats ~bytes/2 times (each empty): merged one after another. */
const repeatedLimit = (bytes: number) =>
  Buffer.concat([
    str(1, 'd'),
    ld(2, Buffer.concat([entry('k', 'v'), Buffer.alloc(bytes, Buffer.from([0x12, 0x00]))])),
  ]);
const victimRequest = Buffer.concat([str(1, 'd'), ld(2, entry('victim', 'x'))]);

const root = makeTempDir('rl-bounds-bench-');
mkdirSync(join(root, 'config'));
writeFileSync(
  join(root, 'config', 'd.yaml'),
  'domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: minute, requests_per_unit: 1000000 }\n' +
    '  - key: victim\n    rate_limit: { unit: minute, requests_per_unit: 100000000 }\n',
);
const [grpcPort, httpPort, debugPort] = [await freePort(), await freePort(), await freePort()];
const server = new ServerProcess('ratelimit', process.execPath, [bin], {
  logPath: join(root, 'ratelimit.log'),
  env: {
    ...process.env,
    ...loopbackListenEnv(grpcPort, httpPort, debugPort),
    RUNTIME_ROOT: root,
    RUNTIME_APPDIRECTORY: 'config',
    RUNTIME_WATCH_ROOT: 'false',
    BACKEND_TYPE: 'memory',
    USE_STATSD: 'false',
    LOG_LEVEL: 'error',
  },
});
try {
  await waitForPort(grpcPort, { deadlineMs: 60_000 });
  await waitForPort(httpPort, { deadlineMs: 60_000 });
  const address = `${LOOPBACK}:${grpcPort}`;
  const attacker = new grpc.Client(address, grpc.credentials.createInsecure(), {
    'grpc.max_send_message_length': -1,
  });
  const call = (client: grpc.Client, bytes: Buffer) =>
    new Promise<string>((resolve) =>
      client.makeUnaryRequest(
        SHOULD_RATE_LIMIT_PATH,
        (b: Buffer) => b,
        (b: Buffer) => b,
        bytes,
        (err) => resolve(err ? `${grpc.status[err.code]}: ${err.details.slice(0, 90)}` : 'OK'),
      ),
    );
  const hwmMb = () => {
    const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${server.pid}/status`, 'utf8'));
    return Math.round(Number(m?.[1] ?? 0) / 1024);
  };
  const victim = new Worker(new URL('./request-bounds-victim.ts', import.meta.url), {
    workerData: { address, request: victimRequest },
  });
  const report = (m: string) =>
    new Promise<{ worst: number; calls: number }>((resolve) => {
      victim.once('message', resolve);
      victim.postMessage(m);
    });
  await new Promise((r) => setTimeout(r, 2000)); // warm up
  const quiet = await report('reset');

  /** Runs `attack` while the victim calls in a loop; the victim's worst latency during it. */
  async function phase(name: string, attack: () => Promise<string[]>): Promise<void> {
    await report('reset');
    const t0 = performance.now();
    const answers = await attack();
    const took = performance.now() - t0;
    const { worst, calls } = await report('reset');
    const distinct = [...new Set(answers)].map((a) => `${answers.filter((x) => x === a).length}x ${a}`);
    console.log(
      `${name}\n  answers: ${distinct.join(' | ')}\n  attack took ${took.toFixed(1)} ms; victim: ${calls} calls, ` +
        `worst ${worst.toFixed(1)} ms; service peak RSS ${hwmMb()} MB`,
    );
  }

  console.log(`victim alone for 2 s: ${quiet.calls} calls, worst ${quiet.worst.toFixed(1)} ms`);
  console.log(`bin: ${bin}; service peak RSS after warm-up ${hwmMb()} MB`);
  const big = manyDescriptors(200_000);
  await phase(`gRPC, ${big.length} bytes, 200,000 descriptors`, async () => [await call(attacker, big)]);
  const bomb = gzipSync(manyDescriptors(190_000), { level: 9 });
  await phase(`gRPC gzip, ${bomb.length} bytes compressed, 190,000 descriptors inflated, 4 at once`, () =>
    Promise.all(
      Array.from({ length: 4 }, async () => {
        const r = await compressedCall(address, 'gzip', bomb);
        return r.code === 0 ? 'OK' : `${r.code}: ${r.details.slice(0, 90)}`;
      }),
    ),
  );
  const unknown = unknownFields(4_000_000);
  await phase(`gRPC, ${unknown.length} bytes, 2,000,000 unknown fields`, async () => [
    await call(attacker, unknown),
  ]);
  const limits = repeatedLimit(4_000_000);
  await phase(`gRPC, ${limits.length} bytes, one descriptor's limit repeated 2,000,000 times`, async () => [
    await call(attacker, limits),
  ]);
  const json = JSON.stringify({
    domain: 'd',
    descriptors: Array.from({ length: 17_000 }, () => ({ entries: [{ key: 'k', value: 'v'.repeat(20) }] })),
  });
  await phase(`/json, ${json.length} bytes, 17,000 descriptors (application/json)`, async () => {
    const res = await fetch(`http://${LOOPBACK}:${httpPort}/json`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: json,
    });
    return [`${res.status}: ${(await res.text()).slice(0, 90)}`];
  });
  await report('stop');
  await victim.terminate();
  attacker.close();
} finally {
  await server.stop();
  removeTempDir(root);
}
