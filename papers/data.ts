// Loading papers from a JSON or JSON Lines file or an HTTP(S) URL, and the in-memory store with one exact index
// per embedding kind and dimensionality.
import { readFile } from 'node:fs/promises';
import { GloveEmbedder, GloveVectors, HashedEmbedder, SPECTER_DIM } from './embed.js';
import { ExactIndex, type Hit } from './knn.js';
import { pca2 } from './pca.js';
import { Searcher } from './searcher.js';
import { normTitle } from './text.js';

export const EMBEDDINGS = ['glove', 'specter'] as const;
export type Embedding = (typeof EMBEDDINGS)[number];
export type Dimensions = '2D' | 'nD';

export interface Paper {
  ID: string;
  Title: string;
  Authors: string[];
  Source: string;
  Year: number | null;
  Abstract: string;
  Keywords: string[];
  CitationCounts: number;
  glove_embedding: number[];
  specter_embedding: number[];
  glove_umap: [number, number];
  specter_umap: [number, number];
  [extra: string]: unknown;
}

interface Log {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

/** Reads the raw records: a JSON array, or JSON Lines (one object per line). */
export async function readRecords(source: string): Promise<unknown[]> {
  let text: string;
  if (/^https?:\/\//i.test(source)) {
    const res = await fetch(source, { signal: AbortSignal.timeout(300_000) });
    if (!res.ok) throw new Error(`GET ${source} answered ${res.status}`);
    text = await res.text();
  } else {
    text = await readFile(source, 'utf8');
  }
  return parseRecords(text, source);
}

export function parseRecords(text: string, source = 'data'): unknown[] {
  const t = text.trimStart();
  if (t.startsWith('[')) {
    const v = JSON.parse(t) as unknown;
    if (!Array.isArray(v)) throw new Error(`${source}: expected a JSON array`);
    return v;
  }
  const out: unknown[] = [];
  text.split('\n').forEach((line, i) => {
    if (!line.trim()) return;
    try {
      out.push(JSON.parse(line));
    } catch (e) {
      throw new Error(`${source}: line ${i + 1} is not valid JSON (${(e as Error).message})`, { cause: e });
    }
  });
  return out;
}

const strList = (v: unknown): string[] =>
  Array.isArray(v)
    ? v.map(String)
    : typeof v === 'string' && v
      ? v
          .split(/[;,]/)
          .map((s) => s.trim())
          .filter(Boolean)
      : [];

const numList = (v: unknown): number[] | undefined =>
  Array.isArray(v) && v.length > 0 && v.every((x) => typeof x === 'number' && Number.isFinite(x))
    ? (v as number[])
    : undefined;

/**
 * Validates and completes records. Missing full vectors are computed (glove: TF-IDF GloVe over this corpus;
 * specter: the hashed stand-in); missing 2-D points are a PCA of the full vectors.
 */
export function normalizeRecords(raw: unknown[], glove: () => GloveVectors, log?: Log): Paper[] {
  const seen = new Set<string>();
  const papers = raw.map((r, i) => {
    if (!r || typeof r !== 'object' || Array.isArray(r)) throw new Error(`record ${i + 1} is not an object`);
    const o = r as Record<string, unknown>;
    if ((typeof o.ID !== 'string' && typeof o.ID !== 'number') || String(o.ID) === '')
      throw new Error(`record ${i + 1} has no ID`);
    const ID = String(o.ID);
    if (seen.has(ID)) throw new Error(`record ${i + 1}: duplicate ID ${ID}`);
    seen.add(ID);
    if (typeof o.Title !== 'string' || !o.Title.trim())
      throw new Error(`record ${i + 1} (${ID}) has no Title`);
    const year = Number(o.Year);
    return {
      ...o,
      ID,
      Title: o.Title,
      Authors: strList(o.Authors),
      Source: typeof o.Source === 'string' ? o.Source : '',
      Year: o.Year === undefined || o.Year === null || !Number.isFinite(year) ? null : year,
      Abstract: typeof o.Abstract === 'string' ? o.Abstract : '',
      Keywords: strList(o.Keywords),
      CitationCounts: Number.isFinite(Number(o.CitationCounts)) ? Number(o.CitationCounts) : 0,
    } as Paper;
  });

  let gloveEmbedder: GloveEmbedder | undefined;
  let hashed: HashedEmbedder | undefined;
  for (const kind of EMBEDDINGS) {
    const key = `${kind}_embedding` as const;
    let missing = 0;
    for (const p of papers) {
      if (numList(p[key])) continue;
      missing++;
      const text = `${p.Title}. ${p.Abstract}`;
      if (kind === 'glove') {
        gloveEmbedder ??= new GloveEmbedder(glove()).fit(papers.map((q) => `${q.Title}. ${q.Abstract}`));
        p[key] = Array.from(gloveEmbedder.embed(text));
      } else {
        hashed ??= new HashedEmbedder(SPECTER_DIM);
        p[key] = Array.from(hashed.embed(p.Title, p.Abstract));
      }
    }
    if (missing) log?.warn({ kind, missing }, `computed missing ${kind} vectors`);
    const dim = papers[0]?.[key].length ?? 0;
    papers.forEach((p) => {
      if (p[key].length !== dim)
        throw new Error(`${p.ID}: ${key} has ${p[key].length} values, expected ${dim}`);
    });
    const umap = `${kind}_umap` as const;
    const ok = (v: unknown) => Array.isArray(v) && v.length === 2 && v.every((x) => Number.isFinite(x));
    if (papers.some((p) => !ok(p[umap]))) {
      log?.warn({ kind }, `2-D points missing for ${kind}: projecting all ${kind} vectors with PCA`);
      const pts = pca2(
        papers.map((p) => p[key]),
        dim,
      );
      papers.forEach((p, i) => (p[umap] = pts[i]));
    }
  }
  return papers;
}

export class Store {
  readonly byId = new Map<string, number>();
  readonly byTitle = new Map<string, number>();
  readonly byKeyword = new Map<string, number[]>();
  readonly index = {} as Record<Embedding, Record<Dimensions, ExactIndex>>;
  /** Runs the searches: in a worker thread once `searcher.start()` has succeeded, else in this thread. */
  readonly searcher: Searcher;

  constructor(
    readonly papers: Paper[],
    log?: Log,
  ) {
    papers.forEach((p, i) => {
      this.byId.set(p.ID, i);
      const t = normTitle(p.Title);
      if (!this.byTitle.has(t)) this.byTitle.set(t, i);
      for (const k of new Set(p.Keywords.map(normTitle))) {
        const list = this.byKeyword.get(k);
        if (list) list.push(i);
        else this.byKeyword.set(k, [i]);
      }
    });
    for (const kind of EMBEDDINGS) {
      const full = papers.map((p) => p[`${kind}_embedding`]);
      const flat = papers.map((p) => p[`${kind}_umap`]);
      this.index[kind] = {
        nD: new ExactIndex(full, full[0]?.length ?? 1, 'cosine'),
        '2D': new ExactIndex(flat, 2, 'euclidean'),
      };
      log?.info(
        { kind, papers: papers.length, dimensions: full[0]?.length ?? 0 },
        `index created for ${kind}`,
      );
    }
    this.searcher = new Searcher(
      new Map(EMBEDDINGS.flatMap((k) => (['nD', '2D'] as const).map((d) => [`${k}/${d}`, this.index[k][d]]))),
    );
  }

  /** The k nearest papers to `query` in one index, without `exclude`: the index's exact answer. */
  search(
    kind: Embedding,
    dims: Dimensions,
    query: ArrayLike<number>,
    k: number,
    exclude?: number[],
  ): Promise<Hit[]> {
    return this.searcher.search(`${kind}/${dims}`, query, k, exclude);
  }

  /** Resolves IDs or titles to paper indices (in input order, without repeats) and lists the unmatched ones. */
  resolve(items: string[], type: 'ID' | 'Title'): { found: number[]; notFound: string[] } {
    const found: number[] = [];
    const notFound: string[] = [];
    for (const item of items) {
      const i = type === 'ID' ? this.byId.get(item.trim()) : this.byTitle.get(normTitle(item));
      if (i === undefined) notFound.push(item);
      else if (!found.includes(i)) found.push(i);
    }
    return { found, notFound };
  }
}

/** Loads, completes and indexes the papers, logging the three startup messages. */
export async function loadStore(
  source: string,
  log?: Log,
  glove = () => GloveVectors.load(),
): Promise<Store> {
  const papers = normalizeRecords(await readRecords(source), glove, log);
  if (papers.length === 0) throw new Error(`${source}: no papers`);
  log?.info({ papers: papers.length, source }, 'data loaded');
  return new Store(papers, log);
}
