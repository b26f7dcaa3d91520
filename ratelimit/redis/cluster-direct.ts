// Direct counting on a Redis Cluster: one direct counting connection (direct-counter.ts) per master,
// opened on the first batch for that master and following ioredis' connection to it. The masters are
// those of ioredis' slot map (`slots`, `nodes('master')`): no map of our own is kept, so the connections
// are at most one per master ioredis knows, and one is closed when ioredis drops its node (it left the
// map, or ioredis replaced its connection) or when a map refresh no longer names it a master.
import type { Cluster, Redis } from 'ioredis';
import { DirectCounter } from './direct-counter.js';

/** ioredis' name for a node: `host:port`, as its slot map holds it. */
export function nodeKeyOf(node: Redis): string {
  return `${node.options.host}:${node.options.port}`;
}

export class ClusterDirectCounters {
  private readonly byNode = new Map<string, DirectCounter>();
  private closed = false;

  constructor(
    private readonly cluster: Cluster,
    /** A direct counter following one master node's ioredis connection. */
    private readonly make: (node: Redis) => DirectCounter,
  ) {
    cluster.on('-node', this.dropNode);
    cluster.on('refresh', this.prune);
  }

  /**
   * The direct counter of the master ioredis' slot map names `nodeKey`, when it can take a request now;
   * undefined: send through ioredis (a node ioredis does not list as a master, or whose connection is
   * not ready, or a direct connection that failed a moment ago).
   */
  usable(nodeKey: string): DirectCounter | undefined {
    let d = this.byNode.get(nodeKey);
    if (d === undefined) {
      if (this.closed) return undefined;
      const node = this.master(nodeKey);
      if (node === undefined) return undefined;
      d = this.make(node);
      this.byNode.set(nodeKey, d);
    }
    return d.usable() ? d : undefined;
  }

  /** How many direct connections are kept (one per master at most). */
  get size(): number {
    return this.byNode.size;
  }

  close(): void {
    this.closed = true;
    this.cluster.off('-node', this.dropNode);
    this.cluster.off('refresh', this.prune);
    for (const d of this.byNode.values()) d.close();
    this.byNode.clear();
  }

  private master(nodeKey: string): Redis | undefined {
    for (const n of this.cluster.nodes('master')) if (nodeKeyOf(n) === nodeKey) return n;
    return undefined;
  }

  /** ioredis dropped a node's connection (the node left the map, or its connection was replaced). */
  private readonly dropNode = (node: Redis): void => {
    for (const [key, d] of this.byNode) {
      if (d.client !== node) continue;
      d.close();
      this.byNode.delete(key);
    }
  };

  /** After a slot map refresh: only the masters ioredis lists keep a direct connection. */
  private readonly prune = (): void => {
    const masters = new Set<Redis>(this.cluster.nodes('master'));
    for (const [key, d] of this.byNode) {
      if (masters.has(d.client)) continue;
      d.close();
      this.byNode.delete(key);
    }
  };
}
