// The embedders: real GloVe vectors with TF-IDF weights, and the deterministic SPECTER stand-in.
import t from 'tap';
import { GloveEmbedder, GloveVectors, HashedEmbedder, SPECTER_DIM } from './embed.js';
import { contentWords } from './text.js';

const cos = (a: ArrayLike<number>, b: ArrayLike<number>) => {
  let d = 0;
  let x = 0;
  let y = 0;
  for (let i = 0; i < a.length; i++) {
    d += a[i] * b[i];
    x += a[i] * a[i];
    y += b[i] * b[i];
  }
  return d / Math.sqrt(x * y);
};

const glove = GloveVectors.load();

t.test('the trimmed vocabulary holds real GloVe 6B 100-d vectors', async (t) => {
  t.ok(glove.words.length > 3000 && glove.words.length < 6000, `${glove.words.length} words`);
  t.equal(glove.dim, 100);
  // First values of "the" in glove.6B.100d.txt: -0.038194 -0.24487 0.72812.
  const the = glove.get('the')!;
  t.ok(Math.abs(the[0] - -0.038194) < 1e-4 && Math.abs(the[2] - 0.72812) < 1e-4);
  t.ok(cos(glove.get('protein')!, glove.get('amino')!) > cos(glove.get('protein')!, glove.get('query')!));
  t.ok(cos(glove.get('quantum')!, glove.get('physics')!) > cos(glove.get('quantum')!, glove.get('malware')!));
});

t.test('TF-IDF weighted mean', async (t) => {
  const e = new GloveEmbedder(glove).fit(['protein sequences', 'protein structure', 'protein network']);
  t.ok(e.idf('sequences') > e.idf('protein'), 'rarer words weigh more');
  const v = e.embed('protein sequences');
  const wp = e.idf('protein');
  const wf = e.idf('sequences');
  const p = glove.get('protein')!;
  const f = glove.get('sequences')!;
  for (const d of [0, 50, 99]) t.ok(Math.abs(v[d] - (wp * p[d] + wf * f[d]) / (wp + wf)) < 1e-6);
  t.same(
    Array.from(e.embed('the of and zzzunknownzzz')),
    new Array(100).fill(0),
    'no known content word: zero',
  );
  const a = e.embed('protein structure of amino acid sequences');
  t.ok(cos(a, e.embed('amino acid contacts')) > cos(a, e.embed('database query optimizer')));
});

t.test('SPECTER stand-in: 768-d, unit length, deterministic, lexical similarity', async (t) => {
  const h = new HashedEmbedder();
  const a = h.embed('Byzantine consensus', 'Replicated state machines tolerate faulty replicas.');
  t.equal(a.length, SPECTER_DIM);
  t.ok(Math.abs(Math.hypot(...a) - 1) < 1e-5);
  t.same(
    Array.from(
      new HashedEmbedder().embed(
        'Byzantine consensus',
        'Replicated state machines tolerate faulty replicas.',
      ),
    ),
    Array.from(a),
  );
  const near = h.embed('Fast consensus', 'State machines replicated across faulty replicas.');
  const far = h.embed('Protein folding', 'Amino acid contacts predict structure.');
  t.ok(cos(a, near) > 0.4, `related ${cos(a, near).toFixed(3)}`);
  t.ok(Math.abs(cos(a, far)) < 0.15, `unrelated ${cos(a, far).toFixed(3)}`);
  t.same(contentWords('The Graph-Neural networks, of 2020!'), ['graph', 'neural', 'networks', '2020']);
});
