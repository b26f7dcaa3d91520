// The YAML door: text -> plain document, with the checks that only make sense on YAML text
// (syntax, non-string keys, floats) and the reference's (Go yaml.v2) reading of scalars.
import {
  CST,
  isAlias,
  isCollection,
  isMap,
  isPair,
  isScalar,
  isSeq,
  Lexer,
  parseAllDocuments,
  type Document,
  type Node,
} from 'yaml';
import { ConfigError } from '../errors.js';
import type { ConfigSource } from '../types.js';
import { FULL_PATH, readYamlFast } from './fast.js';
import { GO_INT, STRING_FIELDS, isGoFloat } from './go-scalars.js';
import { DEFAULT_YAML_LIMITS, limitError, type YamlLimits } from './limits.js';

function lineAt(text: string, offset: number): number {
  let line = 1;
  for (let i = text.indexOf('\n'); i !== -1 && i < offset; i = text.indexOf('\n', i + 1)) line++;
  return line;
}

/** The token-stream pass: scalar lengths, flow depth and alias count, before the tree is composed. */
function prescan(name: string, text: string, limits: YamlLimits): void {
  let offset = 0;
  let aliases = 0;
  let flowDepth = 0;
  let scalarNext = false;
  for (const token of new Lexer().lex(text)) {
    const c = token.charCodeAt(0);
    // '\x1f' announces a plain or block scalar's text as the next token; quoted scalars come whole.
    if (scalarNext || c === 0x22 || c === 0x27) {
      if (token.length > limits.maxScalarLength + (scalarNext ? 0 : 2)) {
        const where = `a scalar at line ${lineAt(text, offset)}`;
        throw limitError(name, 'maxScalarLength', where, limits.maxScalarLength);
      }
    } else if (token.length === 1 && (c === 0x5b || c === 0x7b)) {
      if (++flowDepth > limits.maxDepth) {
        throw limitError(name, 'maxDepth', `nesting at line ${lineAt(text, offset)}`, limits.maxDepth);
      }
    } else if (token.length === 1 && (c === 0x5d || c === 0x7d)) flowDepth--;
    else if (c === 0x2a && ++aliases > limits.maxAliases) {
      throw limitError(name, 'maxAliases', 'the number of aliases', limits.maxAliases);
    }
    scalarNext = token === CST.SCALAR;
    offset += token.length;
  }
}

/**
 * The tree pass: depth and node count as if every alias were expanded, computed once per anchored
 * node (memoized), so it costs the size of the tree, not of its expansion.
 */
function measure(name: string, doc: Document, limits: YamlLimits): void {
  const memo = new Map<unknown, { nodes: number; height: number }>();
  const visit = (node: unknown, depth: number): { nodes: number; height: number } => {
    if (depth > limits.maxDepth) throw limitError(name, 'maxDepth', 'nesting', limits.maxDepth);
    if (isAlias(node)) {
      const target = node.resolve(doc);
      // yaml.v2's wording; the yaml package would throw a bare ReferenceError from toJS.
      if (target === undefined)
        throw new ConfigError(
          name,
          '',
          `error loading config file: yaml: unknown anchor '${node.source}' referenced`,
        );
      const known = memo.get(target);
      if (known) {
        if (depth + known.height > limits.maxDepth)
          throw limitError(name, 'maxDepth', 'nesting', limits.maxDepth);
        return known;
      }
      const m = visit(target, depth);
      memo.set(target, m);
      return m;
    }
    if (isPair(node)) {
      const k = visit(node.key, depth);
      const v = visit(node.value, depth);
      return { nodes: k.nodes + v.nodes, height: Math.max(k.height, v.height) };
    }
    if (!isCollection(node)) return { nodes: node === null || node === undefined ? 0 : 1, height: 0 };
    let nodes = 1;
    let height = 0;
    for (const item of node.items) {
      const m = visit(item, depth + 1);
      nodes += m.nodes;
      if (nodes > limits.maxNodes)
        throw limitError(name, 'maxNodes', 'the number of nodes after alias expansion', limits.maxNodes);
      height = Math.max(height, m.height + 1);
    }
    return { nodes, height };
  };
  const total = visit(doc.contents, 0);
  if (total.nodes > limits.maxNodes)
    throw limitError(name, 'maxNodes', 'the number of nodes after alias expansion', limits.maxNodes);
}

function firstLine(message: string): string {
  const line = message.split('\n', 1)[0] ?? message;
  return line.replace(/ at line \d+, column \d+:?$/, '');
}

// How Go's yaml.v2 (YAML 1.1) types a plain scalar (GO_INT, isGoFloat): the yaml package's 1.1 schema is
// laxer (it reads `e1` as a float and `1:30` as sexagesimal), so decisions that change errors use those.

type ScalarNode = Node & { value: unknown; source?: string };

/** A non-string scalar as yaml.v2 would see it: its text when Go would read a string after all. */
function goStringText(node: ScalarNode): string | undefined {
  if (typeof node.value === 'string') return node.value;
  const text = node.source;
  if (text === undefined || node.value === null) return undefined;
  if (typeof node.value === 'number' && !GO_INT.test(text) && !isGoFloat(text)) return text;
  return undefined;
}

/**
 * Walks the syntax tree (skipping free-form `metadata`) to reject what the reference rejects before
 * decoding, and rewrites number/boolean scalars of string fields to their source text.
 */
function walk(source: string, doc: Document, node: unknown, field: string, seen: Set<unknown>): void {
  if (isAlias(node)) {
    // An anchored node is checked (and rewritten in place) once, however often it is referenced:
    // following every alias would expand a "billion laughs" document here.
    const target = node.resolve(doc);
    if (seen.has(target)) return;
    seen.add(target);
    walk(source, doc, target, field, seen);
    return;
  }
  if (isMap(node)) {
    for (const pair of node.items) {
      if (!isPair(pair)) continue;
      const k = pair.key;
      let keyText: string | undefined;
      if (isScalar(k) && typeof k.value === 'symbol') {
        // `<<` merge key (yaml.v2 merges too): its value is a map or alias to check as a map.
        walk(source, doc, pair.value, field, seen);
        continue;
      } else if (isScalar(k)) {
        keyText = goStringText(k);
        if (keyText === undefined) {
          const shown = k.value === null ? '<nil>' : (k.source ?? String(k.value));
          throw new ConfigError(source, field, `config error, key is not of type string: ${shown}`);
        }
        k.value = keyText;
      } else {
        throw new ConfigError(source, field, `config error, key is not of type string: ${String(k)}`);
      }
      const childField = field === '' ? keyText : `${field}.${keyText}`;
      if (keyText === 'metadata') {
        metadataKeysAsText(doc, pair.value, seen);
        continue;
      }
      const v = pair.value;
      if (
        isScalar(v) &&
        STRING_FIELDS.has(keyText) &&
        (typeof v.value === 'number' || typeof v.value === 'boolean')
      ) {
        checkFloat(source, v, childField);
        v.value = v.source ?? String(v.value);
        continue;
      }
      walk(source, doc, v, childField, seen);
    }
    return;
  }
  if (isSeq(node)) {
    node.items.forEach((item, i) => walk(source, doc, item, `${field}[${i}]`, seen));
    return;
  }
  if (isScalar(node)) checkFloat(source, node, field);
}

/** The text a scalar key stands for: a string key's value, another scalar's source (see below). */
function keyText(node: ScalarNode): unknown {
  return typeof node.value === 'string' ? node.value : (node.source ?? node.value);
}

/** Duplicate keys in one mapping: the same node, or scalars with the same text. */
function sameKeyText(a: unknown, b: unknown): boolean {
  return a === b || (isScalar(a) && isScalar(b) && keyText(a as ScalarNode) === keyText(b as ScalarNode));
}

/**
 * Free-form metadata: every scalar key becomes its text at every depth, so `y:`, `no:` or `010:` stay
 * the keys written (a YAML 1.1 reader would make them true, false and 8). Values keep their types.
 */
function metadataKeysAsText(doc: Document, node: unknown, seen: Set<unknown>): void {
  if (isAlias(node)) {
    const target = node.resolve(doc);
    if (seen.has(target)) return;
    seen.add(target);
    metadataKeysAsText(doc, target, seen);
    return;
  }
  if (isMap(node)) {
    for (const pair of node.items) {
      if (!isPair(pair)) continue;
      const k = pair.key;
      if (isScalar(k) && typeof k.value !== 'string' && typeof k.value !== 'symbol') {
        k.value = (k as ScalarNode).source ?? (k.value === null ? '' : String(k.value));
      }
      metadataKeysAsText(doc, pair.value, seen);
    }
  } else if (isSeq(node)) {
    for (const item of node.items) metadataKeysAsText(doc, item, seen);
  }
}

/** yaml.v2 decodes `1.5`, `1e3` and `.inf` to float64, which the reference's key check rejects. */
function checkFloat(source: string, node: ScalarNode, field: string): void {
  if (typeof node.value !== 'number') return;
  if (isGoFloat(node.source ?? String(node.value)))
    throw new ConfigError(source, field, 'error checking config');
}

/**
 * The checks on the text, before it is composed: size, then scalar length, flow depth and aliases.
 * For other YAML readers of config (the control plane's directory source); throws ConfigError.
 */
export function checkYamlText(name: string, text: string, limits: YamlLimits = DEFAULT_YAML_LIMITS): void {
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes > limits.maxBytes)
    throw limitError(name, 'maxBytes', `the file's size (${bytes} bytes)`, limits.maxBytes);
  prescan(name, text, limits);
}

/**
 * The checks on one composed document, before its own errors are read: a composer that ran out of stack
 * (it recurses per level) is the depth limit, then depth and node count as if aliases were expanded.
 */
export function checkYamlDocument(
  name: string,
  doc: Document,
  limits: YamlLimits = DEFAULT_YAML_LIMITS,
): void {
  if (doc.errors[0]?.code === 'RESOURCE_EXHAUSTION')
    throw limitError(name, 'maxDepth', 'nesting', limits.maxDepth);
  if (doc.errors.length === 0) measure(name, doc, limits);
}

/**
 * Parses one YAML source into a plain document (null for an empty file), within `limits`. Throws
 * ConfigError naming the file (and the limit with its setting when one is exceeded).
 */
export function parseYamlSource(src: ConfigSource, limits: YamlLimits = DEFAULT_YAML_LIMITS): unknown {
  const bytes = Buffer.byteLength(src.yaml, 'utf8');
  if (bytes > limits.maxBytes)
    throw limitError(src.name, 'maxBytes', `the file's size (${bytes} bytes)`, limits.maxBytes);
  // An ordinary file is read by the fast door (fast.ts); anything else, and every error, here.
  const fast = readYamlFast(src.yaml, limits);
  return fast === FULL_PATH ? parseYamlSourceFully(src, limits) : fast;
}

/**
 * parseYamlSource with the `yaml` package alone: every scalar's source and every error's line. What the
 * fast door must agree with (fast.test.ts compares them).
 */
export function parseYamlSourceFully(src: ConfigSource, limits: YamlLimits = DEFAULT_YAML_LIMITS): unknown {
  checkYamlText(src.name, src.yaml, limits);
  // YAML 1.1 like the reference's yaml.v2: yes/no/on/off are booleans, `<<` merges.
  const docs = parseAllDocuments(src.yaml, {
    version: '1.1',
    prettyErrors: true,
    merge: true,
    uniqueKeys: sameKeyText,
  });
  if (!Array.isArray(docs) || docs.length === 0) return null;
  // The reference decodes the first document of the stream only.
  const doc = docs[0]!;
  checkYamlDocument(src.name, doc, limits);
  const err = doc.errors[0];
  if (err !== undefined) {
    const line = err.linePos?.[0].line;
    const where = line === undefined ? '' : `line ${line}: `;
    throw new ConfigError(src.name, '', `error loading config file: yaml: ${where}${firstLine(err.message)}`);
  }
  walk(src.name, doc, doc.contents, '', new Set());
  // measure() bounded the expansion already; yaml's own alias check counts differently (aliases times
  // the aliases inside each anchor) and would refuse documents within the limits above.
  return doc.toJS({ maxAliasCount: -1 });
}
