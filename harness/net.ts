// Loopback plumbing shared by the server harnesses (redis/, memcached.ts):
// free port allocation, polling with a deadline, and the child processes that listen on those ports.
// Every process and temp dir created here is tracked, so a test that crashes or forgets to stop
// still leaves nothing behind: a process.on('exit') safety net SIGKILLs what is left.
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const LOOPBACK = '127.0.0.1';

/** Our service's three listeners (HTTP, gRPC, debug) on loopback at the given ports. */
export function loopbackListenEnv(grpcPort: number, httpPort: number, debugPort: number): NodeJS.ProcessEnv {
  return {
    HOST: LOOPBACK,
    PORT: String(httpPort),
    GRPC_HOST: LOOPBACK,
    GRPC_PORT: String(grpcPort),
    DEBUG_HOST: LOOPBACK,
    DEBUG_PORT: String(debugPort),
  };
}

/** The listeners on loopback, statistics off and warnings only: what a service started by a benchmark or a
 *  test that does not read its log sets. */
export function quietListenEnv(grpcPort: number, httpPort: number, debugPort: number): NodeJS.ProcessEnv {
  return { USE_STATSD: 'false', LOG_LEVEL: 'warn', ...loopbackListenEnv(grpcPort, httpPort, debugPort) };
}

// ---------------------------------------------------------------------------------------------
// Ports

const handedOut = new Set<number>();
let ephemeral: [number, number] | undefined;

function ephemeralRange(): [number, number] {
  if (!ephemeral) {
    try {
      const [lo, hi] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/);
      ephemeral = [Number(lo), Number(hi)];
    } catch {
      ephemeral = [32768, 60999];
    }
  }
  return ephemeral;
}

/** True when `host:port` can be bound right now. */
export function canBind(port: number, host = LOOPBACK): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', () => resolve(false));
    srv.listen({ port, host, exclusive: true }, () => srv.close(() => resolve(true)));
  });
}

/**
 * A loopback port that is free now and was not handed out before by this process.
 * Ports are drawn at random from 20000..(start of the kernel's ephemeral range), so they never
 * collide with the source ports of outgoing connections nor with the well-known defaults
 * (6379, 11211, 26379). A server started on it can still lose a race with another process;
 * the start functions retry on "address in use".
 */
export async function freePort(host = LOOPBACK): Promise<number> {
  const lo = 20000;
  const hi = Math.max(lo + 1000, ephemeralRange()[0]);
  for (let i = 0; i < 200; i++) {
    const port = lo + Math.floor(Math.random() * (hi - lo));
    if (handedOut.has(port)) continue;
    if (await canBind(port, host)) {
      handedOut.add(port);
      return port;
    }
  }
  throw new Error(`no free port found in ${lo}..${hi} on ${host}`);
}

/** `n` distinct free ports. */
export async function freePorts(n: number, host = LOOPBACK): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push(await freePort(host));
  return out;
}

// ---------------------------------------------------------------------------------------------
// Waiting

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export interface WaitOptions {
  /** Give up after this many ms (default 10000). */
  deadlineMs?: number;
  /** Pause between polls (default 50 ms). */
  intervalMs?: number;
  /** What we wait for, for the error message. */
  what?: string;
  /** Extra context appended to the timeout error (e.g. a server log tail). */
  context?: () => string;
  /** Stop early with this error when it returns a string (e.g. "the server exited"). */
  abort?: () => string | undefined;
}

/**
 * Poll `check` until it returns a value other than undefined/false, or throw after the deadline.
 * A check that throws counts as "not yet"; its last error is reported on timeout.
 */
export async function waitUntil<T>(
  check: () => Promise<T | undefined | false> | T | undefined | false,
  opts: WaitOptions = {},
): Promise<T> {
  const deadline = Date.now() + (opts.deadlineMs ?? 10_000);
  const interval = opts.intervalMs ?? 50;
  let lastErr: unknown;
  for (;;) {
    const aborted = opts.abort?.();
    if (aborted) throw new Error(withContext(`${opts.what ?? 'condition'}: ${aborted}`, opts.context));
    try {
      const v = await check();
      if (v !== undefined && v !== false) return v as T;
    } catch (err) {
      lastErr = err;
    }
    if (Date.now() >= deadline) {
      const why = lastErr instanceof Error ? ` (last error: ${lastErr.message})` : '';
      throw new Error(
        withContext(
          `timed out after ${opts.deadlineMs ?? 10_000} ms waiting for ${opts.what ?? 'condition'}${why}`,
          opts.context,
        ),
      );
    }
    await sleep(interval);
  }
}

function withContext(msg: string, context?: () => string): string {
  if (!context) return msg;
  let extra = '';
  try {
    extra = context();
  } catch {
    /* best effort */
  }
  return extra ? `${msg}\n${extra}` : msg;
}

/** Resolves true when a TCP connection to host:port succeeds, false when it is refused or times out. */
export function tryConnect(port: number, host = LOOPBACK, timeoutMs = 1000): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = createConnection({ port, host });
    const done = (ok: boolean) => {
      sock.destroy();
      resolve(ok);
    };
    sock.setTimeout(timeoutMs, () => done(false));
    sock.once('connect', () => done(true));
    sock.once('error', () => done(false));
  });
}

/** Wait until something accepts TCP connections on host:port. */
export async function waitForPort(port: number, opts: WaitOptions & { host?: string } = {}): Promise<void> {
  const host = opts.host ?? LOOPBACK;
  await waitUntil(() => tryConnect(port, host), { what: `${host}:${port} to accept connections`, ...opts });
}

// ---------------------------------------------------------------------------------------------
// Temp dirs and child processes, with an exit-time safety net

const liveChildren = new Set<ChildProcess>();
const liveDirs = new Set<string>();
let safetyNetInstalled = false;

function killEverything(): void {
  for (const child of liveChildren) {
    try {
      child.kill('SIGKILL');
    } catch {
      /* already gone */
    }
  }
  liveChildren.clear();
  for (const dir of liveDirs) rmSync(dir, { recursive: true, force: true });
  liveDirs.clear();
}

function installSafetyNet(): void {
  if (safetyNetInstalled) return;
  safetyNetInstalled = true;
  process.on('exit', killEverything);
  // A signal ends node without 'exit'. Only take over signals nobody else handles, and re-raise
  // so the default behaviour (terminate) still happens.
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    if (process.listenerCount(sig) > 0) continue;
    const onSignal = () => {
      killEverything();
      process.removeListener(sig, onSignal);
      if (process.listenerCount(sig) === 0) process.kill(process.pid, sig);
    };
    process.on(sig, onSignal);
  }
}

/** A fresh temp dir, removed by the safety net if nobody removes it first. */
export function makeTempDir(prefix: string): string {
  installSafetyNet();
  const dir = mkdtempSync(join(tmpdir(), `${prefix}-`));
  liveDirs.add(dir);
  return dir;
}

/** Remove a dir made by makeTempDir (idempotent). */
export function removeTempDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
  liveDirs.delete(dir);
}

export interface SpawnServerOptions {
  /** stdout and stderr are appended here (the server's log). */
  logPath: string;
  cwd?: string;
  env?: NodeJS.ProcessEnv;
}

/**
 * One server child process that we own: started with daemonize off, its output going to a log
 * file (not a pipe, so it never blocks on us), stopped by its handle only.
 */
export class ServerProcess {
  readonly child: ChildProcess;
  readonly pid: number;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private exitInfo: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  private spawnError: Error | undefined;

  constructor(
    readonly name: string,
    readonly command: string,
    readonly args: readonly string[],
    readonly opts: SpawnServerOptions,
  ) {
    installSafetyNet();
    const fd = openSync(opts.logPath, 'a');
    try {
      this.child = spawn(command, args, { cwd: opts.cwd, env: opts.env, stdio: ['ignore', fd, fd] });
    } finally {
      closeSync(fd);
    }
    liveChildren.add(this.child);
    this.exited = new Promise((resolve) => {
      this.child.once('exit', (code, signal) => {
        this.exitInfo = { code, signal };
        liveChildren.delete(this.child);
        resolve({ code, signal });
      });
      this.child.once('error', (err) => {
        // spawn failure (e.g. ENOENT): no 'exit' follows
        this.spawnError = err;
        this.exitInfo = { code: null, signal: null };
        liveChildren.delete(this.child);
        resolve(this.exitInfo);
      });
    });
    this.pid = this.child.pid ?? -1;
  }

  /** Undefined while running; otherwise why it is not running. */
  exitReason(): string | undefined {
    if (this.spawnError) return `${this.name} failed to start: ${this.spawnError.message}`;
    if (!this.exitInfo) return undefined;
    const { code, signal } = this.exitInfo;
    return `${this.name} (pid ${this.pid}) exited with ${signal ? `signal ${signal}` : `code ${code}`}`;
  }

  get running(): boolean {
    return this.exitInfo === undefined;
  }

  /** The last `lines` lines of the log, prefixed for error messages. */
  logTail(lines = 30): string {
    let text: string;
    try {
      text = readFileSync(this.opts.logPath, 'utf8');
    } catch {
      return `(no log at ${this.opts.logPath})`;
    }
    const tail = text.trimEnd().split('\n').slice(-lines).join('\n');
    return `--- last ${lines} lines of ${this.opts.logPath} ---\n${tail}`;
  }

  /** SIGTERM, wait up to `deadlineMs`, then SIGKILL and wait. Idempotent. */
  async stop(deadlineMs = 5000): Promise<void> {
    if (!this.running) return;
    this.child.kill('SIGTERM');
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<'timeout'>((r) => (timer = setTimeout(() => r('timeout'), deadlineMs)));
    const outcome = await Promise.race([this.exited, timeout]);
    clearTimeout(timer);
    if (outcome === 'timeout') await this.kill();
  }

  /** SIGKILL and wait for the exit (simulates a crash). Idempotent. */
  async kill(): Promise<void> {
    if (!this.running) return;
    this.child.kill('SIGKILL');
    await this.exited;
  }
}
