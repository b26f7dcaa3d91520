// Parses and validates config on a worker thread (YAML files, and the encoded RateLimitConfig messages
// of an xDS push), so a large reload does not stall the decision path; the main thread only indexes
// the validated documents, in time slices (buildConfigInSlices). The worker is started on first use
// and reused; if it cannot start, parsing falls back to the main thread. A parse past its deadline
// ends the worker (a synchronous parse cannot be interrupted otherwise) and is reported as rejected.
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
// Not the config/ barrel, nor parse-worker.ts but for its types: the YAML reader and the validator load
// on the worker, and on this thread only when no worker can start.
import type { ConfigSource } from '../config/index.js';
import { ConfigError, type CheckedDocument, DEFAULT_YAML_LIMITS, type YamlLimits } from '../config/model.js';
import type { ConfigFileBytes, ParsedFiles, ParseReply, ParseRequest } from './parse-worker.js';

// The build loads parse-worker.js; source runs (tests, through tsx) load parse-worker.ts with tsx's loader.
const FROM_SOURCE = import.meta.url.endsWith('.ts');
const WORKER_URL = new URL(`./parse-worker${FROM_SOURCE ? '.ts' : '.js'}`, import.meta.url);

/** From source, the worker registers tsx's loader first (Node 20 workers do not take `--import` hooks). */
function sourceBootstrap(): URL {
  const tsxRoot = dirname(createRequire(import.meta.url).resolve('tsx/package.json'));
  const api = pathToFileURL(join(tsxRoot, 'dist', 'esm', 'api', 'index.mjs')).href;
  const code = `const { register } = await import(${JSON.stringify(api)}); register(); await import(${JSON.stringify(WORKER_URL.href)});`;
  return new URL(`data:text/javascript,${encodeURIComponent(code)}`);
}

/**
 * The process' node flags minus module hooks and profilers: a worker cannot load `--import`ed TypeScript
 * (the bootstrap registers tsx itself) and should not write profiles of its own.
 */
export function workerExecArgv(argv: readonly string[] = process.execArgv): string[] {
  const out: string[] = [];
  const withValue = new Set(['--import', '--require', '-r', '--loader', '--experimental-loader']);
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (withValue.has(a)) {
      i++;
      continue;
    }
    if ([...withValue].some((f) => a.startsWith(`${f}=`)) || /^--(cpu|heap)-prof/.test(a)) continue;
    out.push(a);
  }
  return out;
}

/** A worker idle this long is ended (the next parse starts another, in tens of milliseconds). */
export const WORKER_IDLE_MS = 10_000;

/**
 * A worker with the process' flags; V8 and per-process flags (`--max-old-space-size`, `--trace-gc`, ...)
 * are refused in a worker's execArgv (ERR_WORKER_INVALID_EXEC_ARGV), and then it starts without any:
 * the parse needs none of them.
 */
export function startWorker(url: URL, execArgv: string[] = workerExecArgv()): Worker {
  try {
    return new Worker(url, { execArgv });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ERR_WORKER_INVALID_EXEC_ARGV') throw err;
    return new Worker(url, { execArgv: [] });
  }
}

export interface ConfigParsePoolOptions {
  /** Bounds on each file, checked before it expands (DEFAULT_YAML_LIMITS when absent). */
  limits?: YamlLimits;
  /** A parse running longer is stopped (the worker terminated) and rejected; 0 disables. */
  timeoutMs?: number;
  /** An idle worker is ended after this long (WORKER_IDLE_MS); not with `spare`. */
  idleMs?: number;
  /**
   * Keep a fresh worker ready between parses: the worker that answered is ended and a new one started
   * `spareDelayMs` later, so the next reload does not wait for a worker to start (tens to hundreds of
   * ms) and a used worker's heap (the garbage of a large parse) is not kept either.
   */
  spare?: boolean;
  /** How long after a parse the spare starts (SPARE_DELAY_MS): not while the new config's garbage is collected. */
  spareDelayMs?: number;
  /**
   * With `spare`: a spare is kept only after a parse of at least this many bytes of YAML (or of xDS
   * resources); after a smaller one the worker is ended at once (SPARE_MIN_CHARS).
   */
  spareMinChars?: number;
}

/**
 * How many times a spare parses the last files before it is used: V8 compiles and then optimizes the
 * parser over a fresh thread's first parses (docs/decisions/007-hot-path-shapes.md has the figures).
 */
export const WARM_UP_PARSES = 2;

/**
 * The spare warms up on the last files only when they hold at most this many bytes of YAML in all:
 * a parse's garbage grows the worker's heap to many times the text (docs/performance.md), and a warmed
 * spare would keep that heap between reloads. A larger config's reload pays the parser's compiling
 * instead, a fraction of its parse.
 */
export const WARM_UP_MAX_CHARS = 2 * 1024 * 1024;

/**
 * A spare is kept only for a config of at least this many bytes: a smaller config's parse is short beside
 * starting a worker, which a reload's file event starts during its debounce anyway, and an idle worker
 * holds memory (about 10-20 MiB of RSS) for as long as the pod runs.
 */
export const SPARE_MIN_CHARS = 256 * 1024;

/** A spare worker starts this long after the parse that ended its predecessor. */
export const SPARE_DELAY_MS = 1000;

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/** Why a parse ended without a result when the worker (not the file) is the reason. */
class WorkerGone extends Error {
  constructor(
    message: string,
    /** The worker never started: parsing on this thread is the fallback. */
    readonly neverStarted: boolean,
  ) {
    super(message);
  }
}

interface Waiting {
  resolve: (r: ParseReply) => void;
  reject: (e: Error) => void;
  /** The file the worker said it started last. */
  file: string;
  /** Called on each progress message. */
  started?: () => void;
}

export class ConfigParsePool {
  private worker?: Worker;
  private seq = 0;
  private closed = false;
  /** How many parses ran on the worker and how many fell back to this thread. */
  readonly counts = { worker: 0, inline: 0, timedOut: 0, warmedUp: 0 };
  /**
   * With `spare`: a copy of the files of the last parse that succeeded, parsed WARM_UP_PARSES times on
   * the spare to warm it (the files themselves were transferred to the worker that parsed them).
   */
  private lastParse: { files: ConfigFileBytes[]; limits: YamlLimits } | undefined;
  private started = 0;
  private readonly waiting = new Map<number, Waiting>();
  private readonly limits: YamlLimits;
  private readonly timeoutMs: number;
  private readonly idleMs: number;
  private readonly spare: boolean;
  private readonly spareDelayMs: number;
  private readonly spareMinChars: number;
  /** Bytes of the parse in progress or last done. */
  private lastSize = 0;
  private idleTimer: NodeJS.Timeout | undefined;
  /** Whether the running worker has answered a parse (with `spare`, it is replaced by a fresh one). */
  private used = false;

  constructor(opts: ConfigParsePoolOptions = {}) {
    this.limits = opts.limits ?? DEFAULT_YAML_LIMITS;
    this.timeoutMs = opts.timeoutMs ?? 30_000;
    this.idleMs = opts.idleMs ?? WORKER_IDLE_MS;
    this.spare = opts.spare === true;
    this.spareDelayMs = opts.spareDelayMs ?? SPARE_DELAY_MS;
    this.spareMinChars = opts.spareMinChars ?? SPARE_MIN_CHARS;
  }

  /** How many worker threads were started so far. */
  get workersStarted(): number {
    return this.started;
  }

  /** Whether a worker thread is running now. */
  get workerRunning(): boolean {
    return this.worker !== undefined;
  }

  /** Parsed and validated documents (see parse-worker.ts); throws the first ConfigError. */
  async parse(sources: ConfigSource[]): Promise<CheckedDocument[]> {
    const encoder = new TextEncoder();
    // TextEncoder's arrays own their memory (a small Buffer shares the pool's, which cannot be transferred).
    const files = sources.map(({ name, yaml }) => ({ name, bytes: encoder.encode(yaml) }));
    const { documents } = await this.parseFiles(files, []);
    return documents as CheckedDocument[];
  }

  /**
   * Files as read (their bytes are transferred to the worker: unusable here afterwards), each parsed and
   * validated unless its digest is `known[i]` (the digest of the text already parsed; see ParsedFiles).
   * Throws the first ConfigError.
   */
  async parseFiles(files: ConfigFileBytes[], known: (string | undefined)[]): Promise<ParsedFiles> {
    let size = 0;
    for (const f of files) size += f.bytes.byteLength;
    this.lastSize = size;
    // The copy the spare warms up on, taken before the bytes move to the worker.
    const keep =
      this.spare && size <= WARM_UP_MAX_CHARS
        ? files.map(({ name, bytes }) => ({ name, bytes: new Uint8Array(bytes) }))
        : undefined;
    const parsed = await this.run(
      { files, known, limits: this.limits },
      files[0]?.name ?? '',
      async () => (await import('./parse-worker.js')).parseFiles(files, known, this.limits),
      [...new Set(files.map((f) => f.bytes.buffer as ArrayBuffer))],
    );
    if (!('digests' in parsed)) throw new Error('unexpected reply to a file parse');
    if (this.spare) this.lastParse = keep && { files: keep, limits: this.limits };
    return parsed;
  }

  /** Decoded and validated xDS resources (encoded RateLimitConfig messages); throws the first ConfigError. */
  async decodeXds(messages: Uint8Array[]): Promise<CheckedDocument[]> {
    let bytes = 0;
    for (const m of messages) bytes += m.byteLength;
    this.lastSize = bytes;
    const documents = await this.run({ messages }, 'xDS resources', async () =>
      (await import('./parse-worker.js')).decodeAndCheck(messages),
    );
    if (!Array.isArray(documents)) throw new Error('unexpected reply to an xDS decode');
    return documents;
  }

  private async run(
    request: DistributiveOmit<ParseRequest, 'id'>,
    firstName: string,
    inline: () => Promise<CheckedDocument[] | ParsedFiles>,
    transfer: ArrayBuffer[] = [],
  ): Promise<CheckedDocument[] | ParsedFiles> {
    if (this.closed) throw new Error('config parser is closed');
    let reply: ParseReply;
    try {
      reply = await this.roundTrip(request, firstName, transfer);
    } catch (err) {
      // No worker at all (e.g. a restricted runtime): parse here, and say once why a reload may stall.
      // A worker that started and then died, timed out or was closed is not retried on this thread:
      // whatever stopped it would stop the decisions too.
      if (!(err instanceof WorkerGone) || !err.neverStarted || this.closed) throw err;
      if (this.counts.inline === 0) {
        process.emitWarning(
          `config parser worker unavailable, parsing on the main thread: ${(err as Error).message}`,
        );
      }
      this.counts.inline++;
      return inline();
    }
    this.counts.worker++;
    if ('progress' in reply) throw new Error('unexpected progress reply');
    if (reply.ok) return 'files' in reply ? reply.files : reply.documents;
    const e = reply.error;
    if ('detail' in e) throw new ConfigError(e.source, e.field, e.detail);
    throw new Error(e.message);
  }

  private roundTrip(
    request: DistributiveOmit<ParseRequest, 'id'>,
    firstName: string,
    transfer: ArrayBuffer[],
  ): Promise<ParseReply> {
    const w = this.ensureWorker();
    const id = ++this.seq;
    return new Promise((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const entry: Waiting = {
        file: firstName,
        resolve: (r) => {
          clearTimeout(timer);
          resolve(r);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      };
      // The deadline runs from the worker's first progress message: starting a worker (loading its
      // modules) is not parsing, and takes seconds on a loaded node.
      entry.started = () => {
        if (this.timeoutMs <= 0 || timer !== undefined) return;
        timer = setTimeout(() => {
          this.waiting.delete(id);
          this.counts.timedOut++;
          // The only way to stop a synchronous parse is to end its thread; the next parse starts another.
          this.stopWorker();
          reject(
            new ConfigError(
              entry.file,
              '',
              `error loading config file: parsing did not finish within ${this.timeoutMs} ms (CONFIG_PARSE_TIMEOUT)`,
            ),
          );
        }, this.timeoutMs);
        timer.unref();
      };
      this.waiting.set(id, entry);
      w.postMessage({ id, ...request } as ParseRequest, transfer);
    });
  }

  private ensureWorker(): Worker {
    clearTimeout(this.idleTimer);
    if (this.worker) return this.worker;
    let w: Worker;
    try {
      w = startWorker(FROM_SOURCE ? sourceBootstrap() : WORKER_URL);
    } catch (err) {
      throw new WorkerGone((err as Error).message, true);
    }
    this.started++;
    this.used = false;
    w.unref();
    let online = false;
    w.once('online', () => (online = true));
    w.on('message', (r: ParseReply) => {
      if (r.id < 0) {
        // A warm-up (negative ids): nobody waits for it, and it leaves the worker fresh for our purposes.
        if (!('progress' in r)) this.counts.warmedUp++;
        return;
      }
      const p = this.waiting.get(r.id);
      if ('progress' in r) {
        if (p) {
          p.file = r.progress;
          p.started?.();
        }
        return;
      }
      this.waiting.delete(r.id);
      if (this.worker === w) this.used = true;
      p?.resolve(r);
      this.armIdleEnd();
    });
    const fail = (err: Error) => {
      if (this.worker !== w) return;
      this.worker = undefined;
      const gone = new WorkerGone(err.message, !online);
      for (const p of this.waiting.values()) p.reject(gone);
      this.waiting.clear();
    };
    w.on('error', fail);
    w.on('exit', (code) => fail(new Error(`config parser worker exited with code ${code}`)));
    this.worker = w;
    return w;
  }

  /**
   * Starts the worker ahead of a parse: a watched file changed and its parse follows the debounce, so
   * loading the worker's modules overlaps the wait. Ended after idleMs like any idle worker (kept, with `spare`).
   */
  warm(): void {
    if (this.closed) return;
    try {
      this.ensureWorker();
    } catch {
      return; // no worker here: the parse says so, and runs inline
    }
    this.armIdleEnd();
  }

  private armIdleEnd(): void {
    if (this.waiting.size !== 0) return;
    if (this.spare) {
      // A used worker is replaced by a fresh one; a fresh one is kept (not ended when idle).
      if (!this.used) return;
      clearTimeout(this.idleTimer);
      if (this.lastSize < this.spareMinChars) {
        this.stopWorker();
        return;
      }
      this.idleTimer = setTimeout(() => this.replaceUsedWorker(), this.spareDelayMs);
      this.idleTimer.unref();
      return;
    }
    if (this.idleMs <= 0) return;
    clearTimeout(this.idleTimer);
    this.idleTimer = setTimeout(() => this.waiting.size === 0 && this.stopWorker(), this.idleMs);
    this.idleTimer.unref();
  }

  /**
   * Ends the worker that answered (its heap holds a parse's garbage) and starts the spare, which parses
   * the last files WARM_UP_PARSES times, discarding the results: a fresh thread's first parses of a large
   * file also compile and optimize the parser (83–93 ms of CPU for a 10k-descriptor file the first time,
   * 55–64 from the third), and that now happens here, at the worker's low priority, instead of during
   * the next reload.
   */
  private replaceUsedWorker(): void {
    if (this.closed || this.waiting.size !== 0 || !this.used) return;
    this.stopWorker();
    let w: Worker;
    try {
      w = this.ensureWorker();
    } catch {
      return; // no worker here: the next parse says so, and runs inline
    }
    if (!this.lastParse) return;
    for (let i = 0; i < WARM_UP_PARSES; i++) {
      // Copied, not transferred: the next warm-up parses the same files.
      w.postMessage({ id: -++this.seq, ...this.lastParse, known: [], warmUp: true } as ParseRequest);
    }
  }

  /** Terminates the worker (not waiting for it) and fails what waits on it. */
  private stopWorker(): void {
    clearTimeout(this.idleTimer);
    const w = this.worker;
    if (!w) return;
    this.worker = undefined;
    for (const p of this.waiting.values()) p.reject(new WorkerGone('config parser stopped', false));
    this.waiting.clear();
    void w.terminate();
  }

  /** Stops at once: a parse in progress is abandoned (its caller gets an error), never waited for. */
  async close(): Promise<void> {
    this.closed = true;
    const w = this.worker;
    this.stopWorker();
    if (w) await w.terminate();
  }
}
