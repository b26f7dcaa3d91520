// Worker thread entry: parses and validates config off the main thread, YAML texts from files and
// encoded RateLimitConfig messages from xDS pushes (reading and validating a 10k-rule config takes
// hundreds of ms of CPU, which on the main thread would stall every decision). Replies with the
// validated documents in the form the main thread compiles from (config/checked.ts: the top-level
// descriptors' keys, and their JSON texts in one transferred buffer), or with the first error's parts.
import { setPriority } from 'node:os';
import { parentPort } from 'node:worker_threads';
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
} from '../config/index.js';
import { decodeRateLimitConfig } from '../../proto/ratelimit-config.js';

export type ParseRequest =
  /** `warmUp`: parsed only to compile the parser on this thread; the reply carries no documents. */
  | { id: number; sources: ConfigSource[]; limits: YamlLimits; warmUp?: boolean }
  /** xDS resources: each an encoded RateLimitConfig message. */
  | { id: number; messages: Uint8Array[] };
export type ParseReply =
  | { id: number; ok: true; documents: CheckedDocument[] }
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
    const documents = parseAndCheck(req.sources, req.limits, progress);
    return { id: req.id, ok: true, documents: req.warmUp ? [] : documents };
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
    parentPort!.postMessage(r, 'documents' in r ? checkedBuffers(r.documents) : []);
  });
});
