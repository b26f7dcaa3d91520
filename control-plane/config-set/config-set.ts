// A config set: the documents of a repository checked as the service and the operator check them,
// and what a pod would then serve, per domain.
// - Plain ratelimit files are one runtime directory: each document through the service's validator,
//   then loaded together as the service loads them (a second file for a domain is refused unless
//   MERGE_DOMAIN_CONFIG; merged files may not repeat a top-level key).
// - RateLimitConfig manifests are one cluster: each through the validator and a full compile as the
//   operator does, then the operator's domain rule (resolveDomainClaims), then the xDS round trip a
//   pod sees (fields the xDS message cannot carry are dropped, and reported as warnings).
import {
  compileConfig,
  ConfigError,
  checkDocument,
  documentToRateLimitConfig,
  fieldsLostOverXds,
  rateLimitConfigToDocument,
  resolveDomainClaims,
  type DomainClaim,
  type RateLimitConfig,
} from '../../ratelimit/config/index.js';
import { decodeRateLimitConfig, encodeRateLimitConfig } from '../../proto/index.js';
import type { Position, SourceDocument } from './sources.js';

export interface Problem {
  readonly severity: 'error' | 'warning';
  readonly file: string;
  /** 1-based index of the YAML document in its file. */
  readonly document: number;
  /** Field path inside the YAML document ('' for the document as a whole). */
  readonly field: string;
  readonly message: string;
  readonly line: number;
  readonly col: number;
}

/** Where a top-level descriptor of a served domain comes from. */
export interface DescriptorOrigin {
  readonly source: SourceDocument;
  /** Field path of the descriptor in its YAML document, e.g. `spec.descriptors[2]`. */
  readonly field: string;
}

export interface ServedDomain {
  readonly domain: string;
  /** Top-level descriptors as a pod holds them (after the xDS round trip for manifests). */
  readonly descriptors: readonly unknown[];
  /** Aligned with descriptors. */
  readonly origins: readonly DescriptorOrigin[];
}

export interface ConfigSet {
  readonly problems: readonly Problem[];
  readonly domains: ReadonlyMap<string, ServedDomain>;
  /** Documents read, and those skipped (other kinds of manifest, empty documents). */
  readonly documents: number;
  readonly skipped: number;
}

export interface ConfigSetOptions {
  /** MERGE_DOMAIN_CONFIG for plain files. */
  readonly mergeDomainConfig?: boolean;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

class ProblemList {
  readonly items: Problem[] = [];

  add(src: SourceDocument, field: string, message: string, severity: Problem['severity'] = 'error'): void {
    const at: Position = src.locate(field);
    this.items.push({ severity, file: src.file, document: src.index, field, message, ...at });
  }

  /** A ConfigError of a ratelimit document: its field is relative to the document (prefix added). */
  addConfigError(src: SourceDocument, err: ConfigError, prefixed = false): void {
    const field = prefixed || err.field === '' ? err.field : src.fieldPrefix + err.field;
    this.add(src, field, err.detail);
  }
}

interface ValidDoc {
  readonly src: SourceDocument;
  readonly domain: string;
  readonly descriptors: readonly unknown[];
}

function asConfigError(name: string, err: unknown): ConfigError {
  return err instanceof ConfigError ? err : new ConfigError(name, '', String(err));
}

/** The validator and the full compile, as the service (files) and the operator (resources) run them. */
function checkOne(src: SourceDocument, name: string, problems: ProblemList): ValidDoc | undefined {
  const { errors, document } = checkDocument(name, src.document);
  if (document === undefined) {
    for (const e of errors) problems.addConfigError(src, e);
    return undefined;
  }
  try {
    compileConfig([{ name, document }]);
  } catch (err) {
    problems.addConfigError(src, asConfigError(name, err));
    return undefined;
  }
  return { src, domain: document.domain, descriptors: document.descriptors ?? [] };
}

function docName(src: SourceDocument): string {
  return src.manifest?.key ?? `${src.file}#${src.index}`;
}

/** The served form of a domain's document: what a pod decodes from the xDS resource. */
function overXds(domain: string, document: unknown): unknown[] {
  const msg = decodeRateLimitConfig(encodeRateLimitConfig(documentToRateLimitConfig(domain, document)));
  const doc = rateLimitConfigToDocument(msg);
  return (doc.descriptors as unknown[] | undefined) ?? [];
}

function topLevelField(src: SourceDocument, i: number): string {
  return `${src.fieldPrefix}descriptors[${i}]`;
}

function plainSet(
  docs: readonly SourceDocument[],
  opts: ConfigSetOptions,
  problems: ProblemList,
  out: Map<string, ServedDomain>,
): void {
  const merge = opts.mergeDomainConfig === true;
  const byDomain = new Map<string, ValidDoc[]>();
  for (const src of docs) {
    if (src.index > 1) {
      problems.add(
        src,
        '',
        'the ratelimit service reads only the first YAML document of a file; this document would be ignored',
      );
      continue;
    }
    const valid = checkOne(src, docName(src), problems);
    if (!valid) continue;
    const earlier = byDomain.get(valid.domain) ?? [];
    // Loaded together with the earlier files of the domain, by the service's own loader.
    try {
      compileConfig(
        [...earlier, valid].map((v) => ({ name: docName(v.src), document: v.src.document })),
        { mergeDomainConfig: merge },
      );
    } catch (err) {
      const e = asConfigError(docName(src), err);
      const first = earlier[0]?.src.file;
      const also = e.field === 'domain' && first !== undefined ? `; first defined in ${first}` : '';
      problems.add(src, e.field, e.detail + also);
      continue;
    }
    earlier.push(valid);
    byDomain.set(valid.domain, earlier);
  }
  for (const [domain, list] of byDomain) {
    const descriptors: unknown[] = [];
    const origins: DescriptorOrigin[] = [];
    for (const v of list) {
      v.descriptors.forEach((d, i) => {
        descriptors.push(d);
        origins.push({ source: v.src, field: topLevelField(v.src, i) });
      });
    }
    out.set(domain, { domain, descriptors, origins });
  }
}

interface Claim extends DomainClaim {
  readonly valid: ValidDoc;
}

function manifestSet(
  docs: readonly SourceDocument[],
  problems: ProblemList,
  out: Map<string, ServedDomain>,
): void {
  const claims: Claim[] = [];
  const seen = new Map<string, SourceDocument>();
  for (const src of docs) {
    const info = src.manifest!;
    const first = seen.get(info.key);
    if (first) {
      problems.add(
        src,
        `${src.fieldPrefix.replace(/spec\.$/, '')}metadata.name`,
        `resource ${info.key} is also defined in ${first.file} (document ${first.index}); applying both keeps only the last`,
      );
      continue;
    }
    seen.set(info.key, src);
    const valid = checkOne(src, info.key, problems);
    if (!valid) continue;
    claims.push({
      key: info.key,
      ...(info.createdMs === undefined ? {} : { createdMs: info.createdMs }),
      domain: valid.domain,
      descriptors: valid.descriptors,
      mergeDomain: info.mergeDomain,
      valid,
    });
  }
  for (const { domain, members, rejected, document } of resolveDomainClaims(claims)) {
    for (const r of rejected) {
      const src = r.claim.valid.src;
      let field = `${src.fieldPrefix}domain`;
      if (r.reason === 'DescriptorConflict') {
        const j = r.claim.valid.descriptors.findIndex((d) => {
          const e = d as { key: string; value?: string };
          const ck = e.value === undefined || e.value === '' ? e.key : `${e.key}_${e.value}`;
          return r.message.startsWith(`descriptor '${ck}' `);
        });
        if (j >= 0) field = topLevelField(src, j);
      }
      problems.add(src, field, `${r.reason}: ${r.message}`);
    }
    let served: unknown[];
    try {
      compileConfig([{ name: domain, document }]);
      served = overXds(domain, document);
    } catch (err) {
      for (const m of members) problems.add(m.valid.src, '', asConfigError(domain, err).message);
      continue;
    }
    const origins: DescriptorOrigin[] = [];
    for (const m of members) {
      m.valid.descriptors.forEach((_, i) =>
        origins.push({ source: m.valid.src, field: topLevelField(m.valid.src, i) }),
      );
      for (const path of fieldsLostOverXds(m.valid.src.document)) {
        problems.add(
          m.valid.src,
          `${m.valid.src.fieldPrefix}${path}`,
          'not carried over xDS, so pods never see this field (the resource is served without it)',
          'warning',
        );
      }
    }
    out.set(domain, { domain, descriptors: served, origins });
  }
}

/** Checks every document and builds what would be served. */
export function buildConfigSet(docs: readonly SourceDocument[], opts: ConfigSetOptions = {}): ConfigSet {
  const problems = new ProblemList();
  const plain: SourceDocument[] = [];
  const manifests: SourceDocument[] = [];
  let skipped = 0;
  for (const src of docs) {
    if (src.error) problems.addConfigError(src, src.error, true);
    else if (src.kind === 'other' || src.kind === 'empty') skipped++;
    else if (src.kind === 'manifest') manifests.push(src);
    else plain.push(src);
  }
  const fromFiles = new Map<string, ServedDomain>();
  const fromManifests = new Map<string, ServedDomain>();
  plainSet(plain, opts, problems, fromFiles);
  manifestSet(manifests, problems, fromManifests);
  const domains = new Map(fromFiles);
  for (const [domain, served] of fromManifests) {
    const file = fromFiles.get(domain);
    if (file) {
      const src = served.origins[0]!.source;
      problems.add(
        src,
        `${src.fieldPrefix}domain`,
        `domain "${domain}" is also defined by the plain config file ${file.origins[0]?.source.file ?? ''}; a service loads files or xDS resources, not both (this one is left out of explain and diff)`,
        'warning',
      );
      continue;
    }
    domains.set(domain, served);
  }
  const sorted = [...problems.items].sort(
    (a, b) => (a.file < b.file ? -1 : a.file > b.file ? 1 : 0) || a.document - b.document || a.line - b.line,
  );
  return { problems: sorted, domains, documents: docs.length, skipped };
}

export function hasErrors(set: ConfigSet): boolean {
  return set.problems.some((p) => p.severity === 'error');
}

/** The service's compiled configuration of the served domains. */
export function compileSet(set: ConfigSet): RateLimitConfig {
  return compileConfig(
    [...set.domains.values()].map((d) => ({
      name: d.domain,
      document: { domain: d.domain, descriptors: d.descriptors },
    })),
  );
}

export { isObject };
