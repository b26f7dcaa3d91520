// The YAML door: text -> plain document, with the checks that only make sense on YAML text
// (syntax, non-string keys, floats) and the reference's (Go yaml.v2) reading of scalars.
import { isAlias, isMap, isPair, isScalar, isSeq, parseAllDocuments, type Document, type Node } from 'yaml';
import { MAX_YAML_NESTING, yamlNesting, yamlTooDeepMessage } from './depth.js';
import { ConfigError } from './errors.js';
import type { ConfigSource } from './types.js';

/** Fields the reference decodes into Go strings: yaml.v2 keeps the scalar's text (`value: 010` is "010"). */
const STRING_FIELDS = new Set(['domain', 'key', 'value', 'unit', 'name']);

function firstLine(message: string): string {
  const line = message.split('\n', 1)[0] ?? message;
  return line.replace(/ at line \d+, column \d+:?$/, '');
}

// How Go's yaml.v2 (YAML 1.1) types a plain scalar: the yaml package's 1.1 schema is laxer (it reads
// `e1` as a float and `1:30` as sexagesimal), so decisions that change errors use these instead.
const GO_INT = /^[-+]?(0b[01_]+|0x[0-9a-fA-F_]+|0[0-7_]*|[1-9][0-9_]*)$/;
const GO_FLOAT = /^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$/;
const GO_SPECIAL_FLOAT = /^([-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN))$/;

function isGoFloat(text: string): boolean {
  return (GO_FLOAT.test(text) && !GO_INT.test(text)) || GO_SPECIAL_FLOAT.test(text);
}

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
function walk(source: string, doc: Document, node: unknown, field: string): void {
  if (isAlias(node)) {
    walk(source, doc, node.resolve(doc), field);
    return;
  }
  if (isMap(node)) {
    for (const pair of node.items) {
      if (!isPair(pair)) continue;
      const k = pair.key;
      let keyText: string | undefined;
      if (isScalar(k) && typeof k.value === 'symbol') {
        // `<<` merge key (yaml.v2 merges too): its value is a map or alias to check as a map.
        walk(source, doc, pair.value, field);
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
      if (keyText === 'metadata') continue;
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
      walk(source, doc, v, childField);
    }
    return;
  }
  if (isSeq(node)) {
    node.items.forEach((item, i) => walk(source, doc, item, `${field}[${i}]`));
    return;
  }
  if (isScalar(node)) checkFloat(source, node, field);
}

/** yaml.v2 decodes `1.5`, `1e3` and `.inf` to float64, which the reference's key check rejects. */
function checkFloat(source: string, node: ScalarNode, field: string): void {
  if (typeof node.value !== 'number') return;
  if (isGoFloat(node.source ?? String(node.value)))
    throw new ConfigError(source, field, 'error checking config');
}

/** Parses one YAML source into a plain document (null for an empty file). Throws ConfigError. */
export function parseYamlSource(src: ConfigSource): unknown {
  const nesting = yamlNesting(src.yaml);
  if (nesting > MAX_YAML_NESTING) throw new ConfigError(src.name, '', yamlTooDeepMessage(nesting));
  // YAML 1.1 like the reference's yaml.v2: yes/no/on/off are booleans, `<<` merges.
  const docs = parseAllDocuments(src.yaml, { version: '1.1', prettyErrors: true, merge: true });
  if (!Array.isArray(docs) || docs.length === 0) return null;
  // The reference decodes the first document of the stream only.
  const doc = docs[0]!;
  const err = doc.errors[0];
  if (err !== undefined) {
    const line = err.linePos?.[0].line;
    const where = line === undefined ? '' : `line ${line}: `;
    throw new ConfigError(src.name, '', `error loading config file: yaml: ${where}${firstLine(err.message)}`);
  }
  walk(src.name, doc, doc.contents, '');
  return doc.toJS({ maxAliasCount: 1000 });
}
