// Real Redis for tests and benchmarks: a single server (password, ACL users, TLS, unix socket),
// a Redis Cluster, and a Sentinel group, each on free loopback ports in its own temp dir.
// Every process is a child we spawned with daemonize off and is stopped by its handle only.
// Readiness and topology checks speak RESP over a plain socket (no client reconnect logic to
// second-guess); tests get ioredis clients from client()/clusterClient().
import { execFile } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createConnection, type Socket } from 'node:net';
import { join } from 'node:path';
import { connect as tlsConnect, type ConnectionOptions as TlsConnectionOptions } from 'node:tls';
import { promisify } from 'node:util';
import { Cluster, Redis, type ClusterOptions, type RedisOptions as IORedisOptions } from 'ioredis';
import { LOOPBACK, ServerProcess, freePort, makeTempDir, removeTempDir, waitUntil } from '../net.js';
import { makeCerts, type CertPaths } from '../tls.js';
import { clusterSlot } from '../../ratelimit/redis/cluster-slot.js';

const execFileP = promisify(execFile);
const DEFAULT_START_DEADLINE_MS = 15_000;

// ---------------------------------------------------------------------------------------------
// A minimal RESP2 client: one connection, a few pipelined commands, then close.

export class RespError extends Error {}
export type RespValue = string | number | null | RespError | RespValue[];

export interface RespTarget {
  host?: string;
  port?: number;
  /** Unix socket path (instead of host/port). */
  path?: string;
  /** TLS options (ca/cert/key) when the server only speaks TLS. */
  tls?: TlsConnectionOptions;
  username?: string;
  password?: string;
  timeoutMs?: number;
}

function encode(args: (string | number)[]): string {
  let out = `*${args.length}\r\n`;
  for (const a of args) {
    const s = String(a);
    out += `$${Buffer.byteLength(s)}\r\n${s}\r\n`;
  }
  return out;
}

function parse(buf: Buffer, off: number): [RespValue, number] | undefined {
  if (off >= buf.length) return undefined;
  const nl = buf.indexOf('\r\n', off);
  if (nl < 0) return undefined;
  const type = buf[off];
  const line = buf.toString('utf8', off + 1, nl);
  const next = nl + 2;
  switch (type) {
    case 0x2b: // +
      return [line, next];
    case 0x2d: // -
      return [new RespError(line), next];
    case 0x3a: // :
      return [Number(line), next];
    case 0x24: {
      // $
      const len = Number(line);
      if (len < 0) return [null, next];
      if (buf.length < next + len + 2) return undefined;
      return [buf.toString('utf8', next, next + len), next + len + 2];
    }
    case 0x2a: {
      // *
      const n = Number(line);
      if (n < 0) return [null, next];
      const arr: RespValue[] = [];
      let o = next;
      for (let i = 0; i < n; i++) {
        const r = parse(buf, o);
        if (!r) return undefined;
        arr.push(r[0]);
        o = r[1];
      }
      return [arr, o];
    }
    default:
      throw new Error(`unexpected RESP type byte ${type}`);
  }
}

/** Send commands on one fresh connection; resolve with one reply per command (errors as RespError). */
export function respCommands(target: RespTarget, commands: (string | number)[][]): Promise<RespValue[]> {
  const all = [...commands];
  const auth = target.password !== undefined;
  if (auth) {
    all.unshift(target.username ? ['AUTH', target.username, target.password!] : ['AUTH', target.password!]);
  }
  return new Promise((resolve, reject) => {
    let sock: Socket;
    const host = target.host ?? LOOPBACK;
    if (target.path) sock = createConnection({ path: target.path });
    else if (target.tls) sock = tlsConnect({ host, port: target.port, ...target.tls });
    else sock = createConnection({ host, port: target.port! });
    let buf = Buffer.alloc(0);
    const replies: RespValue[] = [];
    let off = 0;
    const fail = (err: Error) => {
      sock.destroy();
      reject(err);
    };
    sock.setTimeout(target.timeoutMs ?? 2000, () => fail(new Error('RESP request timed out')));
    sock.once('error', fail);
    sock.once('close', () => {
      if (replies.length < all.length) reject(new Error('connection closed before all replies arrived'));
    });
    sock.once(target.tls && !target.path ? 'secureConnect' : 'connect', () =>
      sock.write(all.map(encode).join('')),
    );
    sock.on('data', (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      for (;;) {
        const r = parse(buf, off);
        if (!r) break;
        replies.push(r[0]);
        off = r[1];
      }
      if (replies.length >= all.length) {
        sock.destroy();
        if (auth && replies[0] instanceof RespError) reject(replies[0]);
        else resolve(auth ? replies.slice(1) : replies);
      }
    });
  });
}

/** One command; an error reply rejects. */
export async function respCommand(target: RespTarget, ...args: (string | number)[]): Promise<RespValue> {
  const [reply] = await respCommands(target, [args]);
  if (reply instanceof RespError) throw reply;
  return reply ?? null;
}

/** `INFO section` as a key → value map. */
export async function redisInfo(target: RespTarget, section: string): Promise<Record<string, string>> {
  const text = String(await respCommand(target, 'INFO', section));
  return parseInfo(text);
}

function parseInfo(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split('\r\n')) {
    const i = line.indexOf(':');
    if (i > 0 && !line.startsWith('#')) out[line.slice(0, i)] = line.slice(i + 1);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Cluster key slots: the service's own function, so the harness test checks it against CLUSTER KEYSLOT.

/** The Redis Cluster hash slot of a key. */
export const slotOf = clusterSlot;

// ---------------------------------------------------------------------------------------------
// One redis-server / redis-sentinel process with a config file in its own dir.

interface NodeSpec {
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
async function withPortRetry<T>(attempt: () => Promise<T>, tries = 3): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await attempt();
    } catch (err) {
      if (i >= tries || !/address already in use/i.test((err as Error).message)) throw err;
    }
  }
}

class RedisNode {
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

const baseConfig = (dir: string, port: number): string[] => [
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
class ClientSet {
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

// ---------------------------------------------------------------------------------------------
// Single server

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

// ---------------------------------------------------------------------------------------------
// Cluster

export interface StartRedisClusterOptions {
  masters?: number;
  replicasPerMaster?: number;
  /** cluster-node-timeout: how soon a silent master is declared failed (default 2000 ms). */
  nodeTimeoutMs?: number;
  /** requirepass + masterauth on every node. */
  password?: string;
  /** Extra redis-server args for every node. */
  args?: string[];
  startDeadlineMs?: number;
}

export interface ClusterNodeInfo {
  id: string;
  host: string;
  port: number;
  url: string;
  role: 'master' | 'replica';
  /** For a replica, the id of its master. */
  masterId?: string;
  /** Inclusive slot ranges served by a master. */
  slots: [number, number][];
  failed: boolean;
}

export interface ClusterNodeHandle {
  readonly host: string;
  readonly port: number;
  readonly url: string;
  /** Role right after start; see topology() for the current one. */
  readonly role: 'master' | 'replica';
  readonly id: string;
  readonly pid: number;
  readonly running: boolean;
  kill(): Promise<void>;
  /** Start again on the same port with its nodes.conf: it rejoins the cluster (as a replica after a failover). */
  restart(): Promise<void>;
  logTail(lines?: number): string;
}

export interface KilledMaster {
  id: string;
  port: number;
  url: string;
  pid: number;
  slots: [number, number][];
  killedAt: number;
}

export interface FailoverResult {
  /** From the SIGKILL to the moment every surviving node routes the slots to the new master. */
  elapsedMs: number;
  newMaster: { host: string; port: number; url: string };
}

function parseClusterNodes(text: string): ClusterNodeInfo[] {
  const out: ClusterNodeInfo[] = [];
  for (const line of text.trim().split('\n')) {
    const f = line.trim().split(' ');
    if (f.length < 8) continue;
    const [id, addr, flags, masterId] = f;
    const hostPort = addr.split('@')[0];
    const i = hostPort.lastIndexOf(':');
    const host = hostPort.slice(0, i);
    const port = Number(hostPort.slice(i + 1));
    const flagSet = flags.split(',');
    const slots: [number, number][] = [];
    for (const s of f.slice(8)) {
      if (s.startsWith('[')) continue; // migrating/importing markers
      const [a, b] = s.split('-').map(Number);
      slots.push([a, b ?? a]);
    }
    out.push({
      id,
      host,
      port,
      url: `${host}:${port}`,
      role: flagSet.includes('master') ? 'master' : 'replica',
      masterId: masterId === '-' ? undefined : masterId,
      slots,
      failed: flagSet.includes('fail') || flagSet.includes('noaddr'),
    });
  }
  return out;
}

export class RedisCluster {
  readonly host = LOOPBACK;
  private stopped = false;
  private readonly clients = new ClientSet();
  private lastKilled: KilledMaster | undefined;

  constructor(
    private readonly redisNodes: RedisNode[],
    readonly nodes: ClusterNodeHandle[],
    readonly dir: string,
    private readonly password: string | undefined,
  ) {}

  /** Comma-separated host:port of every node, as REDIS_URL expects for REDIS_TYPE=cluster. */
  get urls(): string {
    return this.nodes.map((n) => n.url).join(',');
  }

  private probe(port: number): RespTarget {
    return { port, password: this.password };
  }

  /** Current topology as seen by a live node. */
  async topology(): Promise<ClusterNodeInfo[]> {
    let lastErr: unknown;
    for (const n of this.redisNodes) {
      if (!n.running) continue;
      try {
        return parseClusterNodes(String(await respCommand(this.probe(n.port), 'CLUSTER', 'NODES')));
      } catch (err) {
        lastErr = err;
      }
    }
    throw new Error(`no live cluster node answered CLUSTER NODES: ${String(lastErr)}`);
  }

  /** Live masters that own slots, ordered by their first slot. */
  async masters(): Promise<ClusterNodeInfo[]> {
    return (await this.topology())
      .filter((n) => n.role === 'master' && !n.failed && n.slots.length > 0)
      .sort((a, b) => a.slots[0][0] - b.slots[0][0]);
  }

  clientOptions(overrides: ClusterOptions = {}): ClusterOptions {
    return { ...(this.password ? { redisOptions: { password: this.password } } : {}), ...overrides };
  }

  /** An ioredis Cluster client seeded with every node. */
  client(overrides: ClusterOptions = {}): Cluster {
    const seeds = this.nodes.map((n) => ({ host: n.host, port: n.port }));
    return this.clients.add(new Cluster(seeds, this.clientOptions(overrides)));
  }

  /**
   * SIGKILL a master: a bare number is the index among current masters (ordered by first slot),
   * { slot } the master serving that slot, { key } the master serving that key.
   */
  async killMaster(which: number | { slot: number } | { key: string } = 0): Promise<KilledMaster> {
    const masters = await this.masters();
    let target: ClusterNodeInfo | undefined;
    if (typeof which === 'number') target = masters[which];
    else {
      const slot = 'slot' in which ? which.slot : slotOf(which.key);
      target = masters.find((m) => m.slots.some(([a, b]) => slot >= a && slot <= b));
    }
    if (!target) throw new Error(`no live master matches ${JSON.stringify(which)}`);
    const node = this.redisNodes.find((n) => n.port === target.port);
    if (!node?.proc) throw new Error(`master on port ${target.port} is not one of ours`);
    const pid = node.proc.pid;
    const killedAt = Date.now();
    await node.kill();
    this.lastKilled = {
      id: target.id,
      port: target.port,
      url: target.url,
      pid,
      slots: target.slots,
      killedAt,
    };
    return this.lastKilled;
  }

  /** Poll until every surviving node routes the killed master's slots to another live master and reports cluster_state:ok. */
  async waitForFailover(deadlineMs = 20_000): Promise<FailoverResult> {
    const killed = this.lastKilled;
    if (!killed) throw new Error('waitForFailover() without killMaster()');
    const slot = killed.slots[0][0];
    const newPort = await waitUntil(
      async () => {
        let agreed: number | undefined;
        for (const n of this.redisNodes) {
          if (!n.running) continue;
          const [info, slots] = await respCommands(this.probe(n.port), [
            ['CLUSTER', 'INFO'],
            ['CLUSTER', 'SLOTS'],
          ]);
          if (!String(info).includes('cluster_state:ok') || !Array.isArray(slots)) return undefined;
          const range = slots.find((r) => Array.isArray(r) && slot >= Number(r[0]) && slot <= Number(r[1]));
          const owner = Array.isArray(range) && Array.isArray(range[2]) ? Number(range[2][1]) : undefined;
          if (owner === undefined || owner === killed.port) return undefined;
          if (!this.redisNodes.some((x) => x.port === owner && x.running)) return undefined;
          if (agreed !== undefined && agreed !== owner) return undefined;
          agreed = owner;
        }
        return agreed;
      },
      {
        deadlineMs: Math.max(0, killed.killedAt + deadlineMs - Date.now()),
        intervalMs: 100,
        what: `a replica to take over slot ${slot} from ${killed.url}`,
        context: () =>
          this.redisNodes
            .filter((n) => n.running)
            .map((n) => n.logTail(8))
            .join('\n'),
      },
    );
    return {
      elapsedMs: Date.now() - killed.killedAt,
      newMaster: { host: this.host, port: newPort, url: `${this.host}:${newPort}` },
    };
  }

  /** Stop every node (in parallel), remove the temp dir. Idempotent. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.clients.disconnectAll();
    await Promise.all(this.redisNodes.map((n) => n.stop()));
    removeTempDir(this.dir);
  }
}

async function startClusterNode(
  dir: string,
  i: number,
  opts: StartRedisClusterOptions,
  deadlineMs: number,
): Promise<RedisNode> {
  let attempt = 0;
  return withPortRetry(async () => {
    const port = await freePort();
    const busPort = await freePort();
    const nodeDir = join(dir, `node${i}-${attempt++}`);
    const config = [
      ...baseConfig(nodeDir, port),
      'cluster-enabled yes',
      'cluster-config-file nodes.conf',
      `cluster-node-timeout ${opts.nodeTimeoutMs ?? 2000}`,
      `cluster-port ${busPort}`,
      // a replica may always take over, however long it was disconnected: tests kill masters at will
      'cluster-replica-validity-factor 0',
    ];
    if (opts.password !== undefined)
      config.push(`requirepass ${opts.password}`, `masterauth ${opts.password}`);
    const node = new RedisNode({
      name: `redis-cluster-node${i}`,
      binary: 'redis-server',
      dir: nodeDir,
      port,
      config,
      args: opts.args,
      probe: { port, password: opts.password },
    });
    await node.start(deadlineMs);
    return node;
  });
}

export async function startRedisCluster(opts: StartRedisClusterOptions = {}): Promise<RedisCluster> {
  const masters = opts.masters ?? 3;
  const replicas = opts.replicasPerMaster ?? 1;
  const total = masters * (1 + replicas);
  const deadlineMs = opts.startDeadlineMs ?? 30_000;
  const deadline = Date.now() + deadlineMs;
  const dir = makeTempDir('rl-redis-cluster');
  const nodes: RedisNode[] = [];
  const cleanup = async () => {
    await Promise.all(nodes.map((n) => n.kill()));
    removeTempDir(dir);
  };
  try {
    const started = await Promise.allSettled(
      Array.from({ length: total }, (_, i) => startClusterNode(dir, i, opts, deadlineMs)),
    );
    for (const s of started) if (s.status === 'fulfilled') nodes.push(s.value);
    const failed = started.find((s) => s.status === 'rejected');
    if (failed) throw (failed as PromiseRejectedResult).reason;

    const args = ['--cluster', 'create', ...nodes.map((n) => `${LOOPBACK}:${n.port}`)];
    args.push('--cluster-replicas', String(replicas), '--cluster-yes');
    if (opts.password !== undefined) args.push('-a', opts.password, '--no-auth-warning');
    try {
      await execFileP('redis-cli', args, { timeout: Math.max(1000, deadline - Date.now()) });
    } catch (err) {
      const e = err as { stdout?: string; stderr?: string; message: string };
      throw new Error(
        `redis-cli --cluster create failed: ${e.message}\n${e.stdout ?? ''}\n${e.stderr ?? ''}`,
        { cause: err },
      );
    }

    // Every node: cluster_state:ok, knows all nodes; every replica: replication link up.
    const probe = (port: number): RespTarget => ({ port, password: opts.password });
    await waitUntil(
      async () => {
        for (const n of nodes) {
          const [info, repl, view] = await respCommands(probe(n.port), [
            ['CLUSTER', 'INFO'],
            ['INFO', 'replication'],
            ['CLUSTER', 'NODES'],
          ]);
          const ci = parseInfo(String(info));
          if (ci.cluster_state !== 'ok' || Number(ci.cluster_known_nodes) !== total) return false;
          if (Number(ci.cluster_size) !== masters) return false;
          const ri = parseInfo(String(repl));
          if (ri.role === 'slave' && ri.master_link_status !== 'up') return false;
          // gossip has told this node which of the others are replicas (else failover votes and client topology lag)
          const seen = parseClusterNodes(String(view));
          if (seen.filter((x) => x.role === 'replica').length !== total - masters) return false;
        }
        return true;
      },
      {
        deadlineMs: Math.max(0, deadline - Date.now()),
        intervalMs: 100,
        what: 'every cluster node to report cluster_state:ok',
        context: () => nodes.map((n) => n.logTail(8)).join('\n'),
      },
    );

    const topo = parseClusterNodes(String(await respCommand(probe(nodes[0].port), 'CLUSTER', 'NODES')));
    const handles: ClusterNodeHandle[] = nodes.map((n) => {
      const info = topo.find((t) => t.port === n.port);
      if (!info) throw new Error(`node on port ${n.port} missing from CLUSTER NODES`);
      return {
        host: LOOPBACK,
        port: n.port,
        url: `${LOOPBACK}:${n.port}`,
        role: info.role,
        id: info.id,
        get pid() {
          return n.proc?.pid ?? -1;
        },
        get running() {
          return n.running;
        },
        kill: () => n.kill(),
        restart: async () => {
          await n.stop();
          await n.start(opts.startDeadlineMs ?? DEFAULT_START_DEADLINE_MS);
        },
        logTail: (lines?: number) => n.logTail(lines),
      };
    });
    return new RedisCluster(nodes, handles, dir, opts.password);
  } catch (err) {
    await cleanup();
    throw err;
  }
}

// ---------------------------------------------------------------------------------------------
// Sentinel

export interface StartRedisSentinelOptions {
  masterName?: string;
  /** requirepass + masterauth on master and replica, auth-pass in the sentinels. */
  password?: string;
  /** Number of sentinels (default 3, quorum 2). */
  sentinels?: number;
  quorum?: number;
  downAfterMs?: number;
  failoverTimeoutMs?: number;
  startDeadlineMs?: number;
}

export interface SentinelFailoverResult {
  /** From the SIGKILL to the moment every live sentinel names the new master and it reports role:master. */
  elapsedMs: number;
  masterPort: number;
  masterUrl: string;
}

export class RedisSentinelGroup {
  readonly host = LOOPBACK;
  private stopped = false;
  private readonly clients = new ClientSet();
  private lastKilled: { port: number; killedAt: number } | undefined;

  constructor(
    readonly masterName: string,
    private readonly dataNodes: RedisNode[],
    private readonly sentinelNodes: RedisNode[],
    readonly dir: string,
    private readonly password: string | undefined,
  ) {}

  /** Comma-separated host:port of the sentinels, as REDIS_URL expects for REDIS_TYPE=sentinel (after the master name). */
  get sentinelUrls(): string {
    return this.sentinelNodes.map((s) => `${this.host}:${s.port}`).join(',');
  }
  /** Initial master and replica ports. */
  get masterPort(): number {
    return this.dataNodes[0].port;
  }
  get replicaPort(): number {
    return this.dataNodes[1].port;
  }
  get sentinelPorts(): number[] {
    return this.sentinelNodes.map((s) => s.port);
  }

  /** The master as the first live sentinel names it. */
  async currentMaster(): Promise<{ host: string; port: number }> {
    for (const s of this.sentinelNodes) {
      if (!s.running) continue;
      const r = await respCommand({ port: s.port }, 'SENTINEL', 'get-master-addr-by-name', this.masterName);
      if (Array.isArray(r)) return { host: String(r[0]), port: Number(r[1]) };
    }
    throw new Error('no live sentinel knows the master');
  }

  clientOptions(overrides: IORedisOptions = {}): IORedisOptions {
    return {
      sentinels: this.sentinelNodes.map((s) => ({ host: this.host, port: s.port })),
      name: this.masterName,
      ...(this.password ? { password: this.password } : {}),
      ...overrides,
    };
  }

  /** An ioredis client that finds the master through the sentinels. */
  client(overrides: IORedisOptions = {}): Redis {
    return this.clients.add(new Redis(this.clientOptions(overrides)));
  }

  /** SIGKILL the current master. */
  async killMaster(): Promise<{ port: number; pid: number }> {
    const { port } = await this.currentMaster();
    const node = this.dataNodes.find((n) => n.port === port);
    if (!node?.proc?.running) throw new Error(`master on port ${port} is not a live node of ours`);
    const pid = node.proc.pid;
    this.lastKilled = { port, killedAt: Date.now() };
    await node.kill();
    return { port, pid };
  }

  /** Poll SENTINEL get-master-addr-by-name on every live sentinel until all name a new, live master. */
  async waitForFailover(deadlineMs = 20_000): Promise<SentinelFailoverResult> {
    const killed = this.lastKilled;
    if (!killed) throw new Error('waitForFailover() without killMaster()');
    const port = await waitUntil(
      async () => {
        let agreed: number | undefined;
        for (const s of this.sentinelNodes) {
          if (!s.running) continue;
          const r = await respCommand(
            { port: s.port },
            'SENTINEL',
            'get-master-addr-by-name',
            this.masterName,
          );
          if (!Array.isArray(r)) return undefined;
          const p = Number(r[1]);
          if (p === killed.port || (agreed !== undefined && agreed !== p)) return undefined;
          agreed = p;
        }
        if (agreed === undefined) return undefined;
        const info = await redisInfo({ port: agreed, password: this.password }, 'replication');
        return info.role === 'master' ? agreed : undefined;
      },
      {
        deadlineMs: Math.max(0, killed.killedAt + deadlineMs - Date.now()),
        intervalMs: 100,
        what: `sentinels to promote a new master for ${this.masterName}`,
        context: () => this.sentinelNodes.map((s) => s.logTail(10)).join('\n'),
      },
    );
    return { elapsedMs: Date.now() - killed.killedAt, masterPort: port, masterUrl: `${this.host}:${port}` };
  }

  /** Stop the sentinels first (no failover during shutdown), then the data nodes; remove the temp dir. Idempotent. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.clients.disconnectAll();
    await Promise.all(this.sentinelNodes.map((n) => n.stop()));
    await Promise.all(this.dataNodes.map((n) => n.stop()));
    removeTempDir(this.dir);
  }
}

export async function startRedisSentinel(opts: StartRedisSentinelOptions = {}): Promise<RedisSentinelGroup> {
  const masterName = opts.masterName ?? 'mymaster';
  const count = opts.sentinels ?? 3;
  const quorum = opts.quorum ?? 2;
  const deadlineMs = opts.startDeadlineMs ?? 30_000;
  const deadline = Date.now() + deadlineMs;
  const left = () => Math.max(0, deadline - Date.now());
  const dir = makeTempDir('rl-redis-sentinel');
  const started: RedisNode[] = [];
  const pw = opts.password;
  const authLines = pw !== undefined ? [`requirepass ${pw}`, `masterauth ${pw}`] : [];

  const startData = (name: string, extra: (port: number) => string[]) => {
    let attempt = 0;
    return withPortRetry(async () => {
      const port = await freePort();
      const nodeDir = join(dir, `${name}-${attempt++}`);
      const node = new RedisNode({
        name: `redis-${name}`,
        binary: 'redis-server',
        dir: nodeDir,
        port,
        config: [...baseConfig(nodeDir, port), ...authLines, ...extra(port)],
        probe: { port, password: pw },
      });
      started.push(node);
      await node.start(left());
      return node;
    });
  };

  try {
    const master = await startData('master', () => []);
    const replica = await startData('replica', () => [`replicaof ${LOOPBACK} ${master.port}`]);
    await waitUntil(
      async () =>
        (await redisInfo({ port: replica.port, password: pw }, 'replication')).master_link_status === 'up',
      { deadlineMs: left(), what: 'the replica to sync with the master', context: () => replica.logTail() },
    );

    const sentinels = await Promise.all(
      Array.from({ length: count }, (_, i) => {
        let attempt = 0;
        return withPortRetry(async () => {
          const port = await freePort();
          const sdir = join(dir, `sentinel${i}-${attempt++}`);
          // sentinel rewrites its config file: each gets a writable file of its own
          const config = [
            `port ${port}`,
            `bind ${LOOPBACK}`,
            'protected-mode no',
            'daemonize no',
            'logfile ""',
            `dir ${sdir}`,
            `sentinel monitor ${masterName} ${LOOPBACK} ${master.port} ${quorum}`,
            `sentinel down-after-milliseconds ${masterName} ${opts.downAfterMs ?? 1000}`,
            `sentinel failover-timeout ${masterName} ${opts.failoverTimeoutMs ?? 5000}`,
            `sentinel parallel-syncs ${masterName} 1`,
          ];
          if (pw !== undefined) config.push(`sentinel auth-pass ${masterName} ${pw}`);
          const node = new RedisNode({
            name: `redis-sentinel${i}`,
            binary: 'redis-sentinel',
            dir: sdir,
            port,
            config,
            probe: { port },
          });
          started.push(node);
          await node.start(left());
          return node;
        });
      }),
    );

    // Each sentinel must see the replica and the other sentinels (hello messages every 2 s).
    await waitUntil(
      async () => {
        for (const s of sentinels) {
          const r = await respCommand({ port: s.port }, 'SENTINEL', 'MASTER', masterName);
          if (!Array.isArray(r)) return false;
          const m: Record<string, string> = {};
          for (let i = 0; i + 1 < r.length; i += 2) m[String(r[i])] = String(r[i + 1]);
          if (Number(m['num-slaves']) < 1 || Number(m['num-other-sentinels']) < count - 1) return false;
        }
        return true;
      },
      {
        deadlineMs: left(),
        intervalMs: 100,
        what: 'every sentinel to see the replica and the other sentinels',
        context: () => sentinels.map((s) => s.logTail(10)).join('\n'),
      },
    );
    return new RedisSentinelGroup(masterName, [master, replica], sentinels, dir, pw);
  } catch (err) {
    await Promise.all(started.map((n) => n.kill()));
    removeTempDir(dir);
    throw err;
  }
}
