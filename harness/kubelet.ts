// A kubelet's prober, as far as a test needs it: a container's probes (the specs `helm template` renders)
// run against a process on loopback, with the kubelet's rules for what a result means. A probe succeeds
// when an httpGet answers 200..399, a grpc probe's grpc.health.v1.Health/Check answers SERVING for its
// `service`, or a tcpSocket connects, each within timeoutSeconds. Liveness restarts the container after
// failureThreshold failures in a row (after initialDelaySeconds); readiness marks the pod not ready after
// failureThreshold failures in a row and ready again after successThreshold successes.
//
// The periods are scaled by `timeScale` (0.05 runs a 10 s period every 500 ms): the kubelet's decisions
// depend only on the sequence of results, so N probes during a state that holds for the whole phase mean
// what N probes at the real period mean. Timeouts are not scaled (a slow answer stays a failure).
import * as grpc from '@grpc/grpc-js';
import { tryConnect } from './net.js';

export interface ProbeSpec {
  httpGet?: { path: string; port: number | string };
  grpc?: { port: number; service?: string };
  tcpSocket?: { port: number | string };
  initialDelaySeconds?: number;
  periodSeconds?: number;
  timeoutSeconds?: number;
  failureThreshold?: number;
  successThreshold?: number;
}

/** Container port (number or name as rendered) → the loopback port the test's process listens on. */
export type PortMap = (port: number | string) => number;

export interface ProbeEvent {
  kind: 'liveness' | 'readiness';
  atMs: number;
  ok: boolean;
  detail: string;
}

const SERVING = 1;

/** grpc.health.v1.Health/Check for `service` on 127.0.0.1:port: resolves to the status, rejects on error. */
function grpcHealthCheck(port: number, service: string, timeoutMs: number): Promise<number> {
  const client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  const name = Buffer.from(service, 'utf8');
  // HealthCheckRequest { string service = 1 }: written by hand so the prober shares no code with the server.
  const req = name.length > 0 ? Buffer.concat([Buffer.from([0x0a, name.length]), name]) : Buffer.alloc(0);
  return new Promise<number>((resolve, reject) => {
    client.makeUnaryRequest(
      '/grpc.health.v1.Health/Check',
      (b: Buffer) => b,
      (b: Buffer) => b,
      req,
      { deadline: Date.now() + timeoutMs },
      (err, res) => {
        client.close();
        if (err) return reject(err);
        // HealthCheckResponse { ServingStatus status = 1 }: absent means UNKNOWN (0).
        resolve(res && res.length >= 2 && res[0] === 0x08 ? res[1] : 0);
      },
    );
  });
}

/** Runs one probe; never throws. */
export async function runProbe(spec: ProbeSpec, ports: PortMap): Promise<{ ok: boolean; detail: string }> {
  const timeoutMs = (spec.timeoutSeconds ?? 1) * 1000;
  try {
    if (spec.httpGet) {
      const res = await fetch(`http://127.0.0.1:${ports(spec.httpGet.port)}${spec.httpGet.path}`, {
        signal: AbortSignal.timeout(timeoutMs),
      });
      const body = await res.text();
      return { ok: res.status >= 200 && res.status < 400, detail: `HTTP ${res.status} ${body.slice(0, 80)}` };
    }
    if (spec.grpc) {
      const status = await grpcHealthCheck(ports(spec.grpc.port), spec.grpc.service ?? '', timeoutMs);
      return { ok: status === SERVING, detail: `gRPC health status ${status}` };
    }
    if (spec.tcpSocket) {
      const ok = await tryConnect(ports(spec.tcpSocket.port), '127.0.0.1', timeoutMs);
      return { ok, detail: ok ? 'connected' : 'connect failed' };
    }
    return { ok: false, detail: 'no handler in the probe spec' };
  } catch (err) {
    return { ok: false, detail: (err as Error).message };
  }
}

/** The liveness and readiness probes of one container, run on their (scaled) periods until stop(). */
export class Prober {
  /** Set once liveness would have restarted the container, with the failures that caused it. */
  restartedBecause: ProbeEvent[] | undefined;
  ready = false;
  readonly events: ProbeEvent[] = [];
  private readonly timers: NodeJS.Timeout[] = [];
  private readonly started = performance.now();
  private livenessFailures: ProbeEvent[] = [];
  private readinessFailures = 0;
  private readinessSuccesses = 0;
  /** Probes run per kind (to know that a phase saw enough of them). */
  readonly count = { liveness: 0, readiness: 0 };

  constructor(
    private readonly liveness: ProbeSpec,
    private readonly readiness: ProbeSpec,
    private readonly ports: PortMap,
    readonly timeScale: number,
  ) {}

  start(): void {
    this.schedule('liveness', this.liveness);
    this.schedule('readiness', this.readiness);
  }

  stop(): void {
    for (const t of this.timers) clearTimeout(t);
    this.timers.length = 0;
  }

  private schedule(kind: 'liveness' | 'readiness', spec: ProbeSpec): void {
    const period = (spec.periodSeconds ?? 10) * 1000 * this.timeScale;
    const tick = async () => {
      const r = await runProbe(spec, this.ports);
      this.record(kind, spec, { kind, atMs: Math.round(performance.now() - this.started), ...r });
      this.timers.push(setTimeout(tick, period));
    };
    this.timers.push(setTimeout(tick, (spec.initialDelaySeconds ?? 0) * 1000 * this.timeScale));
  }

  private record(kind: 'liveness' | 'readiness', spec: ProbeSpec, e: ProbeEvent): void {
    this.events.push(e);
    this.count[kind]++;
    const failureThreshold = spec.failureThreshold ?? 3;
    if (kind === 'liveness') {
      if (e.ok) this.livenessFailures = [];
      else {
        this.livenessFailures.push(e);
        if (this.livenessFailures.length >= failureThreshold && !this.restartedBecause)
          this.restartedBecause = [...this.livenessFailures];
      }
      return;
    }
    if (e.ok) {
      this.readinessFailures = 0;
      if (++this.readinessSuccesses >= (spec.successThreshold ?? 1)) this.ready = true;
    } else {
      this.readinessSuccesses = 0;
      if (++this.readinessFailures >= failureThreshold) this.ready = false;
    }
  }
}
