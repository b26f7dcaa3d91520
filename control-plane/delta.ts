// Incremental (delta) xDS responses: the pieces the ADS server assembles per stream. With state of the
// world every pod is sent the whole resource set on every change; with delta it is sent only the
// resources whose version differs from what it has, and the names it has that are gone. So each
// resource gets its own version (a hash of its name and bytes, stable across control-plane restarts and
// equal on replicas with equal content) and is encoded once, as the bytes of one `resources` entry of a
// DeltaDiscoveryResponse; a stream's response is those entries copied into one buffer. The usual push
// (every pod ACKed the previous snapshot, a new one arrives) is the same diff for every pod, so it is
// assembled once, nonce included, and the same bytes go to each of those pods, as a SotW response does:
// the nonce is per assembled response. It is unique on each stream all the same: a shared response
// goes from one view of a snapshot (or from nothing) to another, a stream is only ever moved forward
// (a view's state comes back only with that very snapshot object, and a NACKed version is never resent),
// so no stream is sent one twice. Responses a single stream needs (a reconnect with its own
// initial_resource_versions, explicit subscriptions) get a nonce of their own.
//
// DeltaDiscoveryResponse (envoy.service.discovery.v3): system_version_info = 1, resources = 2
// (Resource: version = 1, resource = 2 (Any: type_url = 1, value = 2), name = 3), type_url = 4,
// nonce = 5, removed_resources = 6, control_plane = 7 (ControlPlane: identifier = 1). Fields may come
// in any order, so the nonce goes last, after the rest.
import { createHash } from 'node:crypto';
import type { Resource, ResourceSet } from './cache.js';
import {
  anySize,
  controlPlaneSize,
  fieldSize,
  putAny,
  putControlPlane,
  putField,
  putHeader,
} from './wire.js';

const TAG_SYSTEM_VERSION = 0x0a; // field 1, length-delimited
const TAG_RESOURCES = 0x12; // field 2
const TAG_TYPE_URL = 0x22; // field 4
const TAG_NONCE = 0x2a; // field 5
const TAG_REMOVED = 0x32; // field 6
const TAG_CONTROL_PLANE = 0x3a; // field 7
const TAG_RES_VERSION = 0x0a; // Resource.version = 1
const TAG_RES_ANY = 0x12; // Resource.resource = 2
const TAG_RES_NAME = 0x1a; // Resource.name = 3

/** A resource's delta version: sha256 over (type URL, name, bytes), length-prefixed, 16 hex digits. */
export function resourceVersion(r: Resource): string {
  const h = createHash('sha256');
  const len = Buffer.alloc(4);
  for (const b of [Buffer.from(r.typeUrl, 'utf8'), Buffer.from(r.name, 'utf8'), r.value]) {
    len.writeUInt32BE(b.length, 0);
    h.update(len);
    h.update(b);
  }
  return h.digest('hex').slice(0, 16);
}

/** One resource encoded once: the whole `resources` entry (tag and length included) of a response. */
export interface EncodedDeltaResource {
  readonly name: string;
  readonly version: string;
  readonly entry: Buffer;
}

function encodeResource(r: Resource): EncodedDeltaResource {
  const version = resourceVersion(r);
  const v = Buffer.from(version, 'utf8');
  const url = Buffer.from(r.typeUrl, 'utf8');
  const name = Buffer.from(r.name, 'utf8');
  const msg = fieldSize(v.length) + fieldSize(anySize(url, r.value)) + fieldSize(name.length);
  const entry = Buffer.allocUnsafe(fieldSize(msg));
  let pos = putHeader(entry, 0, TAG_RESOURCES, msg);
  pos = putField(entry, pos, TAG_RES_VERSION, v);
  pos = putAny(entry, pos, TAG_RES_ANY, url, r.value);
  pos = putField(entry, pos, TAG_RES_NAME, name);
  if (pos !== entry.length) throw new Error(`delta Resource size mismatch: ${pos} of ${entry.length}`);
  return { name: r.name, version, entry };
}

/** A resource set as delta streams see it: per name its version and encoded entry. */
export interface DeltaView {
  readonly set: ResourceSet;
  /** name -> version: also what a wildcard client has once it ACKed this set (shared, never mutated). */
  readonly versions: ReadonlyMap<string, string>;
  readonly byName: ReadonlyMap<string, EncodedDeltaResource>;
  /** Features the set's resources require (the union, sorted). */
  readonly requiredFeatures: readonly string[];
}

/** The part of a response every stream with the same starting point shares: all but the nonce. */
export interface DeltaBody {
  readonly bytes: Buffer;
  readonly added: number;
  readonly removed: readonly string[];
  /** The names of the resources sent. */
  readonly names: readonly string[];
  /** Sent as is to every stream that starts where it starts (see wildcardBody). */
  readonly shared: boolean;
  /** A shared body's response, nonce included, once sealed. */
  sealed?: { readonly nonce: string; readonly bytes: Buffer };
}

/** What a client has before anything is sent: the shared starting point of new wildcard streams. */
export const NOTHING: ReadonlyMap<string, string> = new Map();

export class DeltaEncoder {
  private readonly views = new WeakMap<ResourceSet, DeltaView>();
  private readonly resources = new WeakMap<Resource, EncodedDeltaResource>();
  /** Per starting point (a view's `versions`, or NOTHING): the last wildcard diff assembled from it. */
  private readonly diffs = new WeakMap<ReadonlyMap<string, string>, { to: DeltaView; body: DeltaBody }>();
  /** The views' `versions` maps: starting points many streams share. */
  private readonly shared = new WeakSet<ReadonlyMap<string, string>>();
  private encodes = 0;

  constructor(private readonly identifier: string | undefined) {}

  /** Resources encoded so far (each once, however many streams and responses carry it). */
  get resourcesEncoded(): number {
    return this.encodes;
  }

  view(set: ResourceSet): DeltaView {
    let v = this.views.get(set);
    if (v) return v;
    const versions = new Map<string, string>();
    const byName = new Map<string, EncodedDeltaResource>();
    const features = new Set<string>();
    for (const r of set.resources) {
      let e = this.resources.get(r);
      if (!e) {
        e = encodeResource(r);
        this.resources.set(r, e);
        this.encodes++;
      }
      versions.set(r.name, e.version);
      byName.set(r.name, e);
      for (const f of r.requiredFeatures ?? []) features.add(f);
    }
    v = { set, versions, byName, requiredFeatures: [...features].sort() };
    this.shared.add(versions);
    this.views.set(set, v);
    return v;
  }

  /**
   * A wildcard stream's diff from what it has to the whole view. When `known` is shared (a view's
   * `versions` or NOTHING), the diff is assembled once for every stream that starts there.
   */
  wildcardBody(known: ReadonlyMap<string, string>, to: DeltaView): DeltaBody {
    const cached = this.diffs.get(known);
    if (cached && cached.to === to) return cached.body;
    const added: EncodedDeltaResource[] = [];
    for (const e of to.byName.values()) if (known.get(e.name) !== e.version) added.push(e);
    const removed: string[] = [];
    for (const name of known.keys()) if (!to.byName.has(name)) removed.push(name);
    removed.sort();
    const shared = known === NOTHING || this.shared.has(known);
    const body = this.body(to.set, added, removed, shared);
    if (shared) this.diffs.set(known, { to, body });
    return body;
  }

  /**
   * An explicit subscriber's diff: of the names it subscribes to, those whose version differs from what
   * it has, and those it has that no longer exist. Returns what it has after applying it.
   */
  subscribedBody(
    known: ReadonlyMap<string, string>,
    subscribed: ReadonlySet<string>,
    to: DeltaView,
  ): { body: DeltaBody; after: Map<string, string> } {
    const added: EncodedDeltaResource[] = [];
    const removed: string[] = [];
    const after = new Map<string, string>();
    for (const name of [...subscribed].sort()) {
      const e = to.byName.get(name);
      if (e) {
        after.set(name, e.version);
        if (known.get(name) !== e.version) added.push(e);
      } else if (known.has(name)) removed.push(name);
    }
    return { body: this.body(to.set, added, removed, false), after };
  }

  /**
   * The response with its nonce, in one buffer: a shared body's is made once (with the first nonce
   * `nextNonce` gives) and reused; any other body gets a new nonce.
   */
  static seal(body: DeltaBody, nextNonce: () => string): { readonly nonce: string; readonly bytes: Buffer } {
    if (body.sealed) return body.sealed;
    const nonce = nextNonce();
    const n = Buffer.from(nonce, 'utf8');
    const bytes = Buffer.allocUnsafe(body.bytes.length + fieldSize(n.length));
    body.bytes.copy(bytes, 0);
    putField(bytes, body.bytes.length, TAG_NONCE, n);
    const sealed = { nonce, bytes };
    if (body.shared) body.sealed = sealed;
    return sealed;
  }

  private body(
    set: ResourceSet,
    added: readonly EncodedDeltaResource[],
    removed: string[],
    shared: boolean,
  ): DeltaBody {
    const sys = Buffer.from(set.version, 'utf8');
    const url = Buffer.from(set.typeUrl, 'utf8');
    const ident = this.identifier ? Buffer.from(this.identifier, 'utf8') : undefined;
    const removedBytes = removed.map((n) => Buffer.from(n, 'utf8'));
    let total = fieldSize(sys.length) + fieldSize(url.length);
    for (const e of added) total += e.entry.length;
    for (const b of removedBytes) total += fieldSize(b.length);
    if (ident) total += controlPlaneSize(ident);
    const out = Buffer.allocUnsafe(total);
    let pos = putField(out, 0, TAG_SYSTEM_VERSION, sys);
    for (const e of added) {
      e.entry.copy(out, pos);
      pos += e.entry.length;
    }
    pos = putField(out, pos, TAG_TYPE_URL, url);
    for (const b of removedBytes) pos = putField(out, pos, TAG_REMOVED, b);
    if (ident) pos = putControlPlane(out, pos, TAG_CONTROL_PLANE, ident);
    if (pos !== total) throw new Error(`DeltaDiscoveryResponse size mismatch: ${pos} of ${total}`);
    return { bytes: out, added: added.length, removed, names: added.map((e) => e.name), shared };
  }
}
