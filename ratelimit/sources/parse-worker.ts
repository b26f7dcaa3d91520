// Worker thread entry: parses and validates config off the main thread, YAML files and encoded
// RateLimitConfig messages from xDS pushes (reading and validating a 10k-rule config takes hundreds of ms
// of CPU, which on the main thread would stall every decision). A file arrives as its bytes (transferred,
// not copied): decoding the text, telling whether it changed (its digest) and parsing it all happen here.
// Replies with the validated documents in the form the main thread compiles from (config/checked.ts: the
// top-level descriptors' keys, and their JSON texts in one transferred buffer), or with the first error's parts.
import { createHash } from 'node:crypto';
import { setPriority } from 'node:os';
import { parentPort } from 'node:worker_threads';
// config/readers.ts, not the config/ barrel: the worker loads what it parses and validates with only.
import {
  ConfigError,
  checkDocument,
  checkedBuffers,
  type CheckedDocument,
  type ConfigSource,
  type ParsedConfigSource,
  DEFAULT_YAML_LIMITS,
  parseYamlSource,
  rateLimitConfigToDocument,
  toCheckedDocument,
  type YamlLimits,
} from '../config/readers.js';
import { decodeRateLimitConfig } from '../../proto/ratelimit-config.js';

/** A config file as read: its name and its bytes (UTF-8 YAML). */
export interface ConfigFileBytes {
  readonly name: string;
  readonly bytes: Uint8Array;
}

/**
 * Each file's digest and, unless the digest is the one the caller already had for that file (`known`),
 * its validated document; `null` for an unchanged file.
 */
export interface ParsedFiles {
  readonly digests: string[];
  readonly documents: (CheckedDocument | null)[];
}

export type ParseRequest =
  /**
   * YAML files, with the digest the caller has of each (a file whose digest is unchanged is not parsed).
   * `warmUp`: parsed only to compile the parser on this thread; the reply carries no documents.
   */
  | {
      id: number;
      files: ConfigFileBytes[];
      known: (string | undefined)[];
      limits: YamlLimits;
      warmUp?: boolean;
    }
  /** xDS resources: each an encoded RateLimitConfig message. */
  | { id: number; messages: Uint8Array[] };
export type ParseReply =
  | { id: number; ok: true; documents: CheckedDocument[] }
  | { id: number; ok: true; files: ParsedFiles }
  | { id: number; ok: false; error: { source: string; field: string; detail: string } | { message: string } }
  /** Sent before each file, so a parse stopped at its deadline names the file it was stuck on. */
  | { id: number; progress: string };

/** Parse and validate: what the main thread would do before compiling. Throws the first ConfigError. */
export function parseAndCheck(
  sources: readonly ConfigSource[],
  limits: YamlLimits = DEFAULT_YAML_LIMITS,
  onFile?: (name: string) => void,
): CheckedDocument[] {
  return sources.map((s) => {
    onFile?.(s.name);
    return check({ name: s.name, document: parseYamlSource(s, limits) });
  });
}

/** A file's digest: what tells a changed file from the one already parsed. */
export function fileDigest(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('base64');
}

/**
 * parseAndCheck for files as read, skipping each whose digest is `known[i]` (its document is `null`).
 * The text is the bytes as UTF-8 (an invalid sequence becomes U+FFFD). Throws the first ConfigError.
 */
export function parseFiles(
  files: readonly ConfigFileBytes[],
  known: readonly (string | undefined)[],
  limits: YamlLimits = DEFAULT_YAML_LIMITS,
  onFile?: (name: string) => void,
): ParsedFiles {
  const digests: string[] = [];
  const documents: (CheckedDocument | null)[] = [];
  files.forEach(({ name, bytes }, i) => {
    onFile?.(name);
    const digest = fileDigest(bytes);
    digests.push(digest);
    if (digest === known[i]) {
      documents.push(null);
      return;
    }
    const yaml = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8');
    documents.push(parseAndCheck([{ name, yaml }], limits)[0]!);
  });
  return { digests, documents };
}

/** Validates one document into the form the sliced compile takes. Throws the first ConfigError. */
function check(src: ParsedConfigSource): CheckedDocument {
  const { errors, document } = checkDocument(src.name, src.document);
  if (document === undefined) throw errors[0] ?? new ConfigError(src.name, '', 'invalid document');
  return toCheckedDocument(src.name, document);
}

// The RateLimitConfig codec comes from proto/'s light entry, which loads no gRPC code; protobufjs and
// the .proto files load on the first xDS push only, so a file-fed service never loads them.
/** Decode and validate xDS resources: what the main thread would do before compiling. */
export function decodeAndCheck(messages: readonly Uint8Array[]): CheckedDocument[] {
  return messages.map((bytes) => {
    const msg = decodeRateLimitConfig(bytes);
    return check({ name: msg.name, document: rateLimitConfigToDocument(msg) });
  });
}

/** The worker thread's nice value. */
export const WORKER_NICE = 10;

if (parentPort) {
  // Nice values are per thread on Linux: setpriority(0) lowers this worker only, so when the pod has one
  // core the decisions on the main thread win it (CFS weight 1024 against 110 at nice 10), and the parse
  // uses what they leave. Not 19 (weight 15): against any busy thread of the same cgroup the worker then
  // gets almost nothing, and a large reload takes far too long (docs/decisions/007-hot-path-shapes.md).
  try {
    setPriority(WORKER_NICE);
  } catch {
    // not permitted or not Linux: the worker runs at the process priority
  }
}

/** The reply to one request: its documents, or its first error's parts. */
async function reply(req: ParseRequest): Promise<ParseReply> {
  const progress = (name: string) =>
    parentPort!.postMessage({ id: req.id, progress: name } satisfies ParseReply);
  try {
    if ('messages' in req) {
      progress('xDS resources');
      return { id: req.id, ok: true, documents: decodeAndCheck(req.messages) };
    }
    const files = parseFiles(req.files, req.known, req.limits, progress);
    return { id: req.id, ok: true, files: req.warmUp ? { digests: [], documents: [] } : files };
  } catch (err) {
    const error =
      err instanceof ConfigError
        ? { source: err.source, field: err.field, detail: err.detail }
        : { message: (err as Error).message };
    return { id: req.id, ok: false, error };
  }
}

// Requests are answered in order, each chained behind the one before.
let queue: Promise<void> = Promise.resolve();
parentPort?.on('message', (req: ParseRequest) => {
  queue = queue.then(async () => {
    const r = await reply(req);
    // The documents' buffers move to the main thread instead of being copied.
    const documents = 'documents' in r ? r.documents : 'files' in r ? r.files.documents : [];
    parentPort!.postMessage(r, checkedBuffers(documents.filter((d) => d !== null)));
  });
});
