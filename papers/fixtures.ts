// Test helpers: a six-paper fixture whose nearest neighbours are known by construction, and a way to run the
// service on a free loopback port.
import type { AddressInfo } from 'node:net';
import type { AbstractEmbedder } from './embed.js';
import { type Paper, Store, normalizeRecords } from './data.js';
import { type AppOptions, buildApp } from './service.js';
import { GloveVectors } from './embed.js';

const rec = (
  ID: string,
  Title: string,
  Keywords: string[],
  CitationCounts: number,
  glove: number[],
  specter: number[],
  gUmap: [number, number],
  sUmap: [number, number],
) => ({
  ID,
  Title,
  Authors: ['Ada Lovelace', 'Alan Turing'],
  Source: 'Test Venue',
  Year: 2020,
  Abstract: `Abstract of ${Title}.`,
  Keywords,
  CitationCounts,
  glove_embedding: glove,
  specter_embedding: specter,
  glove_umap: gUmap,
  specter_umap: sUmap,
});

/**
 * Known neighbours, by construction:
 *  glove nD from P1: P2 (cos .994), P5 (.707), then P3, P4, P6 (cos 0, by index)
 *  specter nD from P1: P3 (.999), P6 (.110), then P2, P4, P5
 *  glove 2D from P1 (0,0): P3 (1), P5 (3), P4 (13.45), P2 (14.14), P6 (20.6); bounding-box diagonal 25
 *  glove nD from mean(P1, P2) = (.95, .05, 0): P5, P3, P4, P6
 */
export function fixtureRecords(): Record<string, unknown>[] {
  return [
    rec(
      'P1',
      'Graph Neural Networks for Molecules',
      ['Graph Neural Networks', 'Chemistry'],
      100,
      [1, 0, 0],
      [1, 0, 0],
      [0, 0],
      [5, 5],
    ),
    rec(
      'P2',
      'Message Passing on Molecular Graphs',
      ['graph neural networks', 'message passing'],
      50,
      [0.9, 0.1, 0],
      [0, 1, 0],
      [10, 10],
      [0, 0],
    ),
    rec(
      'P3',
      'Object Detection in Aerial Images',
      ['object detection'],
      10,
      [0, 1, 0],
      [0.95, 0.05, 0],
      [1, 0],
      [1, 1],
    ),
    rec(
      'P4',
      'Pedestrian Detection with Transformers',
      ['Object Detection', 'transformers'],
      70,
      [0, 0.9, 0.1],
      [0, 0.9, 0.1],
      [9, 10],
      [2, 2],
    ),
    rec(
      'P5',
      'A Survey of Graph Learning',
      ['graph neural networks', 'survey', 'object detection'],
      5,
      [0.5, 0.5, 0],
      [0, 0, 1],
      [0, 3],
      [3, 3],
    ),
    rec(
      'P6',
      'Quantum Error Correction with Surface Codes',
      ['quantum computing'],
      1,
      [0, 0, 1],
      [0.1, 0, 0.9],
      [20, -5],
      [4, 4],
    ),
  ];
}

export function fixtureStore(log?: ConstructorParameters<typeof Store>[1]): Store {
  const papers: Paper[] = normalizeRecords(fixtureRecords(), () => GloveVectors.load());
  return new Store(papers, log);
}

/** An embedder for the 3-d fixture: a fixed vector per title. */
export function fixtureEmbedder(byTitle: Record<string, number[]>): AbstractEmbedder {
  return {
    name: 'fixture',
    embed: async (title) => {
      const v = byTitle[title];
      if (!v) throw new Error(`no vector for ${title}`);
      return Float32Array.from(v);
    },
  };
}

export async function startApp(
  opts: Partial<AppOptions> = {},
): Promise<{ url: string; close: () => Promise<void> }> {
  const app = await buildApp({ load: async () => fixtureStore(), ...opts });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, close: () => app.close() };
}

export async function post(
  url: string,
  body: unknown,
): Promise<{ status: number; body: any; headers: Headers }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON
  }
  return { status: res.status, body: parsed, headers: res.headers };
}

/** Waits until GET /health says the store is ready. */
export async function ready(url: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const h = (await (await fetch(`${url}/health`)).json()) as { state: string };
    if (h.state === 'ready') return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error('service did not become ready');
}
