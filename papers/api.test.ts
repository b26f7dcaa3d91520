// Every endpoint and every error, through real HTTP on a loopback port, against the six-paper fixture whose
// nearest neighbours are known (fixtures.ts).
import t from 'tap';
import Fastify from 'fastify';
import type { AddressInfo } from 'node:net';
import { fixtureEmbedder, fixtureStore, post, ready, startApp } from './fixtures.js';
import { remoteSpecter } from './embed.js';
import type { Store } from './data.js';

const ids = (body: any) => body.results.map((r: any) => r.ID);

t.test('while loading: API answers 503 with Retry-After, page and health answer', async (t) => {
  let release!: (s: Store) => void;
  const svc = await startApp({ load: () => new Promise<Store>((r) => (release = r)) });
  t.teardown(svc.close);
  const g = await fetch(`${svc.url}/getPapers`);
  t.equal(g.status, 503);
  t.equal(g.headers.get('retry-after'), '5');
  t.match(await g.json(), {
    statusCode: 503,
    error: 'Service Unavailable',
    message: /loading/,
    state: 'loading',
  });
  for (const path of [
    '/getSimilarPapers',
    '/getSimilarPapersByKeyword',
    '/getSimilarPapersByAbstract',
    '/checkoutPapers',
  ]) {
    // Even an invalid body gets 503: nothing is validated before the data is there.
    t.equal((await post(`${svc.url}${path}`, {})).status, 503, path);
  }
  t.same(await (await fetch(`${svc.url}/health`)).json(), { state: 'loading', papers: 0 });
  const page = await fetch(`${svc.url}/`);
  t.equal(page.status, 200);
  t.match(await page.text(), /Paper similarity map/);
  release(fixtureStore());
  await ready(svc.url);
  t.equal((await fetch(`${svc.url}/getPapers`)).status, 200);
});

t.test('failed load: 503 naming the failure', async (t) => {
  let failed: Error | undefined;
  const svc = await startApp({
    load: async () => {
      throw new Error('no such file: /nope.jsonl');
    },
    onLoadError: (e) => (failed = e),
  });
  t.teardown(svc.close);
  await new Promise((r) => setTimeout(r, 20));
  t.equal(failed?.message, 'no such file: /nope.jsonl');
  const r = await fetch(`${svc.url}/getPapers`);
  t.equal(r.status, 503);
  t.match(await r.json(), { message: 'loading failed: no such file: /nope.jsonl', state: 'failed' });
  t.match(await (await fetch(`${svc.url}/health`)).json(), { state: 'failed', failure: /nope/ });
});

t.test('endpoints on the fixture', async (t) => {
  const svc = await startApp({
    embedder: fixtureEmbedder({ 'like P1': [1, 0, 0], 'like P6': [0.1, 0, 0.9] }),
  });
  t.teardown(svc.close);
  await ready(svc.url);
  const u = svc.url;

  t.test('GET /getPapers: all papers, full vectors only on request', async (t) => {
    const r = (await (await fetch(`${u}/getPapers`)).json()) as any;
    t.equal(r.count, 6);
    t.same(
      r.papers.map((p: any) => p.ID),
      ['P1', 'P2', 'P3', 'P4', 'P5', 'P6'],
    );
    t.same(r.papers[0].glove_umap, [0, 0]);
    t.notOk('glove_embedding' in r.papers[0]);
    t.notOk('specter_embedding' in r.papers[0]);
    const full = (await (await fetch(`${u}/getPapers?embeddings=true`)).json()) as any;
    t.same(full.papers[1].glove_embedding, [0.9, 0.1, 0]);
    t.same(full.papers[1].specter_embedding, [0, 1, 0]);
    const bad = await fetch(`${u}/getPapers?embeddings=maybe`);
    t.equal(bad.status, 400);
    t.match(await bad.json(), { message: 'querystring.embeddings must be one of: true, false' });
  });

  t.test('POST /getSimilarPapers ranks by the chosen embedding and dimensions', async (t) => {
    const q = (extra: object) =>
      post(`${u}/getSimilarPapers`, { input_data: ['P1'], input_type: 'ID', limit: 5, ...extra });
    const gl = await q({ embedding: 'glove', dimensions: 'nD' });
    t.equal(gl.status, 200);
    t.same(ids(gl.body), ['P2', 'P5', 'P3', 'P4', 'P6']);
    t.same(
      gl.body.results.map((r: any) => r.rank),
      [1, 2, 3, 4, 5],
    );
    const p2 = gl.body.results[0];
    const cos = 0.9 / Math.hypot(0.9, 0.1);
    t.ok(Math.abs(p2.distance - (1 - cos)) < 1e-6, 'cosine distance');
    t.ok(Math.abs(p2.similarity - (1 + cos) / 2) < 1e-6, 'similarity (1 + cos) / 2');
    t.equal(gl.body.results[2].similarity, 0.5, 'orthogonal vectors score 0.5');
    t.same(gl.body.not_found, []);
    t.equal(gl.body.count, 5);
    t.notOk('glove_embedding' in p2);

    const sp = await q({ embedding: 'specter', dimensions: 'nD' });
    t.same(ids(sp.body), ['P3', 'P6', 'P2', 'P4', 'P5']);

    const flat = await q({ embedding: 'glove', dimensions: '2D' });
    t.same(ids(flat.body), ['P3', 'P5', 'P4', 'P2', 'P6']);
    t.equal(flat.body.results[0].distance, 1);
    t.equal(flat.body.results[0].similarity, 1 - 1 / 25, '1 - distance / bounding-box diagonal');

    const dflt = await post(`${u}/getSimilarPapers`, { input_data: ['P1'], input_type: 'ID', limit: 1 });
    t.same(ids(dflt.body), ['P3'], 'defaults: specter, nD');
  });

  t.test(
    'several inputs: mean vector, inputs excluded, titles matched loosely, unmatched listed',
    async (t) => {
      const r = await post(`${u}/getSimilarPapers`, {
        input_data: [
          '  graph neural networks FOR molecules ',
          'Message Passing on Molecular Graphs',
          'No Such Paper',
        ],
        input_type: 'Title',
        limit: 5,
        embedding: 'glove',
        dimensions: 'nD',
      });
      t.equal(r.status, 200);
      t.same(ids(r.body), ['P5', 'P3', 'P4', 'P6'], 'only 4 papers are left once the 2 inputs are excluded');
      t.same(r.body.not_found, ['No Such Paper']);
      const byId = await post(`${u}/getSimilarPapers`, {
        input_data: ['P1', 'P2', 'P1', 'X9'],
        input_type: 'ID',
        limit: 2,
        embedding: 'glove',
      });
      t.same(ids(byId.body), ['P5', 'P3']);
      t.same(byId.body.not_found, ['X9']);
    },
  );

  t.test('POST /getSimilarPapers errors', async (t) => {
    const base = { input_data: ['P1'], input_type: 'ID', limit: 2, embedding: 'glove', dimensions: 'nD' };
    const cases: [string, unknown, number, RegExp][] = [
      [
        'unknown input_type',
        { ...base, input_type: 'DOI' },
        400,
        /^body\.input_type must be one of: Title, ID$/,
      ],
      [
        'unknown embedding',
        { ...base, embedding: 'bert' },
        400,
        /^body\.embedding must be one of: glove, specter$/,
      ],
      ['unknown dimensions', { ...base, dimensions: '3D' }, 400, /^body\.dimensions must be one of: 2D, nD$/],
      ['missing input_data', { ...base, input_data: undefined }, 400, /^body\.input_data is required$/],
      [
        'empty input_data',
        { ...base, input_data: [] },
        400,
        /^body\.input_data must NOT have fewer than 1 items$/,
      ],
      ['input_data not strings', { ...base, input_data: [1] }, 400, /^body\.input_data\.0 must be string$/],
      ['limit as a string', { ...base, limit: '2' }, 400, /^body\.limit must be integer$/],
      ['limit 0', { ...base, limit: 0 }, 400, /^body\.limit must be >= 1$/],
      [
        'limit = number of papers',
        { ...base, limit: 6 },
        400,
        /^body\.limit must be less than the number of papers \(6\)$/,
      ],
      ['unknown field', { ...base, top_k: 3 }, 400, /^body\.top_k is not an allowed field$/],
      ['nothing matches', { ...base, input_data: ['X1', 'X2'] }, 404, /no paper matches/],
    ];
    for (const [name, body, status, message] of cases) {
      const r = await post(`${u}/getSimilarPapers`, body);
      t.equal(r.status, status, name);
      t.match(r.body.message, message, name);
    }
    const nf = await post(`${u}/getSimilarPapers`, { ...base, input_data: ['X1', 'X2'] });
    t.same(nf.body.not_found, ['X1', 'X2']);
    const field = await post(`${u}/getSimilarPapers`, { ...base, dimensions: '3D' });
    t.equal(field.body.field, 'body.dimensions');
    const notJson = await post(`${u}/getSimilarPapers`, '{"input_data": [');
    t.equal(notJson.status, 400);
    t.match(notJson.body.message, /JSON/);
    const text = await fetch(`${u}/getSimilarPapers`, {
      method: 'POST',
      headers: { 'content-type': 'text/plain' },
      body: 'hi',
    });
    t.equal(text.status, 400);
    t.match(await text.json(), { message: 'body must be object' });
    const xml = await fetch(`${u}/getSimilarPapers`, {
      method: 'POST',
      headers: { 'content-type': 'application/xml' },
      body: '<a/>',
    });
    t.equal(xml.status, 415);
  });

  t.test('POST /getSimilarPapersByKeyword: whole keywords, case-insensitive, -1 for all', async (t) => {
    const all = await post(`${u}/getSimilarPapersByKeyword`, {
      input_data: ['Graph Neural Networks', 'OBJECT DETECTION'],
      limit: -1,
    });
    t.equal(all.status, 200);
    // Both keywords first (P5), then by citations: P1 100, P4 70, P2 50, P3 10.
    t.same(ids(all.body), ['P5', 'P1', 'P4', 'P2', 'P3']);
    t.same(all.body.results[0].matched_keywords, ['graph neural networks', 'object detection']);
    t.equal(all.body.results[0].similarity, 1);
    t.equal(all.body.results[1].similarity, 0.5);
    t.same(all.body.not_found, []);
    const two = await post(`${u}/getSimilarPapersByKeyword`, {
      input_data: ['graph neural networks'],
      limit: 2,
    });
    t.same(ids(two.body), ['P1', 'P2']);
    const big = await post(`${u}/getSimilarPapersByKeyword`, {
      input_data: ['graph neural networks'],
      limit: 1000,
    });
    t.equal(big.body.count, 3, 'limit above the matches is fine here');
    const partial = await post(`${u}/getSimilarPapersByKeyword`, {
      input_data: ['graph', 'Quantum Computing'],
      limit: -1,
    });
    t.same(ids(partial.body), ['P6'], 'a part of a keyword does not match');
    t.same(partial.body.not_found, ['graph']);
    const none = await post(`${u}/getSimilarPapersByKeyword`, { input_data: ['astronomy'], limit: -1 });
    t.equal(none.status, 200);
    t.same(none.body.results, []);
    const bad = await post(`${u}/getSimilarPapersByKeyword`, { input_data: ['x'], limit: -2 });
    t.equal(bad.status, 400);
    t.equal(bad.body.message, 'body.limit must be >= -1');
    const missing = await post(`${u}/getSimilarPapersByKeyword`, { input_data: ['x'] });
    t.equal(missing.body.message, 'body.limit is required');
  });

  t.test('POST /getSimilarPapersByAbstract searches the specter vectors', async (t) => {
    const r = await post(`${u}/getSimilarPapersByAbstract`, {
      input_data: { title: 'like P1', abstract: 'text' },
      limit: 3,
    });
    t.equal(r.status, 200);
    t.same(ids(r.body), ['P1', 'P3', 'P6'], 'new text: no paper is excluded');
    t.equal(r.body.results[0].similarity, 1);
    const r6 = await post(`${u}/getSimilarPapersByAbstract`, {
      input_data: { title: 'like P6', abstract: 'text' },
      limit: 1,
    });
    t.same(ids(r6.body), ['P6']);
    const cases: [unknown, RegExp][] = [
      [{ input_data: { title: 'x' }, limit: 3 }, /^body\.input_data\.abstract is required$/],
      [
        { input_data: { title: 'x', abstract: '' }, limit: 3 },
        /^body\.input_data\.abstract must NOT have fewer than 1 characters$/,
      ],
      [{ input_data: { title: 'x', abstract: '   ' }, limit: 3 }, /^body\.input_data\.abstract is empty$/],
      [
        { input_data: { title: 'x', abstract: 'y', year: 1 }, limit: 3 },
        /^body\.input_data\.year is not an allowed field$/,
      ],
      [{ input_data: ['x'], limit: 3 }, /^body\.input_data must be object$/],
      [{ input_data: { title: 'x', abstract: 'y' } }, /^body\.limit is required$/],
    ];
    for (const [body, message] of cases) {
      const e = await post(`${u}/getSimilarPapersByAbstract`, body);
      t.equal(e.status, 400);
      t.match(e.body.message, message);
    }
    const fail = await post(`${u}/getSimilarPapersByAbstract`, {
      input_data: { title: 'unknown', abstract: 'x' },
      limit: 1,
    });
    t.equal(fail.status, 502);
    t.match(fail.body.message, /embedding failed: no vector for unknown/);
  });

  t.test('POST /checkoutPapers returns a JSON attachment of the full records', async (t) => {
    const r = await fetch(`${u}/checkoutPapers`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        input_data: ['Object Detection in Aerial Images', 'nope', 'a survey of graph learning'],
        input_type: 'Title',
      }),
    });
    t.equal(r.status, 200);
    t.equal(r.headers.get('content-disposition'), 'attachment; filename="papers.json"');
    t.match(r.headers.get('content-type'), /^application\/json/);
    t.same(JSON.parse(decodeURIComponent(r.headers.get('x-papers-not-found')!)), ['nope']);
    const body = (await r.json()) as any[];
    t.same(
      body.map((p) => p.ID),
      ['P3', 'P5'],
    );
    t.same(body[0].specter_embedding, [0.95, 0.05, 0]);
    t.same(body[1].Keywords, ['graph neural networks', 'survey', 'object detection']);
    const none = await post(`${u}/checkoutPapers`, { input_data: ['Z'], input_type: 'ID' });
    t.equal(none.status, 404);
    t.same(none.body.not_found, ['Z']);
    const bad = await post(`${u}/checkoutPapers`, { input_data: ['P1'] });
    t.equal(bad.status, 400);
    t.equal(bad.body.message, 'body.input_type is required');
  });

  t.test('unknown routes are 404', async (t) => {
    t.equal((await fetch(`${u}/nope`)).status, 404);
  });
});

t.test('remote embedding endpoint (SPECTER_URL)', async (t) => {
  const stub = Fastify();
  const seen: unknown[] = [];
  stub.post('/embed', async (req) => {
    seen.push(req.body);
    return (req.body as { title: string }).title === 'bad' ? [1, 2] : { embedding: [0.1, 0, 0.9] };
  });
  await stub.listen({ port: 0, host: '127.0.0.1' });
  t.teardown(() => stub.close());
  const url = `http://127.0.0.1:${(stub.server.address() as AddressInfo).port}/embed`;
  const svc = await startApp({ embedder: remoteSpecter(url, 3) });
  t.teardown(svc.close);
  await ready(svc.url);
  const r = await post(`${svc.url}/getSimilarPapersByAbstract`, {
    input_data: { title: 'T', abstract: 'A' },
    limit: 2,
  });
  t.equal(r.status, 200);
  t.same(ids(r.body), ['P6', 'P5']);
  t.same(seen, [{ title: 'T', abstract: 'A' }]);
  const bad = await post(`${svc.url}/getSimilarPapersByAbstract`, {
    input_data: { title: 'bad', abstract: 'A' },
    limit: 2,
  });
  t.equal(bad.status, 502);
  t.match(bad.body.message, /did not return 3 numbers/);
});
