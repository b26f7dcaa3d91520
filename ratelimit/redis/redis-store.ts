// Counters in Redis with the reference's commands and key format: per descriptor one
// INCRBY key hits and one EXPIRE key seconds, or the limit script (limit-script.ts). Each batch the
// batcher hands down goes to its deployment: with REDIS_PERSECOND, SECOND-unit counters and checks to
// a second deployment, everything else to the first. The shards of the circuit breaker are named here.
import type { Logger } from '../../common/index.js';
import type { Cluster, Redis } from 'ioredis';
import {
  allOrFirstError,
  type BatchResults,
  type CounterOp,
  type LimitCheck,
  type LimitVerdict,
  type ShardBatch,
  type ShardedStore,
} from '../counting/index.js';
import type { RedisSettings, TlsFiles } from '../settings/index.js';
import { clusterSlot } from './cluster-slot.js';
import type { StartupBackoff } from './client-options.js';
import { RedisDeployment } from './redis-deployment.js';

const NONE: readonly never[] = Object.freeze([]);

export interface RedisCounterStoreOptions {
  settings: RedisSettings;
  tlsFiles: TlsFiles;
  /** A second deployment for SECOND-unit limits (REDIS_PERSECOND). */
  perSecond?: { settings: RedisSettings; tlsFiles: TlsFiles };
  logger?: Logger;
  /**
   * Told when a `single` deployment becomes a replica (REPLICAOF: it answers READONLY) and when it is a
   * master again; the service keeps a gauge of it.
   */
  onRole?: (deployment: string, replica: boolean) => void;
  /** REDIS_STARTUP_*_INTERVAL: the wait between connection attempts at startup; ours when absent. */
  startupBackoff?: StartupBackoff;
}

export class RedisCounterStore implements ShardedStore {
  readonly main: RedisDeployment;
  readonly perSecond?: RedisDeployment;
  private readonly startupBackoff: StartupBackoff | undefined;

  constructor(opts: RedisCounterStoreOptions) {
    this.startupBackoff = opts.startupBackoff;
    this.main = new RedisDeployment('REDIS', opts.settings, opts.tlsFiles, opts.logger, opts.onRole);
    if (opts.perSecond) {
      this.perSecond = new RedisDeployment(
        'REDIS_PERSECOND',
        opts.perSecond.settings,
        opts.perSecond.tlsFiles,
        opts.logger,
        opts.onRole,
      );
    }
  }

  private deployments(): RedisDeployment[] {
    return this.perSecond ? [this.main, this.perSecond] : [this.main];
  }

  /** Connects every deployment, waiting (with a log line saying for what) until the deadline. */
  async start(deadlineMs = 60_000): Promise<void> {
    await Promise.all(this.deployments().map((d) => d.connect(deadlineMs, this.startupBackoff)));
  }

  // --- shards, for the circuit breaker: a deployment, or on a cluster the master serving the slot ---

  shardOf(key: string, perSecond: boolean): string {
    const d = perSecond && this.perSecond ? this.perSecond : this.main;
    if (!d.isCluster) return d.name;
    // ioredis' slot map: for each slot the node keys serving it, the master first.
    const master = (d.client as Cluster).slots[clusterSlot(key)]?.[0];
    return master === undefined ? d.name : `${d.name} ${master}`;
  }

  async probe(shard: string): Promise<void> {
    const space = shard.indexOf(' ');
    const d = this.deploymentNamed(space < 0 ? shard : shard.slice(0, space));
    if (space < 0 || !d.isCluster) return d.ping();
    const nodeKey = shard.slice(space + 1);
    const c = d.client as Cluster;
    // A master that no longer serves any slot (failed over) has no keys left: its circuit can close.
    if (!c.slots.some((s) => s?.[0] === nodeKey)) return;
    const node = c.nodes('master').find((n: Redis) => `${n.options.host}:${n.options.port}` === nodeKey);
    if (node === undefined) return;
    return d.ping(node);
  }

  private deploymentNamed(name: string): RedisDeployment {
    return this.perSecond && name === this.perSecond.name ? this.perSecond : this.main;
  }

  /** The deployments (as shard names) without an answered PING: tripped when startup goes on without them. */
  unreachableShards(): string[] {
    return this.deployments()
      .filter((d) => !d.everConnected)
      .map((d) => d.name);
  }

  /**
   * Every deployment has answered at least once since start, and none is a `single` Redis demoted to
   * replica (health: ready for the cache).
   */
  hasConnected(): boolean {
    return this.deployments().every((d) => d.everConnected && !d.demoted);
  }

  /** Keeps connecting, in the background, the deployments startup went on without; logs when one is up. */
  keepConnecting(): void {
    for (const d of this.deployments()) {
      if (d.everConnected) continue;
      d.connect(Number.POSITIVE_INFINITY, this.startupBackoff).catch(() => undefined);
    }
  }

  /** One shard's batch (the batcher's): sent to its deployment as is. */
  send(batch: ShardBatch): Promise<BatchResults> {
    return this.sendSplit(batch.ops, batch.checks);
  }

  increment(ops: readonly CounterOp[]): Promise<number[]> {
    return this.sendSplit(ops, NONE).then((r) => allOrFirstError(r.counts));
  }

  incrementEach(ops: readonly CounterOp[]): Promise<(number | Error)[]> {
    return this.sendSplit(ops, NONE).then((r) => r.counts);
  }

  evaluate(checks: readonly LimitCheck[]): Promise<LimitVerdict[]> {
    return this.sendSplit(NONE, checks).then((r) => allOrFirstError(r.verdicts));
  }

  /** evaluate, each check settled on its own (its verdict or its own error). */
  evaluateEach(checks: readonly LimitCheck[]): Promise<(LimitVerdict | Error)[]> {
    return this.sendSplit(NONE, checks).then((r) => r.verdicts);
  }

  /**
   * Each deployment its share (with REDIS_PERSECOND, a mix is sent to both in parallel and the results
   * put back in order; each fails on its own). Never rejects.
   */
  private sendSplit(ops: readonly CounterOp[], checks: readonly LimitCheck[]): Promise<BatchResults> {
    const ps = this.perSecond;
    if (!ps) return this.main.send(ops, checks);
    let nSecond = 0;
    for (let i = 0; i < ops.length; i++) if (ops[i]!.perSecond) nSecond++;
    for (let i = 0; i < checks.length; i++) if (checks[i]!.perSecond) nSecond++;
    if (nSecond === 0) return this.main.send(ops, checks);
    if (nSecond === ops.length + checks.length) return ps.send(ops, checks);
    const opsAt: number[][] = [[], []];
    const checksAt: number[][] = [[], []];
    ops.forEach((o, i) => opsAt[o.perSecond ? 1 : 0]!.push(i));
    checks.forEach((c, i) => checksAt[c.perSecond ? 1 : 0]!.push(i));
    const counts = new Array<number | Error>(ops.length);
    const verdicts = new Array<LimitVerdict | Error>(checks.length);
    return Promise.all(
      [this.main, ps].map((d, k) =>
        d
          .send(
            opsAt[k]!.map((i) => ops[i]!),
            checksAt[k]!.map((i) => checks[i]!),
          )
          .then((r) => {
            opsAt[k]!.forEach((i, j) => (counts[i] = r.counts[j]!));
            checksAt[k]!.forEach((i, j) => (verdicts[i] = r.verdicts[j]!));
          }),
      ),
    ).then(() => ({ counts, verdicts }));
  }

  get(ops: readonly CounterOp[]): Promise<number[]> {
    if (!this.perSecond) return this.main.get(ops);
    return this.split(ops, (d, part) => d.get(part));
  }

  /** Sends each deployment its share of a mixed request, in parallel, and restores op order. */
  private async split(
    ops: readonly CounterOp[],
    run: (d: RedisDeployment, part: CounterOp[]) => Promise<number[]>,
  ): Promise<number[]> {
    const mainIdx: number[] = [];
    const secIdx: number[] = [];
    for (let i = 0; i < ops.length; i++) (ops[i].perSecond ? secIdx : mainIdx).push(i);
    const [a, b] = await Promise.all([
      mainIdx.length
        ? run(
            this.main,
            mainIdx.map((i) => ops[i]),
          )
        : [],
      secIdx.length
        ? run(
            this.perSecond!,
            secIdx.map((i) => ops[i]),
          )
        : [],
    ]);
    const out = new Array<number>(ops.length);
    mainIdx.forEach((i, j) => (out[i] = a[j]));
    secIdx.forEach((i, j) => (out[i] = b[j]));
    return out;
  }

  isHealthy(): boolean {
    return this.main.isHealthy() && (this.perSecond?.isHealthy() ?? true);
  }

  async close(): Promise<void> {
    await Promise.all(this.deployments().map((d) => d.close()));
  }
}
