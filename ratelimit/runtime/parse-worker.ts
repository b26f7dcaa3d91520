// Worker thread entry: parses YAML config texts off the main thread (parsing a 10k-rule file takes
// seconds of CPU, which on the main thread would stall every decision). Replies with plain documents,
// or with the ConfigError's parts.
import { parentPort } from 'node:worker_threads';
import { ConfigError, type ConfigSource } from '../config/index.js';
import { parseYamlSource } from '../config/yaml-source.js';

export interface ParseRequest {
  id: number;
  sources: ConfigSource[];
}
export type ParseReply =
  | { id: number; ok: true; documents: { name: string; document: unknown }[] }
  | { id: number; ok: false; error: { source: string; field: string; detail: string } | { message: string } };

parentPort?.on('message', (req: ParseRequest) => {
  try {
    const documents = req.sources.map((s) => ({ name: s.name, document: parseYamlSource(s) }));
    parentPort!.postMessage({ id: req.id, ok: true, documents } satisfies ParseReply);
  } catch (err) {
    const error =
      err instanceof ConfigError
        ? { source: err.source, field: err.field, detail: err.detail }
        : { message: (err as Error).message };
    parentPort!.postMessage({ id: req.id, ok: false, error } satisfies ParseReply);
  }
});
