// A real Sentinel group: a master, a replica and (by default) three sentinels on free loopback ports, with a
// failover helper that kills the master and waits until every live sentinel names the new one.
import { join } from 'node:path';
import { Redis, type RedisOptions as IORedisOptions } from 'ioredis';
import { LOOPBACK, freePort, makeTempDir, removeTempDir, waitUntil } from '../net.js';
import { baseConfig, ClientSet, RedisNode, withPortRetry } from './node.js';
import { redisInfo, respCommand } from './resp.js';

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
