// Loading: JSON, JSON Lines and HTTP sources, completing records, the startup log, and the shipped dataset.
import t from 'tap';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import Fastify from 'fastify';
import { loadStore, normalizeRecords, parseRecords } from './data.js';
import { GloveVectors } from './embed.js';
import { DEFAULT_DATA } from './paths.js';
import { fixtureRecords } from './fixtures.js';

const dir = mkdtempSync(join(tmpdir(), 'papers-data-'));
const logger = () => {
  const lines: { level: string; msg: string; obj: any }[] = [];
  return {
    lines,
    info: (obj: object, msg: string) => lines.push({ level: 'info', msg, obj }),
    warn: (obj: object, msg: string) => lines.push({ level: 'warn', msg, obj }),
  };
};

t.test(
  'JSON array, JSON Lines and HTTP give the same store and log the three startup messages',
  async (t) => {
    const recs = fixtureRecords();
    const json = join(dir, 'p.json');
    const jsonl = join(dir, 'p.jsonl');
    writeFileSync(json, JSON.stringify(recs));
    writeFileSync(jsonl, recs.map((r) => JSON.stringify(r)).join('\n') + '\n\n');
    const srv = Fastify();
    srv.get('/papers.jsonl', async (_req, reply) =>
      reply.type('application/x-ndjson').send(recs.map((r) => JSON.stringify(r)).join('\n')),
    );
    srv.get('/missing', async (_req, reply) => reply.code(404).send());
    await srv.listen({ port: 0, host: '127.0.0.1' });
    t.teardown(() => srv.close());
    const base = `http://127.0.0.1:${(srv.server.address() as AddressInfo).port}`;
    for (const src of [json, jsonl, `${base}/papers.jsonl`]) {
      const log = logger();
      const s = await loadStore(src, log);
      t.equal(s.papers.length, 6, src);
      t.same(
        log.lines.map((l) => l.msg),
        ['data loaded', 'index created for glove', 'index created for specter'],
        src,
      );
      t.same(
        s.index.glove.nD
          .search(s.papers[0].glove_embedding, 2, new Set([0]))
          .map((h) => s.papers[h.index].ID),
        ['P2', 'P5'],
      );
    }
    await t.rejects(loadStore(`${base}/missing`), /answered 404/);
    await t.rejects(loadStore(join(dir, 'nope.json')), /ENOENT/);
  },
);

t.test('bad data is rejected with the record named', async (t) => {
  t.throws(() => parseRecords('{"ID":1}\n{oops\n', 'f.jsonl'), /f\.jsonl: line 2 is not valid JSON/);
  t.throws(() => parseRecords('{"a":1}', 'f.json') && parseRecords('[1', 'x'), /JSON/);
  const g = () => GloveVectors.load();
  t.throws(
    () =>
      normalizeRecords(
        [
          { ID: 'a', Title: 'x' },
          { ID: 'a', Title: 'y' },
        ],
        g,
      ),
    /record 2: duplicate ID a/,
  );
  t.throws(() => normalizeRecords([{ Title: 'x' }], g), /record 1 has no ID/);
  t.throws(() => normalizeRecords([{ ID: 'a' }], g), /record 1 \(a\) has no Title/);
  t.throws(() => normalizeRecords([7], g), /record 1 is not an object/);
  const recs = fixtureRecords();
  recs[2].glove_embedding = [1, 2];
  t.throws(() => normalizeRecords(recs, g), /P3: glove_embedding has 2 values, expected 3/);
});

t.test('records without vectors or 2-D points are completed', async (t) => {
  const log = logger();
  const papers = normalizeRecords(
    [
      {
        ID: 1,
        Title: 'Protein folding with amino acid contacts',
        Abstract: 'We predict protein structure.',
        Keywords: 'proteins; folding',
        Authors: 'A, B',
      },
      {
        ID: 2,
        Title: 'Protein structure prediction',
        Abstract: 'Amino acid sequences determine folding.',
        Year: '2019',
      },
      {
        ID: 3,
        Title: 'Query optimization in databases',
        Abstract: 'Cost-based optimizers choose join orders.',
      },
    ],
    () => GloveVectors.load(),
    log,
  );
  t.same(papers[0].Keywords, ['proteins', 'folding']);
  t.same(papers[0].Authors, ['A', 'B']);
  t.equal(papers[0].ID, '1');
  t.equal(papers[1].Year, 2019);
  t.equal(papers[2].Year, null);
  t.equal(papers[0].glove_embedding.length, 100);
  t.equal(papers[0].specter_embedding.length, 768);
  t.equal(papers[0].glove_umap.length, 2);
  t.same(
    log.lines.filter((l) => l.level === 'warn').map((l) => l.msg),
    [
      'computed missing glove vectors',
      '2-D points missing for glove: projecting all glove vectors with PCA',
      'computed missing specter vectors',
      '2-D points missing for specter: projecting all specter vectors with PCA',
    ],
  );
  const cos = (a: number[], b: number[]) =>
    a.reduce((s, x, i) => s + x * b[i], 0) / Math.hypot(...a) / Math.hypot(...b);
  for (const k of ['glove_embedding', 'specter_embedding'] as const)
    t.ok(
      cos(papers[0][k], papers[1][k]) > cos(papers[0][k], papers[2][k]),
      `${k}: the two protein papers are closer`,
    );
});

t.test('the shipped dataset: 300 papers whose nearest neighbours share the topic', async (t) => {
  const s = await loadStore(DEFAULT_DATA);
  t.equal(s.papers.length, 300);
  t.equal(new Set(s.papers.map((p) => p.Topic)).size, 10);
  t.equal(s.papers[0].glove_embedding.length, 100);
  t.equal(s.papers[0].specter_embedding.length, 768);
  for (const kind of ['glove', 'specter'] as const)
    for (const dims of ['nD', '2D'] as const) {
      let same = 0;
      s.papers.forEach((p, i) => {
        const q = dims === 'nD' ? p[`${kind}_embedding`] : p[`${kind}_umap`];
        for (const h of s.index[kind][dims].search(q, 5, new Set([i])))
          if (s.papers[h.index].Topic === p.Topic) same++;
      });
      t.ok(
        same / 1500 > 0.95,
        `${kind} ${dims}: ${((100 * same) / 1500).toFixed(1)}% of 5-NN share the topic`,
      );
    }
});
