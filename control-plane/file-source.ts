// Standalone mode's source: RateLimitConfig custom-resource manifests or plain ratelimit YAML files
// in a directory, validated with the service's own validator and put into the snapshot cache.
//
//   <dir>/*.yaml                  -> the default snapshot (every node without its own)
//   <dir>/nodes/<node-id>/*.yaml  -> that node's own snapshot
//
// Re-read on change (fs.watch) and by a periodic rescan (fs.watch misses changes on
// some filesystems and on ConfigMap symlink swaps). An invalid file is logged with the validator's
// message and the last good snapshot of its group keeps serving. An empty file is a document too
// (the validator refuses its empty domain, as the service and `ratelimit-config validate` do), so a
// truncated file never serves "no domains". A change is read as soon as its writes have settled
// (settleMs of quiet, 10 ms by default), not after a fixed delay; a burst of changes is coalesced into
// at most one read per debounceMs window (200 ms by default), so an edit storm cannot keep the
// control plane re-validating and re-pushing. Content that fails is re-read a few times after a
// short pause before it is declared rejected: an editor's truncate-then-write or a copy in progress
// is caught mid-write now and then, and its next read is the finished file. Files are read by common/'s
// bounded reader, as the service reads them: what is not a regular file (a FIFO, socket, device or
// directory, directly or through a link) is logged and skipped; a file over the size bound or not read
// in time fails its group. Scans are asynchronous and one at a time: nothing holds the event loop while
// files are read.
import { EventEmitter } from 'node:events';
import { existsSync, watch, type FSWatcher } from 'node:fs';
import { readdir, stat } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { RATELIMIT_CONFIG_TYPE_URL } from '../proto/index.js';
import {
  checkDocument,
  checkYamlDocument,
  checkYamlText,
  compileConfig,
  DEFAULT_YAML_LIMITS,
  fieldsLostOverXds,
  LIMIT_SETTING,
  manifestDocument,
  resolveDomainClaims,
  type DomainClaim,
  type LoadOptions,
  type ParsedConfigSource,
} from '../ratelimit/config/index.js';
import { DEFAULT_NODE, type SnapshotCache } from './cache.js';
import { resourceFromDocument } from './resources.js';
import { FileReadError, readBoundedText, silentLogger, type Logger } from '../common/index.js';

/** API group of the RateLimitConfig custom resource; any apiVersion whose group ends with it is accepted. */
export const RATELIMIT_CRD_GROUP = 'ratelimit.envoyproxy.io';
export const RATELIMIT_CRD_KIND = 'RateLimitConfig';

export interface DirectorySourceOptions {
  readonly dir: string;
  readonly cache: SnapshotCache;
  /**
   * Coalescing window: after a read triggered by a change, further changes are read together at the
   * end of this window (default 200 ms). The first change after a quiet window is read at once
   * (after settleMs).
   */
  readonly debounceMs?: number;
  /** Quiet period after a change's last file event before reading it (default 10 ms; at most debounceMs). */
  readonly settleMs?: number;
  /** Periodic rescan (default 5000 ms; 0 disables). */
  readonly rescanIntervalMs?: number;
  /** Pause before re-reading content that failed, in case it was caught mid-write (default 250 ms). */
  readonly rereadDelayMs?: number;
  /** Re-reads of failing content before it is rejected (default 3; 0 rejects at once). */
  readonly rereadAttempts?: number;
  /** MERGE_DOMAIN_CONFIG semantics for validation. */
  readonly mergeDomainConfig?: boolean;
  readonly logger?: Logger;
  /** Deadline of one file's read (default DEFAULT_FILE_READ_TIMEOUT_MS); past it the group fails. */
  readonly readTimeoutMs?: number;
  /** The validator; defaults to the service's compileConfig (throws ConfigError). */
  readonly validate?: (sources: ParsedConfigSource[], opts: LoadOptions) => unknown;
}

export interface DirectorySourceEvents {
  /** A group (node id or '*') was loaded into the cache. */
  loaded: [{ node: string; files: string[]; resources: number }];
  /** A group was rejected; its last good snapshot keeps serving. */
  rejected: [{ node: string; error: string }];
  /** A group's content failed and will be read again shortly (it may have been caught mid-write). */
  reread: [{ node: string; attempt: number; error: string }];
}

interface Group {
  readonly node: string;
  readonly dir: string;
}

function isYaml(name: string): boolean {
  return !name.startsWith('.') && (name.endsWith('.yaml') || name.endsWith('.yml'));
}

function isObject(v: unknown): v is Record<string, any> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** One document of a file: `name` is the xDS resource name, `source` names file and resource for messages. */
export interface FileConfigSource extends ParsedConfigSource {
  readonly source: string;
  /** A RateLimitConfig resource: what the domain rule reads of it. */
  readonly manifest?: { readonly createdMs?: number; readonly mergeDomain: boolean };
}

/** Parses one file into config sources: custom resources (spec) or plain ratelimit documents. */
export function parseConfigFile(displayName: string, text: string): FileConfigSource[] {
  // The service's bounds on config YAML (size, scalar length, depth, aliases and their expansion),
  // checked before anything expands.
  checkYamlText(displayName, text);
  const docs = parseAllDocuments(text);
  const out: FileConfigSource[] = [];
  const multi = docs.length > 1;
  docs.forEach((d, i) => {
    checkYamlDocument(displayName, d);
    if (d.errors.length > 0) throw new Error(`${displayName}: ${d.errors[0].message}`);
    const value: unknown = d.toJS();
    if (value === null || value === undefined) return;
    const where = multi ? `${displayName}#${i}` : displayName;
    if (isObject(value) && value.kind === RATELIMIT_CRD_KIND) {
      const apiVersion = String(value.apiVersion ?? '');
      const group = apiVersion.split('/')[0];
      if (
        !apiVersion.includes('/') ||
        !(group === RATELIMIT_CRD_GROUP || group.endsWith(`.${RATELIMIT_CRD_GROUP}`))
      ) {
        throw new Error(
          `${where}: apiVersion ${JSON.stringify(apiVersion)} is not in the ${RATELIMIT_CRD_GROUP} group`,
        );
      }
      const meta = isObject(value.metadata) ? value.metadata : {};
      if (typeof meta.name !== 'string' || meta.name === '')
        throw new Error(`${where}: metadata.name is required`);
      const name =
        typeof meta.namespace === 'string' && meta.namespace !== ''
          ? `${meta.namespace}/${meta.name}`
          : meta.name;
      const created = typeof meta.creationTimestamp === 'string' ? Date.parse(meta.creationTimestamp) : NaN;
      out.push({
        name,
        source: `${where} (${RATELIMIT_CRD_KIND} ${name})`,
        document: manifestDocument(value.spec),
        manifest: {
          ...(Number.isNaN(created) ? {} : { createdMs: created }),
          mergeDomain: isObject(value.spec) && value.spec.mergeDomain === true,
        },
      });
    } else {
      out.push({ name: where, source: where, document: value });
    }
  });
  // An empty file (or only comments, or only null documents) is read as the service reads it: an
  // empty map, which the validator refuses for its empty domain, never "no configuration".
  if (out.length === 0) out.push({ name: displayName, source: displayName, document: null });
  return out;
}

interface ManifestClaim extends DomainClaim {
  readonly src: FileConfigSource;
}

/**
 * RateLimitConfig resources as the operator serves them: each checked on its own, then the domain rule
 * (resolveDomainClaims: the oldest claim owns a domain; others join it only when both set mergeDomain),
 * one resource per domain named after its owner. A claim the rule refuses is an error, as
 * `ratelimit-config validate` reports it. Plain documents pass through unchanged.
 */
export function applyDomainRule(sources: readonly FileConfigSource[]): FileConfigSource[] {
  const claims: ManifestClaim[] = [];
  const out: FileConfigSource[] = [];
  for (const s of sources) {
    if (!s.manifest) {
      out.push(s);
      continue;
    }
    const { errors, document } = checkDocument(s.source, s.document);
    if (document === undefined) throw errors[0] ?? new Error(`${s.source}: invalid`);
    claims.push({
      key: s.name,
      ...(s.manifest.createdMs === undefined ? {} : { createdMs: s.manifest.createdMs }),
      domain: document.domain,
      descriptors: document.descriptors ?? [],
      mergeDomain: s.manifest.mergeDomain,
      src: s,
    });
  }
  for (const r of resolveDomainClaims(claims)) {
    const refused = r.rejected[0];
    if (refused) throw new Error(`${refused.claim.src.source}: ${refused.reason}: ${refused.message}`);
    const owner = r.members[0]!;
    out.push(
      r.members.length === 1
        ? owner.src
        : {
            name: owner.src.name,
            source: r.members.map((m) => m.src.source).join(' + '),
            document: r.document,
          },
    );
  }
  return out;
}

export const DEFAULT_DEBOUNCE_MS = 200;
export const DEFAULT_SETTLE_MS = 10;
export const DEFAULT_REREAD_DELAY_MS = 250;
export const DEFAULT_REREAD_ATTEMPTS = 3;

export class DirectoryConfigSource extends EventEmitter<DirectorySourceEvents> {
  private readonly log: Logger;
  private readonly watchers = new Map<string, FSWatcher>();
  private debounce: NodeJS.Timeout | undefined;
  /** performance.now() of the first file event not read yet, and of the last read a file event caused. */
  private pendingSince: number | undefined;
  private lastChangeRead = -Infinity;
  private interval: NodeJS.Timeout | undefined;
  /** Per group: fingerprint of the last content tried, so an unchanged broken file is not re-logged. */
  private readonly tried = new Map<string, string>();
  private readonly ownNodes = new Set<string>();
  /** Per group: re-reads done of content that keeps failing (reset by a load or a rejection). */
  private readonly rereads = new Map<string, number>();
  /** Per group: the files last said to be skipped. */
  private readonly skippedLogged = new Map<string, string>();
  private rereadTimer: NodeJS.Timeout | undefined;
  private started = false;
  private closed = false;
  /** The scan in progress (or settled), and the one queued after it: scans never overlap. */
  private tail: Promise<unknown> = Promise.resolve();
  private queued: Promise<string[]> | undefined;

  constructor(private readonly opts: DirectorySourceOptions) {
    super();
    this.log = opts.logger ?? silentLogger;
  }

  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    this.closed = false;
    await this.rescan();
    const every = this.opts.rescanIntervalMs ?? 5000;
    if (every > 0) {
      this.interval = setInterval(() => void this.rescan(), every);
    }
  }

  /** Stops watching; a scan in progress ends without touching the cache. */
  async close(): Promise<void> {
    this.started = false;
    this.closed = true;
    if (this.debounce) clearTimeout(this.debounce);
    if (this.rereadTimer) clearTimeout(this.rereadTimer);
    if (this.interval) clearInterval(this.interval);
    for (const w of this.watchers.values()) w.close();
    this.watchers.clear();
    await this.tail;
  }

  /** Watches the folder, nodes/ and each node folder (non-recursive inotify-style watches, kept in sync on each scan). */
  private watchDirs(groups: readonly Group[]): void {
    if (!this.started) return;
    const wanted = new Set([this.opts.dir, join(this.opts.dir, 'nodes'), ...groups.map((g) => g.dir)]);
    for (const [d, w] of this.watchers) {
      if (!wanted.has(d)) {
        w.close();
        this.watchers.delete(d);
      }
    }
    for (const d of wanted) {
      if (this.watchers.has(d) || !existsSync(d)) continue;
      try {
        const w = watch(d, () => this.scheduleRescan());
        w.on('error', () => {
          w.close();
          this.watchers.delete(d);
        });
        this.watchers.set(d, w);
      } catch (err) {
        this.log.warn(
          { dir: d, err: (err as Error).message },
          'fs.watch unavailable; relying on the periodic rescan',
        );
      }
    }
  }

  /**
   * Schedules the read of a change: settleMs after the last file event (a write often fires several),
   * but no later than debounceMs after the first one, and no earlier than debounceMs after the last read
   * a change caused (bursts are coalesced into one read per window).
   */
  private scheduleRescan(): void {
    if (!this.started) return;
    const now = performance.now();
    const window = this.opts.debounceMs ?? DEFAULT_DEBOUNCE_MS;
    const settle = Math.min(this.opts.settleMs ?? DEFAULT_SETTLE_MS, window);
    this.pendingSince ??= now;
    const at = Math.max(Math.min(now + settle, this.pendingSince + window), this.lastChangeRead + window);
    if (this.debounce) clearTimeout(this.debounce);
    this.debounce = setTimeout(
      () => {
        this.debounce = undefined;
        this.pendingSince = undefined;
        this.lastChangeRead = performance.now();
        void this.rescan();
      },
      Math.max(0, at - now),
    );
  }

  /** One re-read of every group after the settle pause (unchanged groups are skipped by fingerprint). */
  private scheduleReread(): void {
    if (!this.started || this.rereadTimer) return;
    this.rereadTimer = setTimeout(() => {
      this.rereadTimer = undefined;
      if (this.started) void this.rescan();
    }, this.opts.rereadDelayMs ?? DEFAULT_REREAD_DELAY_MS);
  }

  private async groups(): Promise<Group[]> {
    const groups: Group[] = [{ node: DEFAULT_NODE, dir: this.opts.dir }];
    const nodesDir = join(this.opts.dir, 'nodes');
    const isDir = await stat(nodesDir).then(
      (s) => s.isDirectory(),
      () => false,
    );
    if (isDir) {
      for (const e of await readdir(nodesDir, { withFileTypes: true })) {
        if (e.isDirectory() && !e.name.startsWith('.'))
          groups.push({ node: e.name, dir: join(nodesDir, e.name) });
      }
    }
    return groups;
  }

  /**
   * Reads every group, after the scan in progress if there is one (a request made while a scan is
   * queued joins it); resolves to the groups not loaded: rejected, or (once started) waiting for a
   * re-read (for tests and --check's exit code).
   */
  rescan(): Promise<string[]> {
    if (!this.queued) {
      const next = this.tail.then(() => {
        this.queued = undefined;
        return this.scan();
      });
      this.queued = next;
      this.tail = next.catch(() => undefined);
    }
    return this.queued;
  }

  private async scan(): Promise<string[]> {
    if (this.closed) return [];
    const rejected: string[] = [];
    let groups: Group[];
    try {
      groups = await this.groups();
    } catch (err) {
      this.log.error({ dir: this.opts.dir, err: (err as Error).message }, 'cannot read config directory');
      return [DEFAULT_NODE];
    }
    try {
      this.watchDirs(groups);
    } catch (err) {
      this.log.warn({ err: (err as Error).message }, 'cannot watch the config directory');
    }
    const seen = new Set<string>();
    for (const g of groups) {
      seen.add(g.node);
      if (!(await this.loadGroup(g))) rejected.push(g.node);
    }
    if (this.closed) return rejected;
    for (const node of [...this.ownNodes]) {
      if (!seen.has(node)) {
        this.ownNodes.delete(node);
        this.tried.delete(node);
        this.rereads.delete(node);
        this.skippedLogged.delete(node);
        this.opts.cache.clearSnapshot(node);
        this.log.info({ node }, 'node directory removed; node falls back to the default snapshot');
      }
    }
    return rejected;
  }

  /**
   * A group's files, each read by the bounded reader (size from fstat, then at most the bound, within
   * the deadline), one after another. What is not a regular file is set aside to be skipped; any other
   * refusal is a failure of the group.
   */
  private async readGroup(names: readonly string[], dir: string) {
    const files: { path: string; text: string }[] = [];
    const skipped: FileReadError[] = [];
    const failed: FileReadError[] = [];
    for (const name of names) {
      if (this.closed) break; // close() waits for this scan: it reads no further
      const path = join(dir, name);
      try {
        const text = await readBoundedText(path, {
          maxBytes: DEFAULT_YAML_LIMITS.maxBytes,
          maxBytesSetting: LIMIT_SETTING.maxBytes,
          timeoutMs: this.opts.readTimeoutMs,
          displayName: this.display(path),
        });
        files.push({ path, text });
      } catch (err) {
        if (!(err instanceof FileReadError)) throw err;
        (err.reason === 'not-regular' ? skipped : failed).push(err);
      }
    }
    return { files, skipped, failed };
  }

  private display(p: string): string {
    return relative(this.opts.dir, p) || p;
  }

  private async loadGroup(g: Group): Promise<boolean> {
    let read: Awaited<ReturnType<DirectoryConfigSource['readGroup']>>;
    try {
      const names = (await readdir(g.dir)).filter(isYaml).sort();
      read = await this.readGroup(names, g.dir);
    } catch (err) {
      if (this.closed) return false;
      return this.reject(g, `${g.dir}: ${(err as Error).message}`);
    }
    if (this.closed) return false;
    const { files, skipped, failed } = read;
    // What was read, and what was not (with why): an unchanged group is not validated or logged again.
    const fingerprint = JSON.stringify([
      ...files.map((f) => [f.path, f.text]),
      ...[...skipped, ...failed].map((e) => [e.file, e.message]),
    ]);
    if (this.tried.get(g.node) === fingerprint) return true;
    // Said once while the same files are skipped (re-reads of failing content included).
    const skippedNow = JSON.stringify(skipped.map((e) => e.message));
    if (skipped.length > 0 && this.skippedLogged.get(g.node) !== skippedNow) {
      for (const e of skipped) {
        this.log.warn({ node: g.node, file: e.file }, `config file skipped: ${e.message}`);
      }
    }
    this.skippedLogged.set(g.node, skippedNow);

    const display = (p: string) => this.display(p);
    try {
      const unread = failed[0];
      if (unread) throw new Error(`${unread.file}: error loading config file: ${unread.detail}`);
      const sources = applyDomainRule(files.flatMap((f) => parseConfigFile(display(f.path), f.text)));
      const validate = this.opts.validate ?? compileConfig;
      // Validated under file-based names, so messages point at the file to fix.
      validate(
        sources.map((s) => ({ name: s.source, document: s.document })),
        { mergeDomainConfig: this.opts.mergeDomainConfig ?? false },
      );
      const seen = new Map<string, string>();
      for (const s of sources) {
        const other = seen.get(s.name);
        if (other !== undefined)
          throw new Error(`${s.source}: resource name ${s.name} also used by ${other}`);
        seen.set(s.name, s.source);
        const lost = fieldsLostOverXds(s.document);
        if (lost.length > 0)
          this.log.warn({ source: s.source, fields: lost }, 'fields not carried by the xDS message');
      }
      const resources = sources.map((s) => resourceFromDocument(s.name, s.document));
      let snapshot;
      if (g.node === DEFAULT_NODE) snapshot = this.opts.cache.setDefaultSnapshot(resources);
      else {
        snapshot = this.opts.cache.setSnapshot(g.node, resources);
        this.ownNodes.add(g.node);
      }
      const version = snapshot.resourceSet(RATELIMIT_CONFIG_TYPE_URL).version;
      this.tried.set(g.node, fingerprint);
      this.rereads.delete(g.node);
      const names = files.map((f) => display(f.path));
      this.log.info(
        { node: g.node, version, files: names, resources: resources.length },
        `config loaded: version ${version} from ${names.join(', ') || 'no files'}`,
      );
      this.emit('loaded', { node: g.node, files: names, resources: resources.length });
      return true;
    } catch (err) {
      const error = (err as Error).message;
      // Not yet rejected: a file caught mid-write is read again after a pause. The fingerprint is
      // not recorded, so the re-read validates the content even when it has not changed.
      const done = this.rereads.get(g.node) ?? 0;
      if (this.started && done < (this.opts.rereadAttempts ?? DEFAULT_REREAD_ATTEMPTS)) {
        this.rereads.set(g.node, done + 1);
        this.log.debug(
          { node: g.node, attempt: done + 1, error },
          'config invalid; reading it again shortly',
        );
        this.emit('reread', { node: g.node, attempt: done + 1, error });
        this.scheduleReread();
        return false;
      }
      this.rereads.delete(g.node);
      this.tried.set(g.node, fingerprint);
      return this.reject(g, error);
    }
  }

  private reject(g: Group, error: string): false {
    this.log.error({ node: g.node, error }, 'config rejected; the last good snapshot keeps serving');
    this.emit('rejected', { node: g.node, error });
    return false;
  }
}
