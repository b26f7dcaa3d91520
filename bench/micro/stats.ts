// Micro-benchmark: what statistics and tracing cost on the decision path. In-process, no
// network on the request side: ShouldRateLimit calls for a fixed time through RateLimitService
// with the memory store, as the gRPC handler makes them (total_requests counter and
// response_time timer per call, and the tracing wrapper when enabled). Each (variant, round)
// runs in a fresh process (warm-up, then one measured run), rounds interleave the variants,
// medians are reported. Fresh processes keep variants from affecting each other: e.g.
// AsyncLocalStorage, once used by tracing, slows every promise of the process on Node 20.
//
//   npx tsx bench/micro/stats.ts [--seconds 3] [--rounds 5] [--concurrency 64] [--flush-ms 1000]
//
// It is a micro-benchmark: it isolates the in-process cost and says nothing about end-to-end
// throughput with Redis, gRPC framing or the network (that is the e2e benchmark harness's job).
import { execFileSync } from 'node:child_process';
import { createSocket } from 'node:dgram';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import { loadConfig } from '../../ratelimit/config/index.js';
import { Limiter } from '../../ratelimit/limiter/index.js';
import { createLogger } from '../../common/index.js';
import { MemoryCounterStore } from '../../ratelimit/memory/index.js';
import type { WireRateLimitRequest } from '../../proto/index.js';
import { RateLimitService } from '../../ratelimit/service/index.js';
import { loadSettings, type Settings } from '../../ratelimit/settings/index.js';
import { loadTracing, type RateLimitTracing } from '../../ratelimit/tracing/index.js';
import {
  Counter,
  createStatsPipeline,
  StatsStore,
  Timer,
  type StatsPipeline,
} from '../../ratelimit/stats/index.js';

const { values: args } = parseArgs({
  options: {
    seconds: { type: 'string', default: '3' },
    rounds: { type: 'string', default: '5' },
    variant: { type: 'string' },
    'udp-port': { type: 'string' },
    concurrency: { type: 'string', default: '64' },
    'flush-ms': { type: 'string', default: '1000' },
  },
});
const SECONDS = Number(args.seconds);
const ROUNDS = Number(args.rounds);
const CONCURRENCY = Number(args.concurrency);
const FLUSH_MS = Number(args['flush-ms']);

const CONFIG = `
domain: bench
descriptors:
  - key: user
    detailed_metric: true
    rate_limit: { unit: minute, requests_per_unit: 1000000000 }
  - key: route
    descriptors:
      - key: method
        rate_limit: { unit: second, requests_per_unit: 1000000000 }
`;

/** Counters and timers that count nothing: the "no statistics at all" floor. */
const NULL_COUNTER = new Counter('null');
const NULL_TIMER = new Timer('null');
NULL_COUNTER.inc = () => {};
NULL_TIMER.record = () => {};
class NullStatsStore extends StatsStore {
  override counter(): Counter {
    return NULL_COUNTER;
  }
  override timer(): Timer {
    return NULL_TIMER;
  }
}

interface Variant {
  stats: StatsStore;
  pipeline?: StatsPipeline;
  tracing?: RateLimitTracing;
  service: RateLimitService;
}

const logger = createLogger({ level: 'error' });

function settingsFor(env: Record<string, string>): Settings {
  return loadSettings({ STATS_FLUSH_INTERVAL: `${FLUSH_MS}ms`, ...env });
}

async function build(opts: {
  stats?: StatsStore;
  env?: Record<string, string>;
  tracing?: boolean;
  sampling?: string;
}): Promise<Variant> {
  const stats = opts.stats ?? new StatsStore();
  const settings = settingsFor({
    ...(opts.env ?? { DISABLE_STATS: 'true' }),
    ...(opts.tracing ? { TRACING_ENABLED: 'true', TRACING_SAMPLING_RATE: opts.sampling ?? '1' } : {}),
  });
  const pipeline = createStatsPipeline(settings.stats, { store: stats, logger });
  // Spans are built and batched as in production; the exporter drops them instead of sending.
  const tracing = await loadTracing(settings.tracing, {
    logger,
    exporter: { export: (_spans, done) => done({ code: 0 }), shutdown: async () => {} },
  });
  const store = new MemoryCounterStore();
  const limiter = new Limiter({
    store: tracing ? tracing.wrapStore(store, 'Memory Store Execution') : store,
    stats,
    nearLimitRatio: 0.8,
  });
  const service = new RateLimitService({ limiter, stats });
  service.setConfig(loadConfig([{ name: 'bench.yaml', yaml: CONFIG }]));
  return { stats, pipeline, tracing, service };
}

const requests: WireRateLimitRequest[] = [];
for (let i = 0; i < 1000; i++) {
  requests.push({
    domain: 'bench',
    descriptors: [
      { entries: [{ key: 'user', value: `u${i % 200}` }] },
      {
        entries: [
          { key: 'route', value: `/r${i % 10}` },
          { key: 'method', value: 'GET' },
        ],
      },
    ],
  });
}

/** What the gRPC handler does per call around the service (see server/grpc-server.ts). */
async function oneCall(v: Variant, req: WireRateLimitRequest): Promise<void> {
  const started = performance.now();
  v.stats.counter('ratelimit_server.ShouldRateLimit.total_requests').inc();
  if (v.tracing) await v.tracing.traceShouldRateLimit(undefined, req, () => v.service.shouldRateLimit(req));
  else await v.service.shouldRateLimit(req);
  v.stats.timer('ratelimit_server.ShouldRateLimit.response_time').record(performance.now() - started);
}

/** Runs calls for `seconds`; decisions per second of wall time and of this process's CPU time. */
async function round(v: Variant, seconds: number): Promise<{ wall: number; cpu: number }> {
  let calls = 0;
  const deadline = performance.now() + seconds * 1000;
  const worker = async () => {
    while (performance.now() < deadline) {
      await oneCall(v, requests[calls++ % requests.length]);
      // Back to the event loop between calls, as a server is between requests: otherwise the
      // memory store's promises chain forever and the flush timer never runs during a round.
      await new Promise(setImmediate);
    }
  };
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  const wallS = (performance.now() - t0) / 1000;
  const c = process.cpuUsage(c0);
  return { wall: calls / wallS, cpu: calls / ((c.user + c.system) / 1e6) };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

type Spec = { name: string; note: string; make: (udpPort: string) => Promise<Variant> };

const SPECS: Spec[] = [
  {
    name: 'no statistics',
    note: 'counters replaced by no-ops (the floor)',
    make: () => build({ stats: new NullStatsStore() }),
  },
  {
    name: 'stats off',
    note: 'DISABLE_STATS=true: in-memory counters, no sink',
    make: () => build({}),
  },
  {
    name: 'statsd',
    note: `USE_STATSD=true, flushed every ${FLUSH_MS} ms over UDP`,
    make: (port) => build({ env: { USE_STATSD: 'true', STATSD_HOST: '127.0.0.1', STATSD_PORT: port } }),
  },
  {
    name: 'dogstatsd',
    note: `USE_DOG_STATSD=true, flushed every ${FLUSH_MS} ms over UDP`,
    make: (port) =>
      build({
        env: { USE_STATSD: 'false', USE_DOG_STATSD: 'true', STATSD_HOST: '127.0.0.1', STATSD_PORT: port },
      }),
  },
  {
    name: 'statsd + prometheus',
    note: 'as statsd, plus USE_PROMETHEUS (no scrapes)',
    make: (port) =>
      build({
        env: {
          USE_STATSD: 'true',
          STATSD_HOST: '127.0.0.1',
          STATSD_PORT: port,
          USE_PROMETHEUS: 'true',
          PROMETHEUS_ADDR: '127.0.0.1:0',
        },
      }),
  },
  {
    name: 'tracing, rate 0',
    note: 'stats off; TRACING_ENABLED, TRACING_SAMPLING_RATE=0',
    make: () => build({ tracing: true, sampling: '0' }),
  },
  {
    name: 'tracing, rate 1',
    note: 'stats off; TRACING_ENABLED, every call sampled, spans batched (exporter drops them)',
    make: () => build({ tracing: true, sampling: '1' }),
  },
];

/** Child: warm up, measure one round, print the rates and the time spent inside flushes. */
async function measureOne(name: string, udpPort: string): Promise<void> {
  const spec = SPECS.find((s) => s.name === name);
  if (!spec) throw new Error(`unknown variant ${name}`);
  const v = await spec.make(udpPort);
  let flushMs = 0;
  const flusher = v.pipeline?.flusher;
  if (flusher) {
    const flush = flusher.flush.bind(flusher);
    flusher.flush = () => {
      const t0 = performance.now();
      flush();
      flushMs += performance.now() - t0;
    };
  }
  await v.pipeline?.start();
  await round(v, 0.5); // warm-up
  flushMs = 0;
  const t0 = performance.now();
  const rate = await round(v, SECONDS);
  const inFlush = flushMs / (performance.now() - t0);
  await v.pipeline?.close();
  await v.tracing?.close();
  process.stdout.write(JSON.stringify({ ...rate, inFlush }) + '\n');
}

async function main(): Promise<void> {
  // A UDP socket that reads and discards, so StatsD datagrams have somewhere to go.
  const sink = createSocket('udp4');
  sink.on('message', () => {});
  await new Promise<void>((r) => sink.bind(0, '127.0.0.1', r));
  const udpPort = String((sink.address() as AddressInfo).port);
  const results = new Map<string, { wall: number; cpu: number; inFlush: number }[]>(
    SPECS.map((s) => [s.name, []]),
  );
  const self = new URL(import.meta.url).pathname;
  for (let r = 0; r < ROUNDS; r++) {
    // Rotate the order each round so no variant always runs right after the same one.
    for (let j = 0; j < SPECS.length; j++) {
      const spec = SPECS[(j + r) % SPECS.length];
      const out = execFileSync(
        process.execPath,
        [
          ...process.execArgv,
          self,
          '--variant',
          spec.name,
          '--udp-port',
          udpPort,
          '--seconds',
          String(SECONDS),
          '--concurrency',
          String(CONCURRENCY),
          '--flush-ms',
          String(FLUSH_MS),
        ],
        { encoding: 'utf8' },
      );
      results.get(spec.name)!.push(JSON.parse(out.trim().split('\n').pop()!));
    }
  }
  sink.close();

  const cpuOf = (name: string) => results.get(name)!.map((r) => r.cpu);
  const base = median(cpuOf('stats off'));
  const lines = [
    `node ${process.version}, ${SECONDS} s per run, ${ROUNDS} runs per variant (one process each), ` +
      `concurrency ${CONCURRENCY}, 2 descriptors per call (200 users with detailed_metric: ` +
      `~400 changed counters per flush), flush every ${FLUSH_MS} ms. Decisions per CPU-second of ` +
      `the process (less disturbed by other load than wall time) and per wall-second; ` +
      `"time in flush": share of the run's wall time spent inside StatsFlusher.flush().`,
    '',
    '| variant | decisions/CPU-s (median) | min | max | vs stats off | decisions/s wall (median) | time in flush | what |',
    '|---|---:|---:|---:|---:|---:|---:|---|',
  ];
  for (const spec of SPECS) {
    const xs = cpuOf(spec.name);
    const m = median(xs);
    const wall = median(results.get(spec.name)!.map((r) => r.wall));
    const inFlush = median(results.get(spec.name)!.map((r) => r.inFlush)) * 100;
    const pct = (m / base - 1) * 100;
    lines.push(
      `| ${spec.name} | ${Math.round(m)} | ${Math.round(Math.min(...xs))} | ${Math.round(Math.max(...xs))} | ` +
        `${pct >= 0 ? '+' : ''}${pct.toFixed(1)}% | ${Math.round(wall)} | ${inFlush.toFixed(2)}% | ${spec.note} |`,
    );
  }
  console.log(lines.join('\n'));
}

if (args.variant) await measureOne(args.variant, args['udp-port'] ?? '8125');
else await main();
