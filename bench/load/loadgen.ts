// The load generator: a separate process speaking HTTP/2 (h2raw.ts; neither grpc-js nor node:http2), sending
// pre-encoded ShouldRateLimit frames. Closed loop (a fixed number of calls in flight, for saturation) or
// open loop (a fixed arrival rate; latency counted from each call's intended start, so a stalled server is
// not hidden by the generator waiting for it, and also from when it was sent: `sentLatency` leaves out the
// generator's own lateness in starting calls, its 1 ms timer). Prints `MEASURE_START` / `MEASURE_END` lines around the
// measured window (after a warm-up) so the orchestrator can sample CPU and Redis counters, then one JSON line.
// Its own pauses would count as the service's latency, so it keeps garbage collection out of the window
// (drivers.ts starts it with a young generation larger than a window's garbage and `--expose-gc`; a full
// collection runs before the window) and reports its own longest event-loop lateness in the window.
//
//   node --import tsx bench/load/loadgen.ts '<LoadSpec JSON>'
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { RawH2Connection } from './h2raw.js';
import { Histogram, type LatencySummary } from './histogram.js';
import { SHOULD_RATE_LIMIT_PATH } from '../../proto/index.js';
import { frameSource, type WorkloadName } from './workloads.js';

export interface LoadSpec {
  /** host:port of the gRPC listener. */
  target: string;
  workload: WorkloadName;
  /** Sends the workload's requests to this domain instead of the workload's own. */
  domain?: string;
  seed: number;
  /** First key number of the highcard workload (distinct per run). */
  keyBase?: number;
  mode: 'closed' | 'open';
  connections: number;
  /** Closed loop: calls in flight in total (spread over the connections), unless `inFlight` is set. */
  concurrency?: number;
  /** Closed loop: calls in flight per connection, each caller bound to its connection (a load shape). */
  inFlight?: number;
  /** Open loop: calls per second in total. */
  rate?: number;
  warmupMs: number;
  durationMs: number;
  /** Stop the measured window after this many calls (count-bound runs). */
  maxRequests?: number;
  /** Request headers beyond the six of a plain gRPC call (Envoy sends about a dozen). */
  extraHeaders?: number;
}

export interface LoadResult {
  spec: LoadSpec;
  /** Calls completed in the measured window. */
  completed: number;
  errors: number;
  ok: number;
  overLimit: number;
  /** Calls an open loop could not start on time because too many were in flight. */
  backlogMax: number;
  windowMs: number;
  callsPerSecond: number;
  latency: LatencySummary;
  /** Open loop: latency from each call's actual send, without the generator's lateness in starting it. */
  sentLatency?: LatencySummary;
  /** CPU the generator used in the window (user + system), ms. */
  cpuMs: number;
  /** The generator's own longest event-loop lateness in the window (ms): a stall of the driver, not the service. */
  driverLoopMaxMs?: number;
  firstError?: string;
}

const MAX_IN_FLIGHT_OPEN = 10_000;
/** The full collection before the window ends this long before it starts (its pause delays calls). */
const GC_SETTLE_MS = 250;

async function main(): Promise<void> {
  const spec = JSON.parse(process.argv[2]) as LoadSpec;
  const frames = frameSource(spec.workload, spec.seed, spec.keyBase ?? 0, undefined, spec.domain);
  const [host, port] = spec.target.split(':');
  const sessions: RawH2Connection[] = [];
  for (let i = 0; i < spec.connections; i++) {
    const c = new RawH2Connection(host, Number(port), SHOULD_RATE_LIMIT_PATH, spec.extraHeaders);
    await c.connect();
    sessions.push(c);
  }

  const hist = new Histogram();
  /** Open loop: latency from when each call was actually sent, leaving out this driver's lateness. */
  const sentHist = new Histogram();
  const open = spec.mode === 'open';
  let measuring = false;
  let stopped = false;
  let seq = 0;
  let inFlight = 0;
  let completed = 0;
  let errors = 0;
  let ok = 0;
  let over = 0;
  let firstError: string | undefined;
  let next = 0; // round-robin over sessions
  let onIdle: (() => void) | undefined;
  let onDone: (() => void) | undefined;

  const finish = (startMs: number, sentMs: number, good: boolean, code: number) => {
    inFlight--;
    if (measuring) {
      const now = performance.now();
      hist.record((now - startMs) * 1000);
      if (open) sentHist.record((now - sentMs) * 1000);
      completed++;
      if (good) {
        if (code === 1) ok++;
        else if (code === 2) over++;
      } else {
        errors++;
        firstError ??= sessions.find((c) => c.closedError)?.closedError?.message ?? 'gRPC error status';
      }
      if (spec.maxRequests !== undefined && completed >= spec.maxRequests) onDone?.();
    }
    if (inFlight === 0) onIdle?.();
  };

  /** Starts one call on `s` (round-robin when absent); `startMs` is when it should have started (open
   *  loop) or now (closed loop). */
  const send = (startMs: number, then?: () => void, bound?: RawH2Connection) => {
    let s = bound;
    if (!s) {
      s = sessions[next];
      next = next + 1 === sessions.length ? 0 : next + 1;
    }
    inFlight++;
    const sentMs = performance.now();
    s.call(frames.frame(seq++), (good, code) => {
      finish(startMs, sentMs, good, code);
      if (then && !stopped) then();
    });
  };

  let backlogMax = 0;
  if (spec.mode === 'closed' && spec.inFlight !== undefined) {
    for (let i = 0; i < spec.connections * spec.inFlight; i++) {
      const bound = sessions[i % sessions.length];
      const loop = () => send(performance.now(), loop, bound);
      loop();
    }
  } else if (spec.mode === 'closed') {
    const loop = () => send(performance.now(), loop);
    for (let i = 0; i < (spec.concurrency ?? 64); i++) loop();
  } else {
    const rate = spec.rate ?? 1000;
    const t0 = performance.now();
    let started = 0;
    const tick = () => {
      if (stopped) return;
      const now = performance.now();
      const due = Math.floor(((now - t0) * rate) / 1000);
      while (started < due) {
        if (inFlight >= MAX_IN_FLIGHT_OPEN) {
          backlogMax = Math.max(backlogMax, due - started);
          break;
        }
        send(t0 + (started * 1000) / rate);
        started++;
      }
      setTimeout(tick, 1);
    };
    tick();
  }

  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const gc = (globalThis as { gc?: () => void }).gc;
  await sleep(gc ? Math.max(0, spec.warmupMs - GC_SETTLE_MS) : spec.warmupMs);
  if (gc) {
    gc();
    await sleep(Math.min(spec.warmupMs, GC_SETTLE_MS));
  }
  const lateness = monitorEventLoopDelay({ resolution: 1 });
  lateness.enable();
  const cpu0 = process.cpuUsage();
  const w0 = performance.now();
  measuring = true;
  process.stdout.write('MEASURE_START\n');
  await new Promise<void>((resolve) => {
    const t = setTimeout(resolve, spec.durationMs);
    onDone = () => {
      clearTimeout(t);
      resolve();
    };
  });
  measuring = false;
  lateness.disable();
  const windowMs = performance.now() - w0;
  const cpu = process.cpuUsage(cpu0);
  process.stdout.write('MEASURE_END\n');
  stopped = true;
  if (inFlight > 0) {
    await Promise.race([new Promise<void>((r) => (onIdle = r)), new Promise((r) => setTimeout(r, 5000))]);
  }
  for (const s of sessions) s.close();
  const result: LoadResult = {
    spec,
    completed,
    errors,
    ok,
    overLimit: over,
    backlogMax,
    windowMs: Math.round(windowMs),
    callsPerSecond: Math.round((completed * 1000) / windowMs),
    latency: hist.summary(),
    ...(open ? { sentLatency: sentHist.summary() } : {}),
    cpuMs: Math.round((cpu.user + cpu.system) / 1000),
    // The same measure as our service's probe and the idle probes (loop-probe-preload.mjs), so tails.ts
    // compares like with like: the longest interval of a 1 ms timer, its period included.
    driverLoopMaxMs: lateness.max / 1e6,
    firstError,
  };
  process.stdout.write(JSON.stringify(result) + '\n');
  process.exit(0);
}

void main();
