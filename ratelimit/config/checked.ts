// A validated document as the parse worker hands it to the main thread: the composite keys of its
// top-level descriptors, their JSON texts back to back in one UTF-8 buffer (transferred to the main
// thread, not copied, and outside the JavaScript heap) and the features its rules use. The main thread
// indexes the keys and compiles a top-level descriptor on its first use (matcher.ts), so a reload or an
// xDS push builds no per-descriptor objects up front: those objects, built all at once, were what the
// young-generation collections copied while a 10k-descriptor push compiled (docs/performance.md).
import type { ConfigFeature } from './types.js';
import { addFeatures } from './rules.js';
import { countDescriptors } from './size.js';
import { compositeKey } from './keys.js';
import type { ConfigDoc, DescriptorDoc } from './validate.js';

export interface CheckedDocument {
  readonly name: string;
  readonly domain: string;
  /** The composite key (`key` or `key_value`) of each top-level descriptor, in config order. */
  readonly keys: readonly string[];
  /** The top-level descriptors' JSON texts, UTF-8: the i-th is `json[offsets[i], offsets[i + 1])`. */
  readonly json: Uint8Array;
  readonly offsets: Uint32Array;
  /** The features the document's rules use (RateLimitConfig.features). */
  readonly features: readonly ConfigFeature[];
  /** Its descriptors at every level (the size CONFIG_MAX_DESCRIPTORS bounds). */
  readonly descriptors: number;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** A validated document in the form the main thread compiles (see CheckedDocument). */
export function toCheckedDocument(name: string, doc: ConfigDoc): CheckedDocument {
  const list = doc.descriptors ?? [];
  const texts = list.map((d) => encoder.encode(JSON.stringify(d)));
  const offsets = new Uint32Array(texts.length + 1);
  for (let i = 0; i < texts.length; i++) offsets[i + 1] = offsets[i]! + texts[i]!.length;
  const json = new Uint8Array(offsets[texts.length]!);
  for (let i = 0; i < texts.length; i++) json.set(texts[i]!, offsets[i]!);
  const features = new Set<ConfigFeature>();
  addFeatures(list, features);
  return {
    name,
    domain: doc.domain,
    keys: list.map((d) => compositeKey(d.key, d.value)),
    json,
    offsets,
    features: [...features],
    descriptors: countDescriptors(list),
  };
}

/** The i-th top-level descriptor of a checked document, decoded. */
export function checkedEntry(doc: CheckedDocument, i: number): DescriptorDoc {
  return JSON.parse(decoder.decode(doc.json.subarray(doc.offsets[i], doc.offsets[i + 1]))) as DescriptorDoc;
}

/** The buffers to transfer with checked documents in a postMessage. */
export function checkedBuffers(docs: readonly CheckedDocument[]): ArrayBuffer[] {
  return docs.flatMap((d) => [d.json.buffer as ArrayBuffer, d.offsets.buffer as ArrayBuffer]);
}
