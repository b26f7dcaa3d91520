// Reading what a GitOps repository holds: YAML files (or folders of them), each a stream of documents
// that are plain ratelimit configs (the service's file format) or RateLimitConfig manifests. Every
// document is read by the service's own YAML door (parseYamlSource); the yaml package's syntax tree
// of the same text only serves to turn a field path into a line and column.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { isAlias, isMap, isSeq, LineCounter, parseAllDocuments, type Document, type Node } from 'yaml';
import { ConfigError, manifestDocument, parseYamlSource } from '../../ratelimit/config/index.js';

/** The custom resource's group and kind (operator/resource.ts; the CLI may not import operator/). */
export const RLC_GROUP = 'ratelimit.envoyproxy.io';
export const RLC_KIND = 'RateLimitConfig';

/** Larger files are refused before parsing (a config repository holds nothing near this). */
export const MAX_FILE_BYTES = 16 * 1024 * 1024;

export interface Position {
  /** 1-based. */
  readonly line: number;
  /** 1-based. */
  readonly col: number;
}

export interface ManifestInfo {
  /** `namespace/name`, as the operator names a resource. */
  readonly key: string;
  readonly createdMs?: number;
  readonly mergeDomain: boolean;
}

export interface SourceDocument {
  readonly file: string;
  /** 1-based index of the document in its file's YAML stream. */
  readonly index: number;
  readonly kind: 'config' | 'manifest' | 'other' | 'empty';
  /** The ratelimit document: the file's document, or a manifest's spec without operator fields. */
  readonly document: unknown;
  /** Prefix of field paths of the ratelimit document inside the YAML document ('' or 'spec.'). */
  readonly fieldPrefix: string;
  readonly manifest?: ManifestInfo;
  /** When the document cannot be read at all (YAML syntax, types the service refuses). */
  readonly error?: ConfigError;
  /** Line and column of a field path (full path, with fieldPrefix), or of its closest existing parent. */
  locate(field: string): Position;
}

/** Every `.yaml`/`.yml` file under the given files and folders (dot entries skipped), sorted per folder. */
export function expandPaths(paths: readonly string[]): string[] {
  const out: string[] = [];
  const visit = (p: string, explicit: boolean): void => {
    const st = statSync(p);
    if (st.isDirectory()) {
      for (const name of readdirSync(p).sort()) {
        if (name.startsWith('.') || name === 'node_modules') continue;
        visit(join(p, name), false);
      }
    } else if (explicit || /\.ya?ml$/i.test(p)) {
      out.push(p);
    }
  };
  for (const p of paths) visit(p, true);
  return out;
}

/** `spec.descriptors[0].rate_limit` -> ['spec', 'descriptors', 0, 'rate_limit']. */
export function fieldSegments(field: string): (string | number)[] {
  const out: (string | number)[] = [];
  for (const part of field.split('.')) {
    if (part === '') continue;
    const m = /^([^[]*)((?:\[\d+\])*)$/.exec(part);
    if (!m) {
      out.push(part);
      continue;
    }
    if (m[1] !== '') out.push(m[1]!);
    for (const idx of m[2]!.matchAll(/\[(\d+)\]/g)) out.push(Number(idx[1]));
  }
  return out;
}

function nodeAt(doc: Document, root: unknown, segments: readonly (string | number)[]): Node | undefined {
  let node: unknown = root;
  let best: Node | undefined = (root as Node | undefined) ?? undefined;
  for (let i = 0; i < segments.length; i++) {
    const seg = segments[i];
    if (isAlias(node)) node = node.resolve(doc);
    if (isMap(node)) {
      const pair = node.items.find((p) => (p.key as { value?: unknown } | null)?.value === seg);
      if (!pair) return best;
      // The field itself is located at its key (`unit: fortnight` at `unit`).
      if (i === segments.length - 1) return (pair.key as Node | null) ?? best;
      // A missing value (`key:`) is located at its key.
      best = ((pair.value as Node | null) ?? (pair.key as Node)) || best;
      node = pair.value;
      if (node === null || node === undefined) return pair.key as Node;
    } else if (isSeq(node) && typeof seg === 'number') {
      const item = node.items[seg] as Node | undefined;
      if (!item) return best;
      best = item;
      node = item;
    } else {
      return best;
    }
  }
  return best;
}

/** The text with everything outside [start, end) blanked to spaces, newlines kept: positions stay valid. */
function isolate(text: string, start: number, end: number): string {
  const blank = (s: string) => s.replace(/[^\n]/g, ' ');
  return blank(text.slice(0, start)) + text.slice(start, end) + blank(text.slice(end));
}

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function manifestInfo(js: Record<string, unknown>, defaultNamespace: string): ManifestInfo {
  const meta = isObject(js.metadata) ? js.metadata : {};
  const ns = typeof meta.namespace === 'string' && meta.namespace !== '' ? meta.namespace : defaultNamespace;
  const name = typeof meta.name === 'string' ? meta.name : '';
  const created = typeof meta.creationTimestamp === 'string' ? Date.parse(meta.creationTimestamp) : NaN;
  const spec = isObject(js.spec) ? js.spec : {};
  return {
    key: `${ns}/${name}`,
    ...(Number.isNaN(created) ? {} : { createdMs: created }),
    mergeDomain: spec.mergeDomain === true,
  };
}

export interface ReadOptions {
  /** Namespace of manifests without metadata.namespace (as `kubectl apply -n`). */
  readonly namespace?: string;
}

/** A Kubernetes list: `kind: List` (kubectl's output) or `RateLimitConfigList`, with its items. */
function isList(js: Record<string, unknown>): boolean {
  return (js.kind === 'List' || js.kind === `${RLC_KIND}List`) && Array.isArray(js.items);
}

function other(file: string, index: number, locate: (field: string) => Position): SourceDocument {
  return { file, index, kind: 'other', document: undefined, fieldPrefix: '', locate };
}

/** A RateLimitConfig (at `prefix` in its YAML document) as a source document; undefined for other kinds. */
function resource(
  file: string,
  index: number,
  js: unknown,
  prefix: string,
  locate: (field: string) => Position,
  opts: ReadOptions,
): SourceDocument | undefined {
  if (!isObject(js) || js.kind !== RLC_KIND || typeof js.apiVersion !== 'string') return undefined;
  if (!js.apiVersion.startsWith(`${RLC_GROUP}/`)) return undefined;
  const spec = manifestDocument(js.spec);
  return {
    file,
    index,
    kind: 'manifest',
    document: spec,
    fieldPrefix: `${prefix}spec.`,
    manifest: manifestInfo(js, opts.namespace ?? 'default'),
    locate,
  };
}

/** Reads one file's YAML stream into documents. */
export function readSourceText(file: string, text: string, opts: ReadOptions = {}): SourceDocument[] {
  const lineCounter = new LineCounter();
  const docs = parseAllDocuments(text, { version: '1.1', merge: true, lineCounter });
  const list = Array.isArray(docs) ? docs : [];
  const pos = (offset: number): Position => lineCounter.linePos(offset);
  const out: SourceDocument[] = [];
  if (list.length === 0) {
    // An empty file: the service reads it as an empty map (and refuses the empty domain).
    out.push({ file, index: 1, kind: 'config', document: null, fieldPrefix: '', locate: () => pos(0) });
    return out;
  }
  const nonEmpty = list.filter((d) => d.contents !== null || d.errors.length > 0).length;
  list.forEach((doc, i) => {
    const index = i + 1;
    const start = doc.range[0];
    const locate = (field: string): Position => {
      const node = nodeAt(doc, doc.contents, fieldSegments(field));
      return pos(node?.range?.[0] ?? start);
    };
    if (doc.contents === null && doc.errors.length === 0 && (nonEmpty > 0 || i > 0)) {
      out.push({ file, index, kind: 'empty', document: null, fieldPrefix: '', locate });
      return;
    }
    const name = list.length > 1 ? `${file}#${index}` : file;
    let js: unknown;
    try {
      js = parseYamlSource({ name, yaml: isolate(text, start, doc.range[2]) });
    } catch (err) {
      const error =
        err instanceof ConfigError
          ? err
          : new ConfigError(name, '', `error loading config file: ${String(err)}`);
      const at = doc.errors[0]?.linePos?.[0];
      out.push({
        file,
        index,
        kind: 'config',
        document: undefined,
        fieldPrefix: '',
        error,
        locate: (field) => (field === '' && at ? at : locate(field)),
      });
      return;
    }
    if (isObject(js) && isList(js)) {
      // `kubectl get rlc -A -o yaml`: each item is read as a document of its own.
      (js.items as unknown[]).forEach((item, i) => {
        out.push(resource(file, index, item, `items[${i}].`, locate, opts) ?? other(file, index, locate));
      });
      return;
    }
    if (isObject(js) && typeof js.kind === 'string' && typeof js.apiVersion === 'string') {
      out.push(resource(file, index, js, '', locate, opts) ?? other(file, index, locate));
      return;
    }
    out.push({ file, index, kind: 'config', document: js, fieldPrefix: '', locate });
  });
  return out;
}

/** Reads every file under the paths. A file that cannot be read is one error document. */
export function readSources(paths: readonly string[], opts: ReadOptions = {}): SourceDocument[] {
  const out: SourceDocument[] = [];
  for (const file of expandPaths(paths)) {
    let text: string;
    try {
      const size = statSync(file).size;
      if (size > MAX_FILE_BYTES)
        throw new Error(`${size} bytes, more than the ${MAX_FILE_BYTES} this command reads`);
      text = readFileSync(file, 'utf8');
    } catch (err) {
      out.push({
        file,
        index: 1,
        kind: 'config',
        document: undefined,
        fieldPrefix: '',
        error: new ConfigError(file, '', `cannot read file: ${(err as Error).message}`),
        locate: () => ({ line: 1, col: 1 }),
      });
      continue;
    }
    out.push(...readSourceText(file, text, opts));
  }
  return out;
}
