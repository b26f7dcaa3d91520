// The fast door for ordinary config files. The `yaml` package (read.ts) keeps every scalar's
// source text and every error's position, which is what the reference's (Go yaml.v2) reading and our
// error messages need, but it costs seconds of CPU for a large file (docs/decisions/007-hot-path-shapes.md). js-yaml's event
// parser reads the same file in a fraction of that into a flat event list (offsets into the text, no
// tree, aliases not expanded). This file builds the plain document from those events when the file is
// an ordinary one, and otherwise answers FULL_PATH so that the caller reads it with the `yaml` package,
// which then gives every error and limit message exactly as before:
// - any js-yaml error, more than one document, a tag, an alias, a `<<` merge key, a key that is not a
//   string (outside metadata, where a key is its text), a duplicate key, a timestamp;
// - a float outside metadata (the reference's key check refuses it: the full path says where);
// - any YAML bound (depth, scalar length, node count) near or over its limit.
// Plain scalars are typed with the `yaml` package's own YAML 1.1 tags, so a value means here what it
// means on the full path (`value: 010` stays the text "010", `requests_per_unit: 0x10` is 16).
import { EVENT_ID, SCALAR_STYLE, getScalarValue, parseEvents, type Event, type ScalarEvent } from 'js-yaml';
import { Schema } from 'yaml';
import { STRING_FIELDS, isGoFloat } from './go-scalars.js';
import type { YamlLimits } from './limits.js';

/** The answer "read this file with the full YAML path". */
export const FULL_PATH: unique symbol = Symbol('full YAML path');

interface ImplicitTag {
  test?: RegExp;
  default?: boolean | 'key';
  resolve: (value: string, onError: (msg: string) => void, options: object) => unknown;
}
// The tags the full path resolves plain scalars with (Document version 1.1, merge on), in its order.
const YAML11_TAGS = (
  new Schema({ schema: 'yaml-1.1', merge: true, resolveKnownTags: false }).tags as unknown as ImplicitTag[]
).filter((t) => t.default === true && t.test !== undefined);
const RESOLVE_OPTIONS = { intAsBigInt: false };

class Bail extends Error {}
const bail = (): never => {
  throw new Bail();
};

/** A plain scalar as the full path types it; bails where the full path would fail or needs its text. */
function plainValue(text: string): unknown {
  // Most config scalars are words: a first character no YAML 1.1 tag can start with skips the regexes.
  const c = text.charCodeAt(0);
  // a-z but not e (`e1` is a float to the yaml package), f(alse), n(ull, o), o(n, ff), t(rue), y(es).
  if (
    c >= 0x61 &&
    c <= 0x7a &&
    c !== 0x65 &&
    c !== 0x66 &&
    c !== 0x6e &&
    c !== 0x6f &&
    c !== 0x74 &&
    c !== 0x79
  )
    return text;
  if (text === '<<') bail(); // a merge key
  const tag = YAML11_TAGS.find((t) => t.test!.test(text));
  if (tag === undefined) return text;
  const value = tag.resolve(text, bail, RESOLVE_OPTIONS);
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return value;
  if (typeof value === 'number' && Number.isFinite(value)) return value;
  return bail(); // merge key, timestamp, NaN/Infinity, a BigInt
}

interface Frame {
  /** The collection being built. */
  readonly value: Record<string, unknown> | unknown[];
  readonly depth: number;
  /** Inside a `metadata` value: free-form, no float check and no string rewriting. */
  readonly freeForm: boolean;
  /** A mapping's key waiting for its value. */
  key: string | undefined;
}

/**
 * The plain document of `text` (null when it has no document), or FULL_PATH. Checks the YAML bounds on
 * the events before building anything; the text's size is the caller's check.
 */
export function readYamlFast(text: string, limits: YamlLimits): unknown {
  let events: Event[];
  try {
    events = parseEvents(text, { maxDepth: limits.maxDepth });
  } catch {
    return FULL_PATH;
  }
  // The bounds, before anything is built: no aliases at all (so nothing can expand), scalar lengths
  // with a margin for quotes, and the node count.
  let nodes = 0;
  let documents = 0;
  for (const e of events) {
    if (e.type === EVENT_ID.DOCUMENT) documents++;
    else if (e.type === EVENT_ID.ALIAS) return FULL_PATH;
    else if (e.type !== EVENT_ID.POP) {
      if (e.tagStart !== -1) return FULL_PATH;
      nodes++;
      if (e.type === EVENT_ID.SCALAR && e.valueEnd - e.valueStart > limits.maxScalarLength - 2)
        return FULL_PATH;
    }
  }
  if (documents > 1 || nodes > limits.maxNodes) return FULL_PATH;
  try {
    return build(text, events, limits);
  } catch (err) {
    if (err instanceof Bail) return FULL_PATH;
    throw err;
  }
}

function build(text: string, events: Event[], limits: YamlLimits): unknown {
  const stack: Frame[] = [];
  let root: unknown = null;
  const put = (value: unknown): void => {
    const top = stack[stack.length - 1];
    if (top === undefined) {
      root = value;
    } else if (Array.isArray(top.value)) {
      top.value.push(value);
    } else {
      const k = top.key!;
      top.key = undefined;
      // A duplicate key is an error on the full path; __proto__ would not be an own property here.
      if (Object.hasOwn(top.value, k) || k === '__proto__') bail();
      top.value[k] = value;
    }
  };
  for (const e of events) {
    if (e.type === EVENT_ID.DOCUMENT) continue;
    const top = stack[stack.length - 1];
    if (e.type === EVENT_ID.POP) {
      if (top === undefined) continue; // the document's end
      stack.pop();
      put(top.value);
      continue;
    }
    const depth = top === undefined ? 0 : top.depth + 1;
    if (depth > limits.maxDepth) bail();
    const atKey = top !== undefined && !Array.isArray(top.value) && top.key === undefined;
    if (e.type === EVENT_ID.SEQUENCE || e.type === EVENT_ID.MAPPING) {
      if (atKey) bail(); // a collection as a key
      const freeForm = top !== undefined && (top.freeForm || top.key === 'metadata');
      const value = e.type === EVENT_ID.SEQUENCE ? [] : {};
      stack.push({ value, depth, freeForm, key: undefined });
      continue;
    }
    if (e.type !== EVENT_ID.SCALAR) bail();
    const source = getScalarValue(text, e as ScalarEvent);
    // Only plain scalars are typed; a plain scalar's decoded text is its source (folding aside, which a
    // typed value never has).
    const scalar = (e as ScalarEvent).style === SCALAR_STYLE.PLAIN ? plainValue(source) : source;
    if (atKey) {
      // A key in metadata is its text (`y: 1` keeps the key "y"); elsewhere the full path names a key
      // that is not a string.
      if (typeof scalar !== 'string' && !top.freeForm) bail();
      top.key = typeof scalar === 'string' ? scalar : source;
      continue;
    }
    if (typeof scalar === 'number' || typeof scalar === 'boolean') {
      const freeForm = top !== undefined && (top.freeForm || top.key === 'metadata');
      if (!freeForm) {
        if (typeof scalar === 'number' && isGoFloat(source)) bail();
        // yaml.v2 keeps the text of a string field's scalar.
        if (top !== undefined && !Array.isArray(top.value) && STRING_FIELDS.has(top.key!)) {
          put(source);
          continue;
        }
      }
    }
    put(scalar);
  }
  return root;
}
