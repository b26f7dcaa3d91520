// One redis-server or redis-sentinel process with its config file in its own dir, shared by the single
// server, the cluster and the sentinel group: start (until it answers PING), stop, kill, retry a start that
// lost a port race, and the ioredis clients handed out so stop() can disconnect the ones a test forgot.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Cluster, Redis } from 'ioredis';
import { LOOPBACK, ServerProcess, waitUntil } from '../net.js';
import { respCommand, type RespTarget } from './resp.js';

export const DEFAULT_START_DEADLINE_MS = 15_000;

export interface NodeSpec {
  name: string;
  binary: 'redis-server' | 'redis-sentinel';
  dir: string;
  port: number;
  /** Config file lines; written once, so restart() reuses the same config. */
  config: string[];
  args?: string[];
  /** How readiness probes reach the node. */
  probe: RespTarget;
}

/** Retry a start that lost a port race with another process ("Address already in use"). */
export async function withPortRetry<T>(attempt: () => Promise<T>, tries = 3): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await attempt();
    } catch (err) {
      if (i >= tries || !/address already in use/i.test((err as Error).message)) throw err;
    }
  }
}

export class RedisNode {
  proc: ServerProcess | undefined;
  readonly confPath: string;
  readonly logPath: string;

  constructor(readonly spec: NodeSpec) {
    mkdirSync(spec.dir, { recursive: true });
    this.confPath = join(spec.dir, spec.binary === 'redis-sentinel' ? 'sentinel.conf' : 'redis.conf');
    this.logPath = join(spec.dir, `${spec.binary}.log`);
    writeFileSync(this.confPath, spec.config.join('\n') + '\n');
  }

  get port(): number {
    return this.spec.port;
  }

  get running(): boolean {
    return this.proc?.running ?? false;
  }

  async start(deadlineMs = DEFAULT_START_DEADLINE_MS): Promise<void> {
    const proc = new ServerProcess(
      this.spec.name,
      this.spec.binary,
      [this.confPath, ...(this.spec.args ?? [])],
      {
        logPath: this.logPath,
        cwd: this.spec.dir,
      },
    );
    this.proc = proc;
    try {
      await waitUntil(async () => (await respCommand(this.spec.probe, 'PING')) === 'PONG', {
        deadlineMs,
        what: `${this.spec.name} on port ${this.spec.port} to answer PING`,
        abort: () => proc.exitReason(),
        context: () => proc.logTail(),
      });
    } catch (err) {
      await proc.kill();
      throw err;
    }
  }

  async stop(): Promise<void> {
    await this.proc?.stop();
  }

  async kill(): Promise<void> {
    await this.proc?.kill();
  }

  logTail(lines?: number): string {
    return this.proc?.logTail(lines) ?? '(never started)';
  }
}

export const baseConfig = (dir: string, port: number): string[] => [
  `port ${port}`,
  `bind ${LOOPBACK}`,
  'protected-mode no',
  'daemonize no',
  `dir ${dir}`,
  'logfile ""',
  `save ""`,
  'appendonly no',
  // replicas sync at once instead of waiting 5 s for more replicas to join the diskless transfer
  'repl-diskless-sync-delay 0',
  'shutdown-timeout 0',
];

/** Tracks ioredis clients handed out, so stop() can disconnect the ones the test forgot. */
export class ClientSet {
  private clients = new Set<Redis | Cluster>();
  add<T extends Redis | Cluster>(c: T): T {
    this.clients.add(c);
    // Reconnect errors are expected while tests kill servers; without a listener ioredis prints
    // each one as "Unhandled error event". Commands still reject, which is what tests assert on.
    c.on('error', () => {});
    c.once('end', () => this.clients.delete(c));
    return c;
  }
  disconnectAll(): void {
    for (const c of this.clients) c.disconnect();
    this.clients.clear();
  }
}
