// The manual is split over README.md and docs/**/*.md, which link to each other and into the tree.
// A page moved or a heading renamed silently breaks those links; this checks that every relative
// link resolves to an existing file or folder, and every #anchor to a heading of the target page
// (GitHub's anchor rules: lowercase, punctuation dropped, spaces as hyphens, -1/-2 for repeats).
import t from 'tap';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = join(dirname(fileURLToPath(import.meta.url)), '..');

function markdownFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...markdownFiles(p));
    else if (name.endsWith('.md')) out.push(p);
  }
  return out;
}

/** The page's lines outside fenced code blocks (``` or ~~~), with their 1-based numbers. */
function proseLines(text: string): Array<[number, string]> {
  const out: Array<[number, string]> = [];
  let fence = '';
  text.split('\n').forEach((line, i) => {
    const m = /^\s*(```+|~~~+)/.exec(line);
    if (m) {
      if (!fence) fence = m[1][0];
      else if (m[1][0] === fence) fence = '';
      return;
    }
    if (!fence) out.push([i + 1, line]);
  });
  return out;
}

/** GitHub's anchor for a heading text. */
export function slug(heading: string): string {
  return heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1') // a link in a heading: its text
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

const anchorCache = new Map<string, Set<string>>();
function anchorsOf(file: string): Set<string> {
  let set = anchorCache.get(file);
  if (set) return set;
  set = new Set();
  const seen = new Map<string, number>();
  for (const [, line] of proseLines(readFileSync(file, 'utf8'))) {
    const m = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!m) continue;
    const base = slug(m[1]);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    set.add(n === 0 ? base : `${base}-${n}`);
  }
  for (const [, line] of proseLines(readFileSync(file, 'utf8'))) {
    for (const a of line.matchAll(/<a\s+(?:name|id)="([^"]+)"/g)) set.add(a[1]);
  }
  anchorCache.set(file, set);
  return set;
}

/** Every broken relative link of one page, as `file:line: target (why)`. */
export function brokenLinks(file: string): string[] {
  const problems: string[] = [];
  const text = readFileSync(file, 'utf8');
  for (const [n, raw] of proseLines(text)) {
    const line = raw.replace(/`[^`]*`/g, ''); // code spans are not links
    for (const m of line.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      const target = m[1];
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // http:, https:, mailto:
      const hash = target.indexOf('#');
      const path = decodeURIComponent(hash < 0 ? target : target.slice(0, hash));
      const anchor = hash < 0 ? '' : decodeURIComponent(target.slice(hash + 1));
      const dest = path === '' ? file : resolve(dirname(file), path);
      const where = `${relative(repo, file)}:${n}: ${target}`;
      if (!existsSync(dest)) {
        problems.push(`${where} (no such file)`);
        continue;
      }
      if (anchor && dest.endsWith('.md') && !anchorsOf(dest).has(anchor)) {
        problems.push(`${where} (no heading with that anchor in ${relative(repo, dest)})`);
      }
    }
  }
  return problems;
}

t.test('slug follows GitHub: punctuation dropped, spaces kept as hyphens', async (t) => {
  t.equal(slug('Config over xDS: the control plane'), 'config-over-xds-the-control-plane');
  t.equal(slug('Installation (Helm)'), 'installation-helm');
  t.equal(slug('counters get | reset'), 'counters-get--reset');
  t.equal(
    slug('Debug server (default `0.0.0.0:6070`, `DEBUG_HOST`)'),
    'debug-server-default-00006070-debug_host',
  );
});

t.test('every relative link in README.md and docs/ resolves to a file and a heading', async (t) => {
  const pages = [join(repo, 'README.md'), ...markdownFiles(join(repo, 'docs'))];
  t.ok(pages.length > 10, `found ${pages.length} pages`);
  const problems = pages.flatMap(brokenLinks);
  t.same(problems, [], problems.join('\n'));
});
