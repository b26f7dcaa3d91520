// The one reader of the files the programs are given (config YAML, TLS certificates and keys, the
// statistics mapping, the service account's namespace), so every program refuses the same bad file the
// same way. A path can name anything: a FIFO that nobody writes blocks an ordinary open or read forever
// (a ConfigMap mount is all symlinks, so the name says nothing about the target), a device never ends,
// a huge file costs its size in memory before any size check on the text. So each file is
//   - opened read-only and non-blocking (O_RDONLY | O_NONBLOCK | O_NOCTTY): opening a FIFO returns at once,
//   - checked on the opened descriptor (fstat, after links are followed) to be a regular file,
//   - refused when fstat's size is over the caller's bound, before a byte is read,
//   - read for at most bound + 1 bytes, so a file that grows while it is read is refused too,
//   - and, asynchronously, read within a deadline: a slow filesystem cannot hold the caller's loop.
// A refusal is a FileReadError with a reason, and a message naming the file, so a caller logs one line
// and goes on with the other files.
import { closeSync, constants, fstatSync, openSync, readSync, type Stats } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';

/** Why a file was not read. */
export type FileReadFailure =
  /** Not a regular file once links are followed: a FIFO, a socket, a device or a directory. */
  | 'not-regular'
  /** Larger than the caller's bound (from fstat, or found while reading). */
  | 'too-large'
  /** Not opened and read within the deadline. */
  | 'timeout'
  /** The system refused: missing, no permission, an I/O error (`code` says which). */
  | 'io';

export class FileReadError extends Error {
  readonly file: string;
  readonly reason: FileReadFailure;
  /** The message without the file's name, for callers that put the name elsewhere. */
  readonly detail: string;
  /** The system error code for `io` (ENOENT, EACCES, ...). */
  readonly code?: string;

  constructor(file: string, reason: FileReadFailure, detail: string, code?: string) {
    super(`${file}: ${detail}`);
    this.name = 'FileReadError';
    this.file = file;
    this.reason = reason;
    this.detail = detail;
    if (code !== undefined) this.code = code;
  }
}

export interface BoundedReadOptions {
  /** Largest size accepted, in bytes. */
  readonly maxBytes: number;
  /** The setting that raises maxBytes, named in the refusal (e.g. `CONFIG_YAML_MAX_BYTES`). */
  readonly maxBytesSetting?: string;
  /** Time to open, check and read the file (async reads only; default DEFAULT_FILE_READ_TIMEOUT_MS). */
  readonly timeoutMs?: number;
  /** The name used in messages (default: the path). */
  readonly displayName?: string;
}

/** Default deadline of one file's read. */
export const DEFAULT_FILE_READ_TIMEOUT_MS = 10_000;

/** Bound on one TLS certificate, key or CA bundle file (a full public CA bundle is about 0.2 MiB). */
export const TLS_FILE_MAX_BYTES = 4 * 1024 * 1024;

const OPEN_FLAGS = constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY;
const CHUNK = 64 * 1024;

function kind(s: Stats): string {
  if (s.isFIFO()) return 'a FIFO';
  if (s.isSocket()) return 'a socket';
  if (s.isDirectory()) return 'a directory';
  if (s.isCharacterDevice()) return 'a character device';
  if (s.isBlockDevice()) return 'a block device';
  return 'not a regular file';
}

function tooLarge(name: string, size: number | string, opts: BoundedReadOptions): FileReadError {
  const setting = opts.maxBytesSetting ? ` (${opts.maxBytesSetting})` : '';
  return new FileReadError(
    name,
    'too-large',
    `the file's size (${size} bytes) exceeds the limit of ${opts.maxBytes}${setting}`,
  );
}

/** The checks on the opened descriptor: a regular file within the bound. */
function check(name: string, s: Stats, opts: BoundedReadOptions): void {
  if (!s.isFile()) {
    throw new FileReadError(name, 'not-regular', `not a regular file (${kind(s)}); not read`);
  }
  if (s.size > opts.maxBytes) throw tooLarge(name, s.size, opts);
}

function ioError(name: string, err: unknown): FileReadError {
  if (err instanceof FileReadError) return err;
  const e = err as NodeJS.ErrnoException;
  // Opening a UNIX socket fails with ENXIO: it is not a file to read either.
  if (e.code === 'ENXIO')
    return new FileReadError(name, 'not-regular', 'not a regular file (a socket); not read');
  return new FileReadError(name, 'io', e.message ?? String(err), e.code);
}

/** Concatenates chunks, refusing past the bound (a file that grew after fstat). */
function collect(name: string, chunks: Buffer[], total: number, opts: BoundedReadOptions): Buffer {
  if (total > opts.maxBytes) throw tooLarge(name, `more than ${opts.maxBytes}`, opts);
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, total);
}

/**
 * Reads a regular file within the bounds, off the event loop; rejects with FileReadError. An operation
 * still running at the deadline is abandoned (its descriptor is closed when it returns). The bytes are a
 * view of an ArrayBuffer of their own (transferable).
 */
export async function readBoundedFile(path: string, opts: BoundedReadOptions): Promise<Buffer> {
  const name = opts.displayName ?? path;
  const timeoutMs = opts.timeoutMs ?? DEFAULT_FILE_READ_TIMEOUT_MS;
  let timer: NodeJS.Timeout | undefined;
  let timedOut = false;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      timedOut = true;
      reject(new FileReadError(name, 'timeout', `not read within ${timeoutMs} ms`));
    }, timeoutMs);
  });
  deadline.catch(() => undefined);
  let handle: FileHandle | undefined;
  // The operation in flight: at the deadline the handle is closed only once it has returned.
  let inFlight: Promise<unknown> = Promise.resolve();
  const step = <T>(p: Promise<T>): Promise<T> => {
    inFlight = p.catch(() => undefined);
    return Promise.race([p, deadline]);
  };
  try {
    const opening = open(path, OPEN_FLAGS);
    opening.then(
      (h) => {
        // Opened after the deadline: nobody will read it.
        if (timedOut) void h.close().catch(() => undefined);
      },
      () => undefined,
    );
    handle = await step(opening);
    const fh = handle;
    const stats = await step(fh.stat());
    check(name, stats, opts);
    // One buffer of fstat's size plus a byte (filled, it says the file grew while read), grown only for
    // such a file; its memory is its own (not the shared pool's), so a caller may transfer it to a worker.
    let buf = Buffer.allocUnsafeSlow(Math.min(stats.size, opts.maxBytes) + 1);
    let total = 0;
    // Up to one byte past the bound: reaching it means the file grew past the bound while read.
    while (total <= opts.maxBytes) {
      if (total === buf.length) {
        const grown = Buffer.allocUnsafeSlow(Math.min(Math.max(buf.length * 2, CHUNK), opts.maxBytes + 1));
        buf.copy(grown, 0, 0, total);
        buf = grown;
      }
      const { bytesRead } = await step(fh.read(buf, total, buf.length - total, total));
      if (bytesRead === 0) break;
      total += bytesRead;
    }
    if (total > opts.maxBytes) throw tooLarge(name, `more than ${opts.maxBytes}`, opts);
    return buf.subarray(0, total);
  } catch (err) {
    throw ioError(name, err);
  } finally {
    clearTimeout(timer);
    const h = handle;
    if (h) void inFlight.then(() => h.close()).catch(() => undefined);
  }
}

/** readBoundedFile as UTF-8 text. */
export async function readBoundedText(path: string, opts: BoundedReadOptions): Promise<string> {
  return (await readBoundedFile(path, opts)).toString('utf8');
}

/**
 * The same checks for a read that must be synchronous (files read once while a program starts, or at a
 * client's connect): non-blocking open, fstat, the size bound, at most bound + 1 bytes. It has no
 * deadline; the async reader is for anything read while serving.
 */
export function readBoundedFileSync(path: string, opts: BoundedReadOptions): Buffer {
  const name = opts.displayName ?? path;
  let fd: number | undefined;
  try {
    fd = openSync(path, OPEN_FLAGS);
    check(name, fstatSync(fd), opts);
    const chunks: Buffer[] = [];
    let total = 0;
    while (total <= opts.maxBytes) {
      const want = Math.min(CHUNK, opts.maxBytes + 1 - total);
      const buf = Buffer.allocUnsafe(want);
      const n = readSync(fd, buf, 0, want, total);
      if (n === 0) break;
      chunks.push(n === want ? buf : buf.subarray(0, n));
      total += n;
    }
    return collect(name, chunks, total, opts);
  } catch (err) {
    throw ioError(name, err);
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}
