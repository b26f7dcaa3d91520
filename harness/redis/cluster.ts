// A real Redis Cluster on free loopback ports (masters, optional replicas, made with redis-cli --cluster
// create), with failover helpers that kill a master and wait until the cluster has promoted its replica.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Cluster, type ClusterOptions } from 'ioredis';
import { LOOPBACK, freePort, makeTempDir, removeTempDir, waitUntil } from '../net.js';
import { makeCerts, type CertPaths } from '../tls.js';
import { clusterSlot } from '../../ratelimit/redis/index.js';
import { baseConfig, ClientSet, DEFAULT_START_DEADLINE_MS, RedisNode, withPortRetry } from './node.js';
import { parseInfo, respCommand, respCommands, type RespTarget } from './resp.js';

const execFileP = promisify(execFile);

// Cluster key slots: the service's own function, so the harness test checks it against CLUSTER KEYSLOT.

/** The Redis Cluster hash slot of a key. */
export const slotOf = clusterSlot;

export interface StartRedisClusterOptions {
  masters?: number;
  replicasPerMaster?: number;
  /** cluster-node-timeout: how soon a silent master is declared failed (default 2000 ms). */
  nodeTimeoutMs?: number;
  /** requirepass + masterauth on every node. */
  password?: string;
  /** Extra redis-server args for every node. */
  args?: string[];
  /**
   * TLS only on every node (clients, cluster bus, replication), with certificates made for
   * 127.0.0.1; clients are not asked for a certificate.
   */
  tls?: boolean;
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
    /** With `tls`: the certificates (the CA verifies every node). */
    readonly certs?: CertPaths,
  ) {}

  /** Comma-separated host:port of every node, as REDIS_URL expects for REDIS_TYPE=cluster. */
  get urls(): string {
    return this.nodes.map((n) => n.url).join(',');
  }

  private probe(port: number): RespTarget {
    return probeOf(port, this.password, this.certs);
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
    const redisOptions = {
      ...(this.password ? { password: this.password } : {}),
      ...(this.certs ? { tls: { ca: readFileSync(this.certs.caPath) } } : {}),
    };
    return { ...(Object.keys(redisOptions).length > 0 ? { redisOptions } : {}), ...overrides };
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

/** How the harness reaches a node: its password, and with TLS the CA that verifies it. */
function probeOf(port: number, password: string | undefined, certs: CertPaths | undefined): RespTarget {
  return { port, password, ...(certs ? { tls: { ca: readFileSync(certs.caPath) } } : {}) };
}

async function startClusterNode(
  dir: string,
  i: number,
  opts: StartRedisClusterOptions,
  deadlineMs: number,
  certs: CertPaths | undefined,
): Promise<RedisNode> {
  let attempt = 0;
  return withPortRetry(async () => {
    const port = await freePort();
    const busPort = await freePort();
    const nodeDir = join(dir, `node${i}-${attempt++}`);
    // with TLS, serve TLS only: the plain port is off
    const config = [
      ...baseConfig(nodeDir, certs ? 0 : port),
      'cluster-enabled yes',
      'cluster-config-file nodes.conf',
      `cluster-node-timeout ${opts.nodeTimeoutMs ?? 2000}`,
      `cluster-port ${busPort}`,
      // a replica may always take over, however long it was disconnected: tests kill masters at will
      'cluster-replica-validity-factor 0',
    ];
    if (opts.password !== undefined)
      config.push(`requirepass ${opts.password}`, `masterauth ${opts.password}`);
    if (certs) {
      config.push(
        `tls-port ${port}`,
        `tls-cert-file ${certs.certPath}`,
        `tls-key-file ${certs.keyPath}`,
        `tls-ca-cert-file ${certs.caPath}`,
        // the node's side of bus and replication connections (the server certificate is not a client's)
        `tls-client-cert-file ${certs.clientCertPath}`,
        `tls-client-key-file ${certs.clientKeyPath}`,
        'tls-auth-clients no',
        'tls-cluster yes',
        'tls-replication yes',
      );
    }
    const node = new RedisNode({
      name: `redis-cluster-node${i}`,
      binary: 'redis-server',
      dir: nodeDir,
      port,
      config,
      args: opts.args,
      probe: probeOf(port, opts.password, certs),
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
    const certs = opts.tls ? await makeCerts(join(dir, 'certs')) : undefined;
    const started = await Promise.allSettled(
      Array.from({ length: total }, (_, i) => startClusterNode(dir, i, opts, deadlineMs, certs)),
    );
    for (const s of started) if (s.status === 'fulfilled') nodes.push(s.value);
    const failed = started.find((s) => s.status === 'rejected');
    if (failed) throw (failed as PromiseRejectedResult).reason;

    const args = ['--cluster', 'create', ...nodes.map((n) => `${LOOPBACK}:${n.port}`)];
    args.push('--cluster-replicas', String(replicas), '--cluster-yes');
    if (opts.password !== undefined) args.push('-a', opts.password, '--no-auth-warning');
    if (certs) args.push('--tls', '--cacert', certs.caPath);
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
    const probe = (port: number): RespTarget => probeOf(port, opts.password, certs);
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
    return new RedisCluster(nodes, handles, dir, opts.password, certs);
  } catch (err) {
    await cleanup();
    throw err;
  }
}
