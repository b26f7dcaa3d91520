// Real memcached for tests and benchmarks, on free loopback ports, TCP only (-U 0).
import { userInfo } from 'node:os';
import { createConnection } from 'node:net';
import { join } from 'node:path';
import { LOOPBACK, ServerProcess, freePort, makeTempDir, removeTempDir, waitUntil } from './net.js';

export interface StartMemcachedOptions {
  /** -m: memory for items in MB (default 64). */
  memoryMb?: number;
  /** -t: worker threads (default 1; the machine is small). */
  threads?: number;
  /** Extra memcached args. */
  args?: string[];
  startDeadlineMs?: number;
}

/** Lines that end a text-protocol reply (a number ends incr/decr). */
const REPLY_END =
  /(?:^|\r\n)(?:END|STORED|NOT_STORED|EXISTS|NOT_FOUND|DELETED|TOUCHED|OK|ERROR|VERSION [^\r\n]*|(?:CLIENT_|SERVER_)ERROR [^\r\n]*|\d+)\r\n$/;

/**
 * One raw exchange over the memcached text protocol: write `request`, read until the reply
 * ends (by default at END/STORED/NOT_FOUND/... or a number), return the reply text.
 */
export function memcachedRequest(
  port: number,
  request: string,
  opts: { host?: string; until?: RegExp; timeoutMs?: number } = {},
): Promise<string> {
  const until = opts.until ?? REPLY_END;
  return new Promise((resolve, reject) => {
    const sock = createConnection({ host: opts.host ?? LOOPBACK, port });
    let text = '';
    sock.setEncoding('utf8');
    sock.setTimeout(opts.timeoutMs ?? 2000, () => {
      sock.destroy();
      reject(new Error(`memcached reply timed out; got ${JSON.stringify(text)}`));
    });
    sock.once('error', reject);
    sock.once('connect', () => sock.write(request));
    sock.on('data', (chunk: string) => {
      text += chunk;
      if (until.test(text)) {
        sock.destroy();
        resolve(text);
      }
    });
  });
}

export class MemcachedServer {
  readonly host = LOOPBACK;
  private stopped = false;

  constructor(
    private readonly proc: ServerProcess,
    readonly port: number,
    readonly dir: string,
  ) {}

  /** 'host:port', as MEMCACHE_HOST_PORT expects. */
  get url(): string {
    return `${this.host}:${this.port}`;
  }
  get pid(): number {
    return this.proc.pid;
  }
  get running(): boolean {
    return this.proc.running;
  }
  logTail(lines?: number): string {
    return this.proc.logTail(lines);
  }

  /** SIGTERM (SIGKILL after 5 s), wait for exit, remove the temp dir. Idempotent. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    await this.proc.stop();
    removeTempDir(this.dir);
  }

  /** SIGKILL and wait: a crash. */
  async kill(): Promise<void> {
    await this.proc.kill();
  }
}

async function startOnce(dir: string, opts: StartMemcachedOptions): Promise<MemcachedServer> {
  const port = await freePort();
  const args = ['-l', LOOPBACK, '-p', String(port), '-U', '0', '-m', String(opts.memoryMb ?? 64)];
  args.push('-t', String(opts.threads ?? 1));
  // memcached refuses to run as root without -u
  if (process.getuid?.() === 0) args.push('-u', userInfo().username);
  args.push(...(opts.args ?? []));
  const proc = new ServerProcess('memcached', 'memcached', args, {
    logPath: join(dir, `memcached-${port}.log`),
  });
  try {
    await waitUntil(async () => (await memcachedRequest(port, 'version\r\n')).startsWith('VERSION'), {
      deadlineMs: opts.startDeadlineMs ?? 10_000,
      what: `memcached on port ${port} to answer version`,
      abort: () => proc.exitReason(),
      context: () => proc.logTail(),
    });
  } catch (err) {
    await proc.kill();
    throw err;
  }
  return new MemcachedServer(proc, port, dir);
}

/** Start one memcached on a free loopback port. */
export async function startMemcached(opts: StartMemcachedOptions = {}): Promise<MemcachedServer> {
  const dir = makeTempDir('rl-memcached');
  for (let i = 1; ; i++) {
    try {
      return await startOnce(dir, opts);
    } catch (err) {
      if (i < 3 && /address already in use/i.test((err as Error).message)) continue;
      removeTempDir(dir);
      throw err;
    }
  }
}

export interface MemcachedPool {
  instances: MemcachedServer[];
  /** Comma-separated host:port list, as MEMCACHE_HOST_PORT expects. */
  urls: string;
  stop(): Promise<void>;
}

/** Start `count` memcached instances in parallel. */
export async function startMemcachedPool(
  count: number,
  opts: StartMemcachedOptions = {},
): Promise<MemcachedPool> {
  const results = await Promise.allSettled(Array.from({ length: count }, () => startMemcached(opts)));
  const instances = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  const failed = results.find((r) => r.status === 'rejected');
  const stop = async () => {
    await Promise.all(instances.map((m) => m.stop()));
  };
  if (failed) {
    await stop();
    throw (failed as PromiseRejectedResult).reason;
  }
  return { instances, urls: instances.map((m) => m.url).join(','), stop };
}
