// A Redis Cluster for a measurement: the harness' real cluster (harness/redis/cluster.ts), every node
// pinned to the aux core, counted as one Redis: commands and CPU summed over the masters, FLUSHALL on
// each master.
import { respCommand, startRedisCluster, type RedisCluster } from '../../harness/redis/index.js';
import { countedCommandCalls, cpuSeconds, pin, type RedisUnderTest } from './services.js';

export class BenchRedisCluster implements RedisUnderTest {
  private constructor(
    readonly cluster: RedisCluster,
    /** Port and pid of each master (no failover happens during a measurement). */
    readonly masters: { port: number; pid: number }[],
  ) {}

  /** Starts `masters` masters without replicas (a replica's replication would share the aux core). */
  static async start(cpus: string, masters = 3): Promise<BenchRedisCluster> {
    const cluster = await startRedisCluster({ masters, replicasPerMaster: 0, args: ['--save', ''] });
    try {
      const ports = new Set((await cluster.masters()).map((m) => m.port));
      const nodes = cluster.nodes.filter((n) => ports.has(n.port));
      for (const n of cluster.nodes) pin(n.pid, cpus);
      return new BenchRedisCluster(
        cluster,
        nodes.map((n) => ({ port: n.port, pid: n.pid })),
      );
    } catch (err) {
      await cluster.stop();
      throw err;
    }
  }

  /** REDIS_URL for REDIS_TYPE=cluster: every node. */
  get urls(): string {
    return this.cluster.urls;
  }

  async commandCalls(): Promise<{ total: number; byCommand: Record<string, number> }> {
    const each = await Promise.all(this.masters.map((m) => countedCommandCalls(m.port)));
    const byCommand: Record<string, number> = {};
    let total = 0;
    for (const c of each) {
      total += c.total;
      for (const [k, v] of Object.entries(c.byCommand)) byCommand[k] = (byCommand[k] ?? 0) + v;
    }
    return { total, byCommand };
  }

  cpuSeconds(): number {
    return this.masters.reduce((sum, m) => sum + cpuSeconds(m.pid), 0);
  }

  async flushAll(): Promise<void> {
    await Promise.all(this.masters.map((m) => respCommand({ port: m.port, timeoutMs: 30_000 }, 'FLUSHALL')));
  }

  stop(): Promise<void> {
    return this.cluster.stop();
  }
}
