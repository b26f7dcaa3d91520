// TLS certificate, key and CA files, read once or re-read on an interval, for every binary: the
// ratelimit gRPC listener and the xDS server follow files that rotate under them (cert-manager renewing
// a mounted Secret), the Redis, memcached and xDS clients read theirs once at connect. One reader and
// one reloader, so every listener behaves the same way when a rotation goes wrong: a set that is
// unreadable or does not make a TLS context (a half-written rotation, a key that does not match its
// certificate) is reported once and the last good set keeps serving. No npm package does this for
// node:tls (controller-runtime's certwatcher is the Go model); it is a timer and a comparison. Each file
// is read by the bounded reader (bounded-file.ts): a regular file of at most TLS_FILE_MAX_BYTES; the
// re-reads while serving run off the event loop within a deadline.
import { createSecureContext, type ConnectionOptions } from 'node:tls';
import {
  DEFAULT_FILE_READ_TIMEOUT_MS,
  readBoundedFile,
  readBoundedFileSync,
  TLS_FILE_MAX_BYTES,
} from './bounded-file.js';

/** Paths of PEM files; an absent or empty path is not read. */
export interface TlsFilePaths {
  /** Certificate chain (a server's, or a client's for mutual TLS). */
  readonly certFile?: string;
  readonly keyFile?: string;
  /** CA bundle: to verify the peer (a client's server, or a server's clients for mutual TLS). */
  readonly caFile?: string;
}

/** File contents; a field is present only when its path was given. */
export interface TlsPem {
  readonly cert?: Buffer;
  readonly key?: Buffer;
  readonly ca?: Buffer;
}

const FIELDS = [
  ['cert', 'certFile'],
  ['key', 'keyFile'],
  ['ca', 'caFile'],
] as const;

/**
 * Reads the files named (at start and at a client's connect); throws FileReadError when one is not a
 * regular file of at most TLS_FILE_MAX_BYTES or cannot be read. Does not check the contents.
 */
export function readTlsFiles(paths: TlsFilePaths): TlsPem {
  const pem: { cert?: Buffer; key?: Buffer; ca?: Buffer } = {};
  for (const [field, path] of FIELDS) {
    const file = paths[path];
    if (file) pem[field] = readBoundedFileSync(file, { maxBytes: TLS_FILE_MAX_BYTES });
  }
  return pem;
}

/** readTlsFiles off the event loop, each file within `timeoutMs` (the re-reads while serving). */
export async function loadTlsFiles(
  paths: TlsFilePaths,
  timeoutMs = DEFAULT_FILE_READ_TIMEOUT_MS,
): Promise<TlsPem> {
  const pem: { cert?: Buffer; key?: Buffer; ca?: Buffer } = {};
  for (const [field, path] of FIELDS) {
    const file = paths[path];
    if (file) pem[field] = await readBoundedFile(file, { maxBytes: TLS_FILE_MAX_BYTES, timeoutMs });
  }
  return pem;
}

/** The client side's files as the Redis and memcached settings name them. */
export interface ClientTlsFiles {
  readonly caCert?: string;
  readonly clientCert?: string;
  readonly clientKey?: string;
  /** Accept a server certificate whatever name it carries. */
  readonly skipHostnameVerification?: boolean;
}

/** node:tls connect options from a client's files, read now (a client reads them at each connect). */
export function clientTlsOptions(files: ClientTlsFiles): ConnectionOptions {
  const o: ConnectionOptions = {
    ...readTlsFiles({ caFile: files.caCert, certFile: files.clientCert, keyFile: files.clientKey }),
  };
  if (files.skipHostnameVerification) o.checkServerIdentity = () => undefined;
  return o;
}

const same = (a: Buffer | undefined, b: Buffer | undefined) => (a && b ? a.equals(b) : a === b);

export function samePem(a: TlsPem, b: TlsPem): boolean {
  return same(a.cert, b.cert) && same(a.key, b.key) && same(a.ca, b.ca);
}

export interface TlsFileWatcherOptions {
  /** How often the files are re-read (default 10 s). */
  readonly intervalMs?: number;
  /** A new good set: called after `current` has changed to it. */
  readonly onChange: (pem: TlsPem) => void;
  /** A re-read failed (the last good set stays); called once per distinct message until a read succeeds. */
  readonly onError?: (err: Error) => void;
}

export const DEFAULT_TLS_RELOAD_MS = 10_000;

/** Checks the files make a TLS context; throws when they do not. */
function checked(pem: TlsPem): TlsPem {
  createSecureContext(pem); // throws on a mismatched key, a bad PEM or a bad CA bundle
  return pem;
}

/**
 * A set of TLS files re-read on an interval, keeping the last good set. The constructor reads and
 * checks the files at once and throws on a bad set: a listener never starts on files it cannot serve.
 */
export class TlsFileWatcher {
  private pem: TlsPem;
  private timer: NodeJS.Timeout | undefined;
  private lastError = '';
  private reloading: Promise<boolean> | undefined;

  constructor(
    private readonly paths: TlsFilePaths,
    private readonly opts: TlsFileWatcherOptions,
  ) {
    this.pem = checked(readTlsFiles(paths));
  }

  /** The last good set. */
  get current(): TlsPem {
    return this.pem;
  }

  /** Starts re-reading the files; stop with close(). The timer does not keep the process alive. */
  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.reload(), this.opts.intervalMs ?? DEFAULT_TLS_RELOAD_MS);
    this.timer.unref();
  }

  close(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /**
   * Re-reads the files now (joining a re-read in progress); true when a new good set was taken (and
   * onChange called).
   */
  reload(): Promise<boolean> {
    this.reloading ??= this.reread().finally(() => (this.reloading = undefined));
    return this.reloading;
  }

  private async reread(): Promise<boolean> {
    let next: TlsPem;
    try {
      next = checked(await loadTlsFiles(this.paths));
    } catch (err) {
      const e = err instanceof Error ? err : new Error(String(err));
      if (e.message !== this.lastError) {
        this.lastError = e.message;
        this.opts.onError?.(e);
      }
      return false;
    }
    this.lastError = '';
    if (samePem(next, this.pem)) return false;
    this.pem = next;
    this.opts.onChange(next);
    return true;
  }
}
