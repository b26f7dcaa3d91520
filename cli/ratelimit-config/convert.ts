// ratelimit-config convert: plain ratelimit YAML files (the service's FILE format) turned into
// RateLimitConfig manifests for the operator, one per domain. The input is read and checked by the same
// code as `validate`; the output is built from the files' own YAML syntax trees, so key order and most
// comments carry over; and before anything is printed the output is read back through `validate`'s
// reader and checked to describe exactly the same domains and descriptors.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { isDeepStrictEqual } from 'node:util';
import { Document, isMap, isNode, isSeq, parseAllDocuments, YAMLMap, YAMLSeq } from 'yaml';
import { checkDocument } from '../../ratelimit/config/index.js';
import {
  buildConfigSet,
  hasErrors,
  type ConfigSet,
  type ConfigSetOptions,
} from '../../control-plane/config-set/index.js';
import {
  readSourceText,
  RLC_GROUP,
  RLC_KIND,
  type SourceDocument,
} from '../../control-plane/config-set/index.js';

export const RLC_API_VERSION = `${RLC_GROUP}/v1alpha1`;

/** Longest name produced: a DNS-1123 label (so it also fits wherever a label is required). */
const MAX_NAME = 63;

/**
 * A DNS-1123 label for a domain: lower case, every run of characters other than a-z and 0-9 becomes
 * one '-', leading and trailing '-' dropped, at most 63 characters. When that changed anything but the
 * case, or left nothing, the first 8 hex digits of the domain's SHA-256 are appended, so two domains
 * that differ only in punctuation (`api_v1`, `api.v1`) still get different names.
 */
export function resourceName(domain: string): string {
  const base = domain
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '');
  if (base !== '' && base === domain.toLowerCase() && base.length <= MAX_NAME) return base;
  const hash = createHash('sha256').update(domain).digest('hex').slice(0, 8);
  const head = base.slice(0, MAX_NAME - hash.length - 1).replace(/-+$/, '');
  return head === '' ? `domain-${hash}` : `${head}-${hash}`;
}

export interface ConvertedResource {
  readonly domain: string;
  readonly name: string;
  /** The files the domain came from (several with MERGE_DOMAIN_CONFIG). */
  readonly files: readonly string[];
  /** One YAML document, ending with a newline, without a `---` line. */
  readonly yaml: string;
}

export type ConvertResult =
  | { readonly ok: true; readonly resources: readonly ConvertedResource[]; readonly check: ConfigSet }
  | { readonly ok: false; readonly set?: ConfigSet; readonly message?: string };

/** The file's document of a plain config source, as a syntax tree. */
function treeOf(src: SourceDocument): Document {
  const text = readFileSync(src.file, 'utf8');
  const docs = parseAllDocuments(text, { version: '1.1', merge: true });
  const list = Array.isArray(docs) ? docs : [];
  const doc = list[src.index - 1];
  if (!doc || doc.errors.length > 0) throw new Error(`${src.file} changed while it was read`);
  return doc;
}

/** One domain's documents (several only when merged) as one spec node, the first file's tree kept. */
function specOf(srcs: readonly SourceDocument[]): { spec: YAMLMap; header: string | undefined } {
  const first = treeOf(srcs[0]!);
  const spec = isMap(first.contents) ? first.contents : new YAMLMap();
  for (const src of srcs.slice(1)) {
    const more = treeOf(src).contents;
    const items = isMap(more) ? more.get('descriptors', true) : undefined;
    if (!isSeq(items) || items.items.length === 0) continue;
    const existing: unknown = spec.get('descriptors', true);
    let seq: YAMLSeq;
    if (isSeq(existing)) seq = existing;
    else {
      seq = new YAMLSeq();
      spec.set('descriptors', seq);
    }
    items.items.forEach((item, i) => {
      // Where the merged descriptors came from, as a comment on the first.
      if (i === 0 && isNode(item)) {
        // A comment above the first item belongs to the list in the syntax tree.
        const own = [items.commentBefore, item.commentBefore].filter((c) => c).join('\n');
        item.commentBefore = ` from ${src.file}${own ? `\n${own}` : ''}`;
      }
      seq.items.push(item);
    });
  }
  return { spec, header: first.commentBefore ?? undefined };
}

/** The ratelimit document of a domain as the validator reads it: merged files' descriptors concatenated. */
function mergedDocument(srcs: readonly SourceDocument[]): unknown {
  const docs = srcs.map((s) => checkDocument(s.file, s.document).document!);
  return {
    domain: docs[0]!.domain,
    descriptors: docs.flatMap((d) => (d.descriptors ?? []) as unknown[]),
  };
}

function comparable(doc: unknown): unknown {
  const d = checkDocument('', doc).document;
  return d === undefined ? undefined : { domain: d.domain, descriptors: d.descriptors ?? [] };
}

/**
 * Converts the plain config documents of `sources` (already read by readSources). Fails with the
 * validator's problems when `validate` would refuse the input.
 */
export function convertSources(
  sources: readonly SourceDocument[],
  opts: ConfigSetOptions & { readonly namespace?: string },
): ConvertResult {
  const set = buildConfigSet(sources, opts);
  if (hasErrors(set)) return { ok: false, set };
  const manifest = sources.find((s) => s.kind === 'manifest');
  if (manifest) {
    return {
      ok: false,
      message: `${manifest.file} (document ${manifest.index}) is a ${RLC_KIND} already; convert reads plain ratelimit config files`,
    };
  }
  const byDomain = new Map<string, SourceDocument[]>();
  for (const src of sources) {
    if (src.kind !== 'config') continue;
    const domain = checkDocument(src.file, src.document).document!.domain;
    byDomain.set(domain, [...(byDomain.get(domain) ?? []), src]);
  }
  const names = new Map<string, string>();
  const resources: ConvertedResource[] = [];
  for (const [domain, srcs] of byDomain) {
    const name = resourceName(domain);
    const clash = names.get(name);
    if (clash !== undefined) {
      return { ok: false, message: `domains "${clash}" and "${domain}" both give the resource name ${name}` };
    }
    names.set(name, domain);
    const { spec, header } = specOf(srcs);
    const metadata: Record<string, string> = { name };
    if (opts.namespace !== undefined) metadata.namespace = opts.namespace;
    const out = new Document({ apiVersion: RLC_API_VERSION, kind: RLC_KIND, metadata }, { version: '1.1' });
    out.set('spec', spec);
    const from = ` Converted by ratelimit-config convert from ${srcs.map((s) => s.file).join(', ')}`;
    out.commentBefore = header ? `${from}\n${header}` : from;
    resources.push({ domain, name, files: srcs.map((s) => s.file), yaml: out.toString({ lineWidth: 0 }) });
  }
  // The output read back as `validate` reads it: valid, and the same documents the input was.
  const stream = resources.map((r) => r.yaml).join('---\n');
  const readBack = readSourceText('<convert output>', stream);
  const check = buildConfigSet(readBack, {});
  if (hasErrors(check)) {
    const first = check.problems.find((p) => p.severity === 'error')!;
    return { ok: false, message: `internal error: the output is invalid: ${first.field}: ${first.message}` };
  }
  const back = new Map<string, unknown>();
  for (const src of readBack) {
    if (src.kind === 'manifest')
      back.set(String((src.document as { domain?: unknown }).domain), src.document);
  }
  for (const [domain, srcs] of byDomain) {
    if (!isDeepStrictEqual(comparable(back.get(domain)), comparable(mergedDocument(srcs)))) {
      return {
        ok: false,
        message: `internal error: the resource of domain "${domain}" does not read back the same`,
      };
    }
  }
  return { ok: true, resources, check };
}
