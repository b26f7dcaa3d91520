// Worker thread entry: parses and validates YAML config texts off the main thread (parsing a 10k-rule
// file takes seconds of CPU and validating it ~100 ms, which on the main thread would stall every
// decision). Replies with the validated documents, each top-level descriptor as its own JSON text so
// that the main thread can decode and compile them in time slices, or with the first error's parts.
import { setPriority } from 'node:os';
import { parentPort } from 'node:worker_threads';
import { ConfigError, checkDocument, type CheckedDocument, type ConfigSource } from '../config/index.js';
import { DEFAULT_YAML_LIMITS, parseYamlSource, type YamlLimits } from '../config/yaml-source.js';

export interface ParseRequest {
  id: number;
  sources: ConfigSource[];
  limits: YamlLimits;
}
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
    const { errors, document } = checkDocument(s.name, parseYamlSource(s, limits));
    if (document === undefined) throw errors[0] ?? new ConfigError(s.name, '', 'invalid document');
    return {
      name: s.name,
      domain: document.domain,
      descriptors: (document.descriptors ?? []).map((d) => JSON.stringify(d)),
    };
  });
}

if (parentPort) {
  // Nice values are per thread on Linux: setpriority(0) lowers this worker only, so when the pod has one
  // core the decisions on the main thread win it, and the parse uses what they leave.
  try {
    setPriority(19);
  } catch {
    // not permitted or not Linux: the worker runs at the process priority
  }
}

parentPort?.on('message', (req: ParseRequest) => {
  try {
    parentPort!.postMessage({
      id: req.id,
      ok: true,
      documents: parseAndCheck(req.sources, req.limits, (name) =>
        parentPort!.postMessage({ id: req.id, progress: name } satisfies ParseReply),
      ),
    } satisfies ParseReply);
  } catch (err) {
    const error =
      err instanceof ConfigError
        ? { source: err.source, field: err.field, detail: err.detail }
        : { message: (err as Error).message };
    parentPort!.postMessage({ id: req.id, ok: false, error } satisfies ParseReply);
  }
});
