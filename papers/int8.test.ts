// Property tests of the int8 first pass: on generated data its answer must be the full float32 scan's, exactly
// (same rows, same order, same distances), for any query, `limit` and exclusions, ties included.
import t from 'tap';
import fc from 'fast-check';
import { Int8Index } from './int8.js';
import { ExactIndex } from './knn.js';
import { rng } from './text.js';

type Rows = number[][];

const gaussian = (r: () => number) => () =>
  Math.sqrt(-2 * Math.log(r() || 1e-12)) * Math.cos(2 * Math.PI * r());

/** Data sets of several shapes, from a seed. */
const shapes: Record<string, (seed: number, n: number, dim: number) => Rows> = {
  random: (seed, n, dim) => {
    const g = gaussian(rng(seed));
    return Array.from({ length: n }, () => Array.from({ length: dim }, g));
  },
  clustered: (seed, n, dim) => {
    const g = gaussian(rng(seed));
    const centres = Array.from({ length: 5 }, () => Array.from({ length: dim }, g));
    return Array.from({ length: n }, (_, i) => centres[i % 5].map((c) => c + 0.3 * g()));
  },
  // Few distinct values, duplicates and zero rows: many exact ties in the keys.
  ties: (seed, n, dim) => {
    const r = rng(seed);
    const base = Array.from({ length: Math.max(2, n >> 2) }, () =>
      Array.from({ length: dim }, () => Math.floor(r() * 3) - 1),
    );
    return Array.from({ length: n }, (_, i) => {
      const v = base[Math.floor(r() * base.length)];
      if (i % 7 === 3) return v.map(() => 0);
      return v.map((x) => x * (i % 3 === 0 ? 2.5 : 1));
    });
  },
  // One large coordinate per row: a coarse int8 scale for the rest (a loose bound).
  spiky: (seed, n, dim) => {
    const g = gaussian(rng(seed));
    return Array.from({ length: n }, (_, i) => {
      const v = Array.from({ length: dim }, g);
      v[i % dim] *= 40;
      return v;
    });
  },
};

const query = (rows: Rows, dim: number, r: () => number, kind: number): number[] => {
  const g = gaussian(r);
  const row = rows[Math.floor(r() * rows.length)];
  switch (kind) {
    case 0:
      return row.slice(); // a row itself: it and its duplicates tie at distance 0
    case 1:
      return row.map((x) => x + 0.05 * g()); // near a row
    case 2:
      return Array.from({ length: dim }, () => 0); // zero: every key is 1, order by index
    case 3: {
      const other = rows[Math.floor(r() * rows.length)];
      return row.map((x, d) => (x + other[d]) / 2); // the mean of two rows, as for two input papers
    }
    default:
      return Array.from({ length: dim }, g);
  }
};

t.test('int8 first pass + exact re-rank = full scan, on generated data', async (t) => {
  let checked = 0;
  fc.assert(
    fc.property(
      fc.record({
        shape: fc.constantFrom(...Object.keys(shapes)),
        seed: fc.integer({ min: 1, max: 2 ** 31 - 1 }),
        n: fc.integer({ min: 1, max: 300 }),
        dim: fc.constantFrom(1, 2, 3, 15, 16, 17, 64, 100, 768),
      }),
      ({ shape, seed, n, dim }) => {
        const rows = shapes[shape](seed, n, dim);
        const exact = new ExactIndex(rows, dim, 'cosine');
        // Never handing large k to the full scan, so the first pass is what is tested at every k.
        const fast = new Int8Index(exact, Infinity);
        const r = rng(seed ^ 0x5bd1e995);
        for (let j = 0; j < 12; j++) {
          const q = query(rows, dim, r, j % 5);
          // limit at its extremes (0, 1, all but one, all, more than all) and in between.
          const k = [0, 1, n - 1, n, n + 3, 1 + Math.floor(r() * n), 10][j % 7];
          const exclude =
            j % 3 === 0 ? undefined : new Set(Array.from({ length: j % 4 }, () => Math.floor(r() * n)));
          const want = exact.search(q, k, exclude);
          const got = fast.search(q, k, exclude);
          if (JSON.stringify(got) !== JSON.stringify(want))
            throw new Error(
              `${shape} seed=${seed} n=${n} dim=${dim} k=${k}: ${JSON.stringify(got)} != ${JSON.stringify(want)}`,
            );
          checked++;
        }
      },
    ),
    { numRuns: 150, seed: 20261125 },
  );
  t.ok(checked >= 150 * 12, `${checked} queries agree`);
});

t.test('known neighbours: planted rows at set angles are found in order', async (t) => {
  const dim = 768;
  const n = 5000;
  const g = gaussian(rng(3));
  const rows = Array.from({ length: n }, () => Array.from({ length: dim }, g));
  // q = e0 direction mixed into random rows; planted row p_j has cos(q, p_j) = 0.9 - 0.01 j (two at each angle).
  const q = Array.from({ length: dim }, g);
  const qn = Math.hypot(...q);
  const planted: number[] = [];
  for (let j = 0; j < 20; j++) {
    const at = 97 + j * 211;
    const noise = rows[at];
    // Remove the q component of the noise, then mix: cos = c exactly (up to rounding).
    const dotqn = noise.reduce((s, x, d) => s + x * q[d], 0) / qn;
    const perp = noise.map((x, d) => x - (dotqn * q[d]) / qn);
    const pn = Math.hypot(...perp);
    const c = 0.9 - 0.01 * Math.floor(j / 2);
    rows[at] = q.map((x, d) => (c * x) / qn + (Math.sqrt(1 - c * c) * perp[d]) / pn);
    planted.push(at);
  }
  const exact = new ExactIndex(rows, dim, 'cosine');
  const fast = new Int8Index(exact);
  const got = fast.search(q, 20);
  t.same(new Set(got.map((h) => h.index)), new Set(planted), 'the 20 planted rows are the 20 nearest');
  t.same(got, exact.search(q, 20), 'identical to the full scan, distances included');
  t.ok(fast.lastCandidates < n / 10, `few rows re-scored (${fast.lastCandidates} of ${n})`);
  // Pairs at the same angle come out in index order when their distances are equal.
  for (let i = 1; i < got.length; i++)
    t.ok(
      got[i - 1].distance < got[i].distance ||
        (got[i - 1].distance === got[i].distance && got[i - 1].index < got[i].index),
      'nearest first, ties by index',
    );
});

t.test('input checks are the full scan', async (t) => {
  const exact = new ExactIndex(
    [
      [1, 0],
      [1, 0],
      [0, 1],
    ],
    2,
    'cosine',
  );
  const fast = new Int8Index(exact);
  t.throws(() => fast.search([1, 0, 0], 1), /expected 2/);
  t.same(fast.search([1, 0], 0), []);
  t.same(
    fast.search([1, 0], 10, new Set([0])).map((h) => h.index),
    [1, 2],
  );
  t.throws(() => new Int8Index(new ExactIndex([[1, 2]], 2, 'euclidean')), /cosine/);
});

t.test('a large k goes to the full scan, with the same answer', async (t) => {
  const rows = shapes.clustered(5, 400, 32);
  const exact = new ExactIndex(rows, 32, 'cosine');
  const fast = new Int8Index(exact);
  t.same(fast.search(rows[7], 99), exact.search(rows[7], 99));
  t.ok(fast.lastCandidates < 400, 'k below a quarter of the rows: first pass');
  t.same(fast.search(rows[7], 100), exact.search(rows[7], 100));
  t.equal(fast.lastCandidates, 400, 'k at a quarter of the rows: full scan');
});
