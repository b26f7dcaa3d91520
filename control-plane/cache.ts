// The snapshot cache: what each node should run, separate from stream handling (go-control-plane's
// split). A snapshot holds, per type URL, the whole resource set and its version. Versions are a
// hash of the content, so replicas holding the same content agree on the version.
import { createHash } from 'node:crypto';
import { EventEmitter } from 'node:events';

/** One xDS resource, already encoded (the `value` of its google.protobuf.Any). */
export interface Resource {
  readonly name: string;
  readonly typeUrl: string;
  readonly value: Uint8Array;
  /** Features a pod must announce to be sent this resource (proto featuresOfMessage); none when absent. */
  readonly requiredFeatures?: readonly string[];
}

/** The resources of one type in a snapshot, sorted by name. */
export interface ResourceSet {
  readonly typeUrl: string;
  readonly version: string;
  readonly resources: readonly Resource[];
}

export interface Snapshot {
  /** Per type URL. A type absent here has no resources and version of the empty set. */
  readonly types: ReadonlyMap<string, ResourceSet>;
  resourceSet(typeUrl: string): ResourceSet;
}

/** Emitted as 'change' with the node ids whose effective snapshot changed; `'*'` means every node without its own snapshot. */
export type CacheChange = readonly string[];

export const DEFAULT_NODE = '*';

export interface SnapshotCache {
  /** Sets a node's own snapshot (replacing the default for that node). */
  setSnapshot(nodeId: string, resources: readonly Resource[]): Snapshot;
  /** Sets the snapshot of every node that has none of its own. */
  setDefaultSnapshot(resources: readonly Resource[]): Snapshot;
  /** Removes a node's own snapshot; the node falls back to the default one. */
  clearSnapshot(nodeId: string): void;
  /** The snapshot a node is served: its own, else the default, else undefined (nothing to serve yet). */
  getSnapshot(nodeId: string): Snapshot | undefined;
  /** Node ids with their own snapshot. */
  nodeIds(): string[];
  on(event: 'change', listener: (nodes: CacheChange) => void): this;
  off(event: 'change', listener: (nodes: CacheChange) => void): this;
}

/** Version of a resource set: sha256 over (type, then per resource sorted by name: name, bytes), length-prefixed. */
export function resourceSetVersion(typeUrl: string, sorted: readonly Resource[]): string {
  const h = createHash('sha256');
  const len = Buffer.alloc(4);
  const put = (b: Uint8Array) => {
    len.writeUInt32BE(b.length, 0);
    h.update(len);
    h.update(b);
  };
  put(Buffer.from(typeUrl, 'utf8'));
  for (const r of sorted) {
    put(Buffer.from(r.name, 'utf8'));
    put(r.value);
  }
  return h.digest('hex').slice(0, 16);
}

function emptySet(typeUrl: string): ResourceSet {
  return { typeUrl, version: resourceSetVersion(typeUrl, []), resources: [] };
}

/** Builds an immutable snapshot: groups by type, sorts by name, rejects duplicate names within a type. */
export function buildSnapshot(resources: readonly Resource[]): Snapshot {
  const byType = new Map<string, Resource[]>();
  for (const r of resources) {
    let list = byType.get(r.typeUrl);
    if (!list) byType.set(r.typeUrl, (list = []));
    list.push(r);
  }
  const types = new Map<string, ResourceSet>();
  for (const [typeUrl, list] of byType) {
    list.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (let i = 1; i < list.length; i++) {
      if (list[i].name === list[i - 1].name) {
        throw new Error(`duplicate resource name ${JSON.stringify(list[i].name)} for type ${typeUrl}`);
      }
    }
    types.set(
      typeUrl,
      Object.freeze({ typeUrl, version: resourceSetVersion(typeUrl, list), resources: Object.freeze(list) }),
    );
  }
  const empties = new Map<string, ResourceSet>();
  return Object.freeze({
    types,
    resourceSet(typeUrl: string): ResourceSet {
      const set = types.get(typeUrl);
      if (set) return set;
      let e = empties.get(typeUrl);
      if (!e) empties.set(typeUrl, (e = emptySet(typeUrl)));
      return e;
    },
  });
}

function sameVersions(a: Snapshot | undefined, b: Snapshot): boolean {
  if (!a || a.types.size !== b.types.size) return false;
  for (const [t, set] of b.types) if (a.types.get(t)?.version !== set.version) return false;
  return true;
}

export class InMemorySnapshotCache extends EventEmitter implements SnapshotCache {
  private readonly perNode = new Map<string, Snapshot>();
  private defaultSnapshot: Snapshot | undefined;

  setSnapshot(nodeId: string, resources: readonly Resource[]): Snapshot {
    const snap = buildSnapshot(resources);
    const prev = this.getSnapshot(nodeId);
    this.perNode.set(nodeId, snap);
    if (!sameVersions(prev, snap)) this.emit('change', [nodeId]);
    return snap;
  }

  setDefaultSnapshot(resources: readonly Resource[]): Snapshot {
    const snap = buildSnapshot(resources);
    const prev = this.defaultSnapshot;
    this.defaultSnapshot = snap;
    if (!sameVersions(prev, snap)) this.emit('change', [DEFAULT_NODE]);
    return snap;
  }

  clearSnapshot(nodeId: string): void {
    const prev = this.perNode.get(nodeId);
    if (!prev) return;
    this.perNode.delete(nodeId);
    // Streams stay as they are when the default has no content: SotW cannot say "nothing to serve".
    if (this.defaultSnapshot && !sameVersions(prev, this.defaultSnapshot)) this.emit('change', [nodeId]);
  }

  getSnapshot(nodeId: string): Snapshot | undefined {
    return this.perNode.get(nodeId) ?? this.defaultSnapshot;
  }

  hasOwnSnapshot(nodeId: string): boolean {
    return this.perNode.has(nodeId);
  }

  nodeIds(): string[] {
    return [...this.perNode.keys()];
  }
}
