// A single real redis-server on a free loopback port: password, ACL users, TLS, unix socket.
// Tests get ioredis clients from client(); stop() removes its temp dir.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis, type RedisOptions as IORedisOptions } from 'ioredis';
import { LOOPBACK, freePort, makeTempDir, removeTempDir } from '../net.js';
import { makeCerts, type CertPaths } from '../tls.js';
import { baseConfig, ClientSet, DEFAULT_START_DEADLINE_MS, RedisNode, withPortRetry } from './node.js';
import type { RespTarget } from './resp.js';

export interface RedisUser {
  name: string;
  password: string;
  /** ACL rules after the password (default: all keys, channels and commands). */
  rules?: string;
}

export interface StartRedisOptions {
  /** requirepass: the password of the default user. */
  password?: string;
  /** ACL users, in addition to the default user. */
  users?: RedisUser[];
  /**
   * Serve TLS only (the returned port is the TLS port) with certificates made by makeCerts().
   * authClients: 'yes' (default, client certificate required), 'optional' or 'no'.
   */
  tls?: boolean | { authClients?: 'yes' | 'no' | 'optional'; certs?: CertPaths };
  /** Also listen on a unix socket in the temp dir. */
  unixSocket?: boolean;
  /** Extra redis-server command-line args, e.g. ['--maxmemory', '10mb']. */
  args?: string[];
  startDeadlineMs?: number;
}

export interface RedisTlsPaths {
  caPath: string;
  certPath: string;
  keyPath: string;
  clientCertPath: string;
  clientKeyPath: string;
}

export class RedisServer {
  readonly host = LOOPBACK;
  private stopped = false;
  private readonly clients = new ClientSet();

  constructor(
    private readonly node: RedisNode,
    readonly dir: string,
    readonly socketPath: string | undefined,
    readonly tls: RedisTlsPaths | undefined,
    private readonly auth: { username?: string; password?: string },
  ) {}

  get port(): number {
    return this.node.port;
  }
  /** 'host:port', as REDIS_URL expects. */
  get url(): string {
    return `${this.host}:${this.port}`;
  }
  get pid(): number {
    return this.node.proc?.pid ?? -1;
  }
  get logPath(): string {
    return this.node.logPath;
  }
  get running(): boolean {
    return this.node.running;
  }

  /** ioredis options with the right auth and TLS; overrides win. */
  clientOptions(overrides: IORedisOptions = {}): IORedisOptions {
    const opts: IORedisOptions = { host: this.host, port: this.port, ...this.auth };
    if (this.tls) {
      opts.tls = {
        ca: readFileSync(this.tls.caPath),
        cert: readFileSync(this.tls.clientCertPath),
        key: readFileSync(this.tls.clientKeyPath),
      };
    }
    return { ...opts, ...overrides };
  }

  /** A connected ioredis client (default user's password, else the first ACL user; TLS with client cert). */
  client(overrides: IORedisOptions = {}): Redis {
    return this.clients.add(new Redis(this.clientOptions(overrides)));
  }

  logTail(lines?: number): string {
    return this.node.logTail(lines);
  }

  /** SIGTERM (SIGKILL after 5 s), wait for exit, remove the temp dir. Idempotent. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.clients.disconnectAll();
    await this.node.stop();
    removeTempDir(this.dir);
  }

  /** SIGKILL and wait for the exit: a crash. restart() brings it back on the same port. */
  async kill(): Promise<void> {
    await this.node.kill();
  }

  /** Stop (if running) and start again on the same port with the same config. Data is lost (no persistence). */
  async restart(deadlineMs = DEFAULT_START_DEADLINE_MS): Promise<void> {
    if (this.stopped) throw new Error('restart() after stop()');
    await this.node.stop();
    await this.node.start(deadlineMs);
  }
}

export async function startRedis(opts: StartRedisOptions = {}): Promise<RedisServer> {
  const dir = makeTempDir('rl-redis');
  try {
    let tlsPaths: RedisTlsPaths | undefined;
    let tlsConfig: string[] = [];
    if (opts.tls) {
      const t = typeof opts.tls === 'object' ? opts.tls : {};
      const certs = t.certs ?? (await makeCerts(join(dir, 'certs')));
      tlsPaths = {
        caPath: certs.caPath,
        certPath: certs.certPath,
        keyPath: certs.keyPath,
        clientCertPath: certs.clientCertPath,
        clientKeyPath: certs.clientKeyPath,
      };
      tlsConfig = [
        `tls-cert-file ${certs.certPath}`,
        `tls-key-file ${certs.keyPath}`,
        `tls-ca-cert-file ${certs.caPath}`,
        `tls-auth-clients ${t.authClients ?? 'yes'}`,
      ];
    }
    const socketPath = opts.unixSocket ? join(dir, 'redis.sock') : undefined;
    const auth: { username?: string; password?: string } = {};
    if (opts.password !== undefined) auth.password = opts.password;
    else if (opts.users?.length) auth.username = opts.users[0].name;
    if (auth.username) auth.password = opts.users![0].password;

    let attempt = 0;
    const node = await withPortRetry(async () => {
      const port = await freePort();
      const nodeDir = join(dir, `try${attempt++}`);
      // with TLS, serve TLS only: the plain port is off
      const config = [...baseConfig(nodeDir, tlsPaths ? 0 : port)];
      if (tlsPaths) config.push(`tls-port ${port}`, ...tlsConfig);
      if (socketPath) config.push(`unixsocket ${socketPath}`, 'unixsocketperm 700');
      if (opts.password !== undefined) config.push(`requirepass ${opts.password}`);
      for (const u of opts.users ?? [])
        config.push(`user ${u.name} on >${u.password} ${u.rules ?? '~* &* +@all'}`);
      const probe: RespTarget = { port, ...auth };
      if (tlsPaths) {
        probe.tls = {
          ca: readFileSync(tlsPaths.caPath),
          cert: readFileSync(tlsPaths.clientCertPath),
          key: readFileSync(tlsPaths.clientKeyPath),
        };
      }
      const n = new RedisNode({
        name: 'redis-server',
        binary: 'redis-server',
        dir: nodeDir,
        port,
        config,
        args: opts.args,
        probe,
      });
      await n.start(opts.startDeadlineMs);
      return n;
    });
    return new RedisServer(node, dir, socketPath, tlsPaths, auth);
  } catch (err) {
    removeTempDir(dir);
    throw err;
  }
}
