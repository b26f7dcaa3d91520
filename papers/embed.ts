// Text embedders.
//  - glove: real GloVe 6B 100-d word vectors (public domain, PDDL), trimmed to the vocabulary in
//    data/glove-100d.* by scripts/build-glove-vocab.ts, averaged with TF-IDF weights over title + abstract.
//  - specter stand-in: the SPECTER model can't be loaded here, so new abstracts are embedded by a documented,
//    deterministic hashed random-projection embedder of the same dimension (768); or, when SPECTER_URL is set,
//    by a remote embedding endpoint.
import { readFileSync } from 'node:fs';
import { contentWords, fnv1a, rng } from './text.js';
import { GLOVE_VECTORS, GLOVE_WORDS } from './paths.js';

export const GLOVE_DIM = 100;
export const SPECTER_DIM = 768;

export class GloveVectors {
  readonly index = new Map<string, number>();
  constructor(
    readonly words: string[],
    readonly data: Float32Array,
    readonly dim: number,
  ) {
    words.forEach((w, i) => this.index.set(w, i));
  }

  get(word: string): Float32Array | undefined {
    const i = this.index.get(word);
    return i === undefined ? undefined : this.data.subarray(i * this.dim, (i + 1) * this.dim);
  }

  /**
   * Reads the trimmed vocabulary: a text file of `word<TAB>scale` lines and a little-endian int16 file with
   * `dim` values per word; value = int16 * scale / 32767.
   */
  static load(wordsPath = GLOVE_WORDS, vectorsPath = GLOVE_VECTORS, dim = GLOVE_DIM): GloveVectors {
    const lines = readFileSync(wordsPath, 'utf8').split('\n').filter(Boolean);
    const raw = readFileSync(vectorsPath);
    if (raw.length !== lines.length * dim * 2)
      throw new Error(`glove: ${vectorsPath} does not match ${wordsPath}`);
    const data = new Float32Array(lines.length * dim);
    const words: string[] = [];
    lines.forEach((line, i) => {
      const [w, s] = line.split('\t');
      words.push(w);
      const scale = Number(s) / 32767;
      for (let d = 0; d < dim; d++) data[i * dim + d] = raw.readInt16LE((i * dim + d) * 2) * scale;
    });
    return new GloveVectors(words, data, dim);
  }
}

/** TF-IDF weighted mean of GloVe word vectors. IDF comes from the corpus given to fit(). */
export class GloveEmbedder {
  private df = new Map<string, number>();
  private n = 0;
  constructor(readonly glove: GloveVectors) {}

  fit(texts: Iterable<string>): this {
    this.df.clear();
    this.n = 0;
    for (const t of texts) {
      this.n++;
      for (const w of new Set(contentWords(t))) this.df.set(w, (this.df.get(w) ?? 0) + 1);
    }
    return this;
  }

  /** Smoothed IDF, as in scikit-learn: ln((1 + n) / (1 + df)) + 1. */
  idf(word: string): number {
    return Math.log((1 + this.n) / (1 + (this.df.get(word) ?? 0))) + 1;
  }

  embed(text: string): Float32Array {
    const dim = this.glove.dim;
    const tf = new Map<string, number>();
    for (const w of contentWords(text)) tf.set(w, (tf.get(w) ?? 0) + 1);
    const out = new Float32Array(dim);
    let total = 0;
    for (const [w, c] of tf) {
      const v = this.glove.get(w);
      if (!v) continue;
      const weight = c * this.idf(w);
      for (let d = 0; d < dim; d++) out[d] += weight * v[d];
      total += weight;
    }
    if (total > 0) for (let d = 0; d < dim; d++) out[d] /= total;
    return out;
  }
}

/**
 * SPECTER stand-in ("hashed random projection", 768-d). Features are the content words and adjacent
 * content-word bigrams of `title + abstract`, title words counted twice. Each feature f gets a fixed
 * pseudo-random Gaussian direction g_f (seeded by FNV-1a of f), the document vector is
 * sum_f (1 + ln tf_f) * w_f * g_f (w = 1 for words, 0.5 for bigrams), L2-normalised. By Johnson-Lindenstrauss,
 * cosine between two such vectors approximates the cosine of their weighted bag-of-features, so it captures
 * lexical, not semantic, similarity. It needs no corpus and no download, and gives the same vector for the same
 * text everywhere, so vectors precomputed into the dataset and query vectors agree.
 */
export class HashedEmbedder {
  private cache = new Map<string, Float32Array>();
  constructor(readonly dim = SPECTER_DIM) {}

  private direction(feature: string): Float32Array {
    let v = this.cache.get(feature);
    if (v) return v;
    const r = rng(fnv1a(feature));
    v = new Float32Array(this.dim);
    for (let d = 0; d < this.dim; d += 2) {
      // Box-Muller: two standard normals per pair of uniforms.
      const u1 = r() || 1e-12;
      const u2 = r();
      const m = Math.sqrt(-2 * Math.log(u1));
      v[d] = m * Math.cos(2 * Math.PI * u2);
      if (d + 1 < this.dim) v[d + 1] = m * Math.sin(2 * Math.PI * u2);
    }
    if (this.cache.size > 100_000) this.cache.clear();
    this.cache.set(feature, v);
    return v;
  }

  embed(title: string, abstract: string): Float32Array {
    const counts = new Map<string, number>();
    const add = (ws: string[], times: number) => {
      for (let i = 0; i < ws.length; i++) {
        counts.set(ws[i], (counts.get(ws[i]) ?? 0) + times);
        if (i + 1 < ws.length) {
          const bg = `${ws[i]} ${ws[i + 1]}`;
          counts.set(bg, (counts.get(bg) ?? 0) + times);
        }
      }
    };
    add(contentWords(title), 2);
    add(contentWords(abstract), 1);
    const out = new Float32Array(this.dim);
    for (const [f, c] of counts) {
      const w = (1 + Math.log(c)) * (f.includes(' ') ? 0.5 : 1);
      const g = this.direction(f);
      for (let d = 0; d < this.dim; d++) out[d] += w * g[d];
    }
    return normalize(out);
  }
}

export function normalize(v: Float32Array): Float32Array {
  let s = 0;
  for (let i = 0; i < v.length; i++) s += v[i] * v[i];
  if (s > 0) {
    const k = 1 / Math.sqrt(s);
    for (let i = 0; i < v.length; i++) v[i] *= k;
  }
  return v;
}

export interface AbstractEmbedder {
  readonly name: string;
  embed(title: string, abstract: string): Promise<Float32Array>;
}

export function localSpecter(): AbstractEmbedder {
  const h = new HashedEmbedder(SPECTER_DIM);
  return { name: 'local hashed stand-in (768-d)', embed: async (t, a) => h.embed(t, a) };
}

/**
 * Remote embedder, as the original service used a hosted SPECTER: POST {"title", "abstract"} as JSON to `url`;
 * the reply is {"embedding": number[]} (or a bare array) of length `dim`.
 */
export function remoteSpecter(url: string, dim = SPECTER_DIM, timeoutMs = 10_000): AbstractEmbedder {
  return {
    name: `remote ${url}`,
    async embed(title, abstract) {
      const res = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ title, abstract }),
        signal: AbortSignal.timeout(timeoutMs),
      });
      if (!res.ok) throw new Error(`embedding endpoint answered ${res.status}`);
      const body = (await res.json()) as unknown;
      const arr = Array.isArray(body) ? body : (body as { embedding?: unknown })?.embedding;
      if (!Array.isArray(arr) || arr.length !== dim || !arr.every((x) => typeof x === 'number'))
        throw new Error(`embedding endpoint did not return ${dim} numbers`);
      return Float32Array.from(arr as number[]);
    },
  };
}
