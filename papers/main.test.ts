// The bin's entry point as a process: configuration from the environment, the startup log, exit on bad data.
import t from 'tap';
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { fixtureRecords, post, ready } from './fixtures.js';

const main = fileURLToPath(new URL('./main.ts', import.meta.url));

function run(env: Record<string, string>) {
  const child = spawn(process.execPath, ['--import', 'tsx', main], {
    env: { ...process.env, HOST: '127.0.0.1', PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: any[] = [];
  let buf = '';
  child.stdout.on('data', (d: Buffer) => {
    buf += d.toString();
    const parts = buf.split('\n');
    buf = parts.pop()!;
    for (const l of parts) if (l.trim()) lines.push(JSON.parse(l));
  });
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  const waitFor = async (pred: (l: any) => boolean) => {
    for (let i = 0; i < 600; i++) {
      const hit = lines.find(pred);
      if (hit) return hit;
      await new Promise((r) => setTimeout(r, 25));
    }
    throw new Error(`log line not seen; got ${JSON.stringify(lines.map((l) => l.msg))}`);
  };
  return { child, lines, exited, waitFor };
}

t.test('serves PAPERS_DATA on PORT and logs the three startup messages', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'papers-main-'));
  const file = join(dir, 'fixture.json');
  writeFileSync(file, JSON.stringify(fixtureRecords()));
  const p = run({ PAPERS_DATA: file });
  t.teardown(() => void p.child.kill('SIGKILL'));
  const listening = await p.waitFor((l) => /Server listening at http:\/\/127\.0\.0\.1:\d+/.test(l.msg));
  const url = /http:\/\/127\.0\.0\.1:\d+/.exec(listening.msg)![0];
  await ready(url);
  const msgs = p.lines.map((l) => l.msg);
  for (const m of ['data loaded', 'index created for glove', 'index created for specter'])
    t.ok(msgs.includes(m), m);
  t.ok(msgs.indexOf('data loaded') < msgs.indexOf('index created for glove'));
  t.ok(msgs.indexOf('index created for glove') < msgs.indexOf('index created for specter'));
  t.match(
    p.lines.find((l) => l.msg === 'data loaded'),
    { papers: 6, source: file },
  );
  const r = await post(`${url}/getSimilarPapers`, {
    input_data: ['P1'],
    input_type: 'ID',
    limit: 1,
    embedding: 'glove',
  });
  t.same(
    r.body.results.map((x: any) => x.ID),
    ['P2'],
  );
  p.child.kill('SIGTERM');
  t.equal(await p.exited, 0);
});

t.test('exits non-zero when the data cannot be loaded', async (t) => {
  const p = run({ PAPERS_DATA: '/nonexistent/papers.jsonl' });
  t.teardown(() => void p.child.kill('SIGKILL'));
  t.equal(await p.exited, 1);
  t.ok(p.lines.some((l) => l.msg === 'loading papers failed' && /ENOENT/.test(l.err?.message)));
});

t.test('refuses a bad PAPERS_SEARCH_QUEUE', async (t) => {
  const p = run({ PAPERS_SEARCH_QUEUE: '0' });
  t.teardown(() => void p.child.kill('SIGKILL'));
  let err = '';
  p.child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const deadline = new Promise<string>((r) =>
    setTimeout(() => r('still running after 60 s'), 60_000).unref(),
  );
  t.equal(await Promise.race([p.exited, deadline]), 1);
  t.match(err, /PAPERS_SEARCH_QUEUE must be a whole number >= 1, got 0/);
});
