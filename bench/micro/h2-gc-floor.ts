// What node:http2 costs the garbage collector (and the CPU) per unary gRPC call, against the HTTP/2 layer
// of our own (h2grpc/h2/, from dist/: build first), against @grpc/grpc-js' server (on node:http2), and
// against bare HTTP/2 frames handled in JavaScript on a plain socket (the floor: no header decoding, no
// stream state). All four answer the load generator's
// calls with the same bytes; each runs pinned to core 0 with the GC setting the chart ships and --trace-gc-nvp, the generator on
// core 1, interleaved rounds. Per server and request header count it reports the bytes each call
// promotes to the old generation, the major GCs (mark-compact) per 10k calls, their pauses, and the part
// of each pause spent clearing V8's external string table. The source of the "major GC floor" figures
// in docs/performance.md and docs/decisions/004-gc-settings.md and 006-http2-layer.md.
// Run: npm run build && node --import tsx bench/micro/h2-gc-floor.ts [rounds] [rate]
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';
import { freePort, waitForPort } from '../../harness/net.js';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');
const rounds = Number(process.argv[2] ?? 2);
const rate = Number(process.argv[3] ?? 2000);
const WARMUP_MS = 2000;
const DURATION_MS = 8000;
const GC_FLAGS = ['--max-semi-space-size=4', '--single-threaded-gc'];
const SERVERS = ['node-http2', 'grpc-js', 'builtin', 'frames'] as const;
const EXTRA_HEADERS = [0, 12];

function run(cmd: string, args: string[], env: NodeJS.ProcessEnv = process.env): Promise<string> {
  return new Promise((resolve, reject) => {
    const p = spawn(cmd, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    p.stdout.on('data', (d: Buffer) => (out += d.toString()));
    p.stderr.on('data', (d: Buffer) => (out += d.toString()));
    p.on('error', reject);
    p.on('close', () => resolve(out));
  });
}

interface Sample {
  promotedPerCall: number;
  majorPer10k: number;
  pauses: number[];
  externalStrings: number[];
  p99Us: number;
  /** CPU time of the server process per call, warm-up included (µs). */
  cpuPerCallUs: number;
}

/** User + system CPU of a process so far (ms), from /proc. */
function cpuMs(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return ((Number(f[11]) + Number(f[12])) * 1000) / 100;
}

const field = (line: string, name: string) => Number(line.match(new RegExp(` ${name}=([0-9.]+)`))?.[1] ?? 0);

async function sample(server: (typeof SERVERS)[number], extraHeaders: number): Promise<Sample> {
  const port = await freePort();
  const script = join(here, 'h2-gc-floor', `${server}.mjs`);
  const proc = spawn('taskset', ['-c', '0', process.execPath, ...GC_FLAGS, '--trace-gc-nvp', script], {
    env: { ...process.env, PORT: String(port) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let log = '';
  proc.stdout.on('data', (d: Buffer) => (log += d.toString()));
  await waitForPort(port, { deadlineMs: 30_000 });
  const spec = {
    target: `127.0.0.1:${port}`,
    workload: 'hot',
    seed: 1,
    mode: 'open',
    connections: 2,
    rate,
    warmupMs: WARMUP_MS,
    durationMs: DURATION_MS,
    extraHeaders,
  };
  const cpuBefore = cpuMs(proc.pid!);
  const out = await run('taskset', [
    '-c',
    '1',
    process.execPath,
    '--import',
    'tsx',
    join(root, 'bench', 'load', 'loadgen.ts'),
    JSON.stringify(spec),
  ]);
  const cpuUsed = cpuMs(proc.pid!) - cpuBefore;
  proc.kill();
  await new Promise((r) => proc.once('close', r));
  const result = JSON.parse(out.trim().split('\n').pop()!) as { errors: number; latency: { p99Us: number } };
  if (result.errors > 0) throw new Error(`${server}: ${result.errors} calls failed`);
  const lines = log.split('\n');
  const calls = (rate * (WARMUP_MS + DURATION_MS)) / 1000;
  const promoted = lines.filter((l) => l.includes(' gc=s ')).reduce((a, l) => a + field(l, 'promoted'), 0);
  const major = lines.filter((l) => l.includes(' gc=mc '));
  return {
    promotedPerCall: promoted / calls,
    majorPer10k: (major.length * 10_000) / calls,
    pauses: major.map((l) => field(l, 'pause')),
    externalStrings: major.map((l) => field(l, 'clear.external_string_table')),
    p99Us: result.latency.p99Us,
    cpuPerCallUs: (cpuUsed * 1000) / calls,
  };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
/** `median / max` of the pauses, or "none" when there was no major GC. */
const spread = (xs: number[]) =>
  xs.length ? `${median(xs).toFixed(1)} / ${Math.max(...xs).toFixed(1)}` : 'none';
const samples = new Map<string, Sample[]>();
for (let r = 0; r < rounds; r++) {
  for (const extra of EXTRA_HEADERS) {
    for (const server of SERVERS) {
      const key = `${server}, ${6 + extra} request headers`;
      const s = await sample(server, extra);
      (samples.get(key) ?? samples.set(key, []).get(key)!).push(s);
      process.stderr.write(`[h2-gc-floor] round ${r + 1} ${key}: ${JSON.stringify(s)}\n`);
    }
  }
}
console.log(
  `\n${rate} calls/s, ${rounds} rounds of ${DURATION_MS / 1000} s (+${WARMUP_MS / 1000} s warm-up), ${GC_FLAGS.join(' ')}\n`,
);
console.log(
  '| server | CPU per call (µs) | promoted per call (B) | major GCs per 10k calls | major GC pause median / max (ms) | of which external strings, median / max (ms) |',
);
console.log('|---|---|---|---|---|---|');
for (const [key, ss] of samples) {
  const pauses = ss.flatMap((s) => s.pauses);
  const ext = ss.flatMap((s) => s.externalStrings);
  console.log(
    `| ${key} | ${median(ss.map((s) => s.cpuPerCallUs)).toFixed(0)} | ${median(ss.map((s) => s.promotedPerCall)).toFixed(0)} | ${median(ss.map((s) => s.majorPer10k)).toFixed(1)} | ${spread(pauses)} | ${spread(ext)} |`,
  );
}
