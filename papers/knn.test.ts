// The typed-array index against the naive baseline, and its edge cases.
import t from 'tap';
import { ExactIndex, mean, naiveSearch } from './knn.js';
import { rng } from './text.js';

const randomRows = (n: number, dim: number, seed: number) => {
  const r = rng(seed);
  return Array.from({ length: n }, () => Array.from({ length: dim }, () => r() * 2 - 1));
};

t.test('same neighbours as the naive scan (cosine and euclidean)', async (t) => {
  for (const [metric, dim] of [
    ['cosine', 64],
    ['euclidean', 2],
  ] as const) {
    const rows = randomRows(500, dim, 7);
    const index = new ExactIndex(rows, dim, metric);
    for (const [qi, q] of randomRows(20, dim, 9).entries()) {
      const fast = index.search(q, 10);
      const slow = naiveSearch(rows, q, 10, metric);
      t.same(
        fast.map((h) => h.index),
        slow.map((h) => h.index),
        `${metric} query ${qi}`,
      );
      fast.forEach((h, i) => t.ok(Math.abs(h.distance - slow[i].distance) < 1e-5));
    }
  }
});

t.test('exclusion, k larger than what is left, ties by index, empty k', async (t) => {
  const rows = [
    [1, 0],
    [1, 0],
    [0, 1],
    [1, 0],
  ];
  const index = new ExactIndex(rows, 2, 'cosine');
  t.same(
    index.search([1, 0], 10).map((h) => h.index),
    [0, 1, 3, 2],
  );
  t.same(
    index.search([1, 0], 10, new Set([1])).map((h) => h.index),
    [0, 3, 2],
  );
  t.same(index.search([1, 0], 0), []);
  t.throws(() => index.search([1, 0, 0], 1), /expected 2/);
  t.throws(() => new ExactIndex([[1, 2, 3]], 2, 'cosine'), /row 0 has 3 values/);
});

t.test('similarity in 0..1', async (t) => {
  const cos = new ExactIndex(
    [
      [1, 0],
      [-1, 0],
    ],
    2,
    'cosine',
  );
  t.same(
    cos.search([1, 0], 2).map((h) => cos.similarity(h.distance)),
    [1, 0],
  );
  const eu = new ExactIndex(
    [
      [0, 0],
      [3, 4],
    ],
    2,
    'euclidean',
  );
  t.equal(eu.extent, 5);
  t.same(
    eu.search([0, 0], 2).map((h) => eu.similarity(h.distance)),
    [1, 0],
  );
  t.same(
    Array.from(
      mean(
        [
          [1, 2],
          [3, 4],
        ],
        2,
      ),
    ),
    [2, 3],
  );
});
