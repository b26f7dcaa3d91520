/// <reference lib="dom" />
// The web page in real headless Chromium (Debian's chromium driven by playwright-core) against the shipped
// dataset: the map draws, a keyword search lists and highlights papers, picking one finds similar papers, an
// abstract search answers, checkout downloads JSON. Screenshots go to .tap/papers-screenshots/ (not committed).
import t from 'tap';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadStore } from './data.js';
import { DEFAULT_DATA } from './paths.js';
import { ready, startApp } from './fixtures.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const SHOTS = join(process.cwd(), '.tap', 'papers-screenshots');

const skip = existsSync(CHROMIUM)
  ? false
  : `browser test skipped: ${CHROMIUM} is missing (apt-get install -y chromium, or run scripts/install-deps.sh)`;

t.test('the map page in headless Chromium', { skip }, async (t) => {
  const { chromium } = await import('playwright-core');
  const svc = await startApp({ load: () => loadStore(DEFAULT_DATA) });
  t.teardown(svc.close);
  await ready(svc.url);
  mkdirSync(SHOTS, { recursive: true });
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  t.teardown(() => browser.close());
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 }, acceptDownloads: true });
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));

  await page.goto(svc.url);
  await page.waitForSelector('body[data-ready=true]', { timeout: 15_000 });
  t.equal(await page.textContent('#status'), '300 papers');
  t.equal(await page.locator('#legend span').count(), 10, 'one legend entry per topic');
  // The canvas has drawn points: count non-white pixels.
  const inked = await page.evaluate(() => {
    const c = document.getElementById('map') as HTMLCanvasElement;
    const d = c.getContext('2d')!.getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++;
    return n;
  });
  t.ok(inked > 2000, `${inked} painted pixels`);

  await page.fill('#keyword-input', 'Consensus');
  await page.click('#keyword-form button');
  await page.waitForSelector('#results li');
  const expected = (await (
    await fetch(`${svc.url}/getSimilarPapersByKeyword`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ input_data: ['consensus'], limit: -1 }),
    })
  ).json()) as { count: number; results: { ID: string; Title: string }[] };
  t.ok(expected.count > 3);
  t.equal(await page.locator('#results li').count(), expected.count);
  t.match(await page.textContent('#results-title'), `${expected.count} papers`);
  const shot1 = join(SHOTS, 'keyword-search.png');
  await page.screenshot({ path: shot1 });
  t.ok(readFileSync(shot1).subarray(1, 4).toString() === 'PNG', `screenshot ${shot1}`);

  // Pick the first result and find papers similar to it.
  await page.click('#results li:first-child');
  t.equal(await page.textContent('#selected-count'), '(1)');
  await page.fill('#similar-limit', '5');
  await page.click('#similar-btn');
  await page.waitForFunction(() =>
    document.getElementById('results-title')!.textContent!.startsWith('Similar'),
  );
  t.equal(await page.locator('#results li').count(), 5);
  const picked = expected.results[0];
  const similar = (await (
    await fetch(`${svc.url}/getSimilarPapers`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ input_data: [picked.ID], input_type: 'ID', limit: 5 }),
    })
  ).json()) as { results: { ID: string }[] };
  t.same(
    await page.locator('#results li').evaluateAll((els) => els.map((e) => (e as HTMLElement).dataset.id)),
    similar.results.map((r) => r.ID),
  );
  await page.screenshot({ path: join(SHOTS, 'similar.png') });

  // Check out the selection.
  const [download] = await Promise.all([page.waitForEvent('download'), page.click('#checkout-btn')]);
  t.equal(download.suggestedFilename(), 'papers.json');
  const file = join(SHOTS, 'papers.json');
  await download.saveAs(file);
  const out = JSON.parse(readFileSync(file, 'utf8')) as { ID: string; specter_embedding: number[] }[];
  t.same(
    out.map((p) => p.ID),
    [picked.ID],
  );
  t.equal(out[0].specter_embedding.length, 768);

  // Paste an abstract.
  await page.fill('#abstract-title', 'Surface code decoding');
  await page.fill(
    '#abstract-text',
    'We decode surface codes to lower the logical error rate of superconducting qubits under decoherence.',
  );
  await page.click('#abstract-form button');
  await page.waitForFunction(() =>
    document.getElementById('results-title')!.textContent!.includes('abstract'),
  );
  const first = await page.locator('#results li:first-child .meta').textContent();
  t.match(first, /quantum|qubits|error correction/i, 'a quantum computing paper comes first');
  await page.screenshot({ path: join(SHOTS, 'abstract.png') });
  t.same(errors, [], 'no page errors');
});
