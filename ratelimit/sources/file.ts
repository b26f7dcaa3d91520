// Config from YAML files: RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY/*.yaml.
// RUNTIME_WATCH_ROOT=true (the default) reloads when the root is swapped (a symlink pointed
// elsewhere, the way the reference's runtime loader is fed); false reloads on direct file changes.
// fs.watch triggers a check at once; a light poll (stat only) catches what watchers miss. Files are read
// by common/'s bounded reader: a FIFO, socket, device or directory named *.yaml is logged and skipped,
// a file over CONFIG_YAML_MAX_BYTES or not read in time fails the load (the last good config serves).
import { watch, type FSWatcher } from 'node:fs';
import { readdir, realpath, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
// The model entry, not the config/ barrel: the YAML reader and the validator load on the worker.
import {
  buildConfigInSlices,
  ConfigError,
  type CheckedDocument,
  DEFAULT_YAML_LIMITS,
  LIMIT_SETTING,
  type YamlLimits,
} from '../config/model.js';
import { FileReadError, readBoundedFile, type Logger } from '../../common/index.js';
import { ConfigParsePool } from './parse-pool.js';
import type { ConfigFileBytes } from './parse-worker.js';
import type { ConfigUpdate } from './source.js';

export interface FileProviderOptions {
  root: string;
  subdirectory?: string;
  appDirectory: string;
  ignoreDotFiles?: boolean;
  watchRoot?: boolean;
  mergeDomainConfig?: boolean;
  pollIntervalMs?: number;
  /** CONFIG_YAML_* bounds on each file. */
  yamlLimits?: YamlLimits;
  /** CONFIG_MAX_DESCRIPTORS (default DEFAULT_MAX_DESCRIPTORS). */
  maxDescriptors?: number;
  /** CONFIG_PARSE_TIMEOUT in ms (default 30 s). */
  parseTimeoutMs?: number;
  /**
   * Keep a fresh parse worker ready between reloads (CONFIG_PARSE_SPARE_WORKER, default true): a
   * reload then does not wait for a worker to start.
   */
  spareWorker?: boolean;
  /** With spareWorker: the smallest config (characters of YAML) a spare is kept for (SPARE_MIN_CHARS). */
  spareMinChars?: number;
  /**
   * Says at debug level when a load starts (what a stuck reload was doing), and at warning level which
   * files were skipped (not regular files).
   */
  logger?: Pick<Logger, 'debug' | 'warn'>;
  /** Deadline of one file's read (default DEFAULT_FILE_READ_TIMEOUT_MS). */
  readTimeoutMs?: number;
}

/**
 * A change is read this long after the last file event: the events of one write or of a ConfigMap's
 * symlink swap arrive within it, and a later event only reschedules the read (the fingerprint decides
 * whether anything changed). The parser's worker starts on the first event, during the wait.
 */
export const WATCH_DEBOUNCE_MS = 25;

export class FileConfigProvider {
  private watchers: FSWatcher[] = [];
  private poller?: NodeJS.Timeout;
  private debounce?: NodeJS.Timeout;
  private fingerprint = '';
  private running: Promise<void> = Promise.resolve();
  private closed = false;
  private readonly parser: ConfigParsePool;
  /**
   * Each file's digest and validated document: a reload parses only the files whose bytes changed (one
   * domain's edit does not re-parse the others). Files no longer listed are dropped on the next load.
   */
  private readonly checked = new Map<string, { digest: string; document: CheckedDocument }>();

  constructor(
    private readonly opts: FileProviderOptions,
    private readonly onUpdate: (update: ConfigUpdate) => void,
  ) {
    this.parser = new ConfigParsePool({
      limits: opts.yamlLimits,
      timeoutMs: opts.parseTimeoutMs,
      spare: opts.spareWorker !== false,
      spareMinChars: opts.spareMinChars,
    });
  }

  get directory(): string {
    return join(this.opts.root, this.opts.subdirectory ?? '', this.opts.appDirectory);
  }

  /** Starts the parse worker ahead of start(): its modules load while the caller does other work. */
  warm(): void {
    this.parser.warm();
  }

  /** Loads once (reporting the result) and starts watching. */
  async start(): Promise<void> {
    this.fingerprint = await this.computeFingerprint();
    await this.load();
    this.watch();
    this.poller = setInterval(() => this.schedule(0), this.opts.pollIntervalMs ?? 1000);
    this.poller.unref();
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.poller);
    clearTimeout(this.debounce);
    for (const w of this.watchers) w.close();
    this.watchers = [];
    // The parser first: a parse in progress is abandoned, so closing never waits on a stuck file.
    await this.parser.close();
    await this.running;
  }

  private watch(): void {
    const targets =
      this.opts.watchRoot === false ? [this.directory] : [dirname(this.opts.root), this.opts.root];
    for (const t of targets) {
      try {
        const w = watch(t, () => {
          this.parser.warm();
          this.schedule(WATCH_DEBOUNCE_MS);
        });
        w.on('error', () => undefined);
        this.watchers.push(w);
      } catch {
        // missing directory: the poll notices when it appears
      }
    }
  }

  private schedule(delayMs: number): void {
    if (this.closed) return;
    clearTimeout(this.debounce);
    this.debounce = setTimeout(() => {
      this.running = this.running.then(() => this.checkForChange());
    }, delayMs);
  }

  private async checkForChange(): Promise<void> {
    if (this.closed) return;
    const fp = await this.computeFingerprint();
    if (fp === this.fingerprint) return;
    this.fingerprint = fp;
    // A swapped root gets new watchers on its new target.
    for (const w of this.watchers) w.close();
    this.watchers = [];
    this.watch();
    await this.load();
  }

  private async listFiles(): Promise<string[]> {
    let names: string[];
    try {
      names = await readdir(this.directory);
    } catch {
      return [];
    }
    return names
      .filter((n) => n.endsWith('.yaml') || n.endsWith('.yml'))
      .filter((n) => !(this.opts.ignoreDotFiles && n.startsWith('.')))
      .sort()
      .map((n) => join(this.directory, n));
  }

  private async computeFingerprint(): Promise<string> {
    let rootTarget: string;
    try {
      rootTarget = await realpath(this.opts.root);
    } catch {
      rootTarget = '(missing)';
    }
    if (this.opts.watchRoot !== false) return rootTarget;
    const parts = [rootTarget];
    for (const f of await this.listFiles()) {
      try {
        const s = await stat(f);
        parts.push(`${f}:${s.size}:${s.mtimeMs}:${s.ino}`);
      } catch {
        // raced with a delete
      }
    }
    return parts.join('|');
  }

  /**
   * One file's bytes, read within CONFIG_YAML_MAX_BYTES (refused from fstat, before it is read) and the
   * read deadline. Undefined for what is not a regular file (a FIFO, socket, device or directory, named
   * directly or through a link): it is logged and skipped, the other files load. Any other failure
   * fails the load.
   */
  private async readFile(f: string, maxBytes: number): Promise<ConfigFileBytes | undefined> {
    try {
      const bytes = await readBoundedFile(f, {
        maxBytes,
        maxBytesSetting: LIMIT_SETTING.maxBytes,
        timeoutMs: this.opts.readTimeoutMs,
      });
      return { name: f, bytes };
    } catch (err) {
      if (!(err instanceof FileReadError)) throw err;
      if (err.reason === 'not-regular') {
        this.opts.logger?.warn(`config file skipped: ${err.message}`);
        return undefined;
      }
      throw new ConfigError(f, '', `error loading config file: ${err.detail}`);
    }
  }

  private async load(): Promise<void> {
    try {
      const paths = await this.listFiles();
      this.opts.logger?.debug(`loading config from ${paths.length} files`);
      const maxBytes = (this.opts.yamlLimits ?? DEFAULT_YAML_LIMITS).maxBytes;
      const read = await Promise.all(paths.map((f) => this.readFile(f, maxBytes)));
      const files = read.filter((f): f is ConfigFileBytes => f !== undefined);
      const names = files.map((f) => f.name);
      // Decoding, digests (what changed) and parsing and validation (the expensive part of a large
      // reload) run on a worker thread, which gets the bytes without a copy; the index of the validated
      // documents is built here in time slices, so decisions keep flowing.
      const parseStart = performance.now();
      const known = names.map((name) => this.checked.get(name)?.digest);
      const parsed = await this.parser.parseFiles(files, known);
      const compileStart = performance.now();
      let changed = 0;
      parsed.documents.forEach((document, i) => {
        if (document === null) return;
        changed++;
        this.checked.set(names[i]!, { digest: parsed.digests[i]!, document });
      });
      for (const name of this.checked.keys()) if (!names.includes(name)) this.checked.delete(name);
      const documents = names.map((name) => this.checked.get(name)!.document);
      const config = await buildConfigInSlices(documents, this.opts.mergeDomainConfig === true, {
        maxDescriptors: this.opts.maxDescriptors,
      });
      this.opts.logger?.debug(`parsed ${changed} of ${files.length} files (the others are unchanged)`);
      this.opts.logger?.debug(
        `config parsed in ${(compileStart - parseStart).toFixed(0)} ms (worker start included when none was ready), compiled in ${(performance.now() - compileStart).toFixed(0)} ms`,
      );
      if (!this.closed) this.onUpdate({ config, sources: names });
    } catch (err) {
      if (!this.closed) this.onUpdate({ error: err as Error });
    }
  }
}
