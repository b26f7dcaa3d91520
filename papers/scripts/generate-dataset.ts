// Generates the shipped dataset papers/data/papers.jsonl: the seeded synthetic corpus (corpus.ts, with an extra
// `Topic` field the web page colours by) with
//  - glove_embedding: TF-IDF weighted mean of real GloVe 100-d vectors (trimmed vocabulary, IDF over this corpus),
//  - specter_embedding: the 768-d hashed stand-in for SPECTER (embed.ts, HashedEmbedder),
//  - glove_umap / specter_umap: 2-D UMAP layouts (umap-js, cosine distance, seeded, 10 neighbours, minDist 0.9, spread 1.5), rescaled
//    to [-10, 10] on the wider axis.
//
//   npx tsx papers/scripts/generate-dataset.ts [--seed 42] [--per-topic 30] [--out path]
import { writeFileSync } from 'node:fs';
import { UMAP } from 'umap-js';
import { GloveEmbedder, GloveVectors, HashedEmbedder } from '../embed.js';
import { DEFAULT_DATA } from '../paths.js';
import { rng } from '../text.js';
import { TOPICS, generateCorpus } from './corpus.js';

const arg = (name: string, dflt: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : dflt;
};
const seed = Number(arg('seed', '42'));
const perTopic = Number(arg('per-topic', '30'));
const outPath = arg('out', DEFAULT_DATA);

const corpus = generateCorpus(seed, perTopic);
const texts = corpus.map((p) => `${p.Title}. ${p.Abstract}`);
const glove = new GloveEmbedder(GloveVectors.load()).fit(texts);
const hashed = new HashedEmbedder(768);
const gloveVecs = texts.map((t) => Array.from(glove.embed(t)));
const specterVecs = corpus.map((p) => Array.from(hashed.embed(p.Title, p.Abstract)));

const cosineDistance = (a: number[], b: number[]) => {
  let d = 0;
  let x = 0;
  let y = 0;
  for (let i = 0; i < a.length; i++) {
    d += a[i] * b[i];
    x += a[i] * a[i];
    y += b[i] * b[i];
  }
  return 1 - d / (Math.sqrt(x * y) || 1);
};

function layout(vectors: number[][], s: number): [number, number][] {
  const umap = new UMAP({
    nComponents: 2,
    nNeighbors: 10,
    minDist: 0.9,
    spread: 1.5,
    random: rng(s),
    distanceFn: cosineDistance,
  });
  const pts = umap.fit(vectors);
  const mid = [0, 1].map((d) => (Math.max(...pts.map((p) => p[d])) + Math.min(...pts.map((p) => p[d]))) / 2);
  const half =
    Math.max(
      ...[0, 1].map((d) => (Math.max(...pts.map((p) => p[d])) - Math.min(...pts.map((p) => p[d]))) / 2),
    ) || 1;
  return pts.map((p) => [(p[0] - mid[0]) * (10 / half), (p[1] - mid[1]) * (10 / half)]);
}

const round = (v: number[], digits: number) => v.map((x) => Number(x.toFixed(digits)));
const gloveUmap = layout(gloveVecs, seed + 1);
const specterUmap = layout(specterVecs, seed + 2);

const lines = corpus.map((p, i) => {
  const { topic, ...rest } = p;
  return JSON.stringify({
    ...rest,
    Topic: TOPICS[topic].name,
    glove_embedding: round(gloveVecs[i], 5),
    specter_embedding: round(specterVecs[i], 4),
    glove_umap: round(gloveUmap[i], 3),
    specter_umap: round(specterUmap[i], 3),
  });
});
writeFileSync(outPath, lines.join('\n') + '\n');
console.log(`wrote ${corpus.length} papers to ${outPath}`);
