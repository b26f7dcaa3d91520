// A comment that names a file of ours names one that exists: every `.ts`, `.js`, `.mjs` or `.md` name in
// a comment of a committed source file (papers/ aside, its own workspace) is a file or folder of the
// repository, as a path from the root or from the commenting file's folder, or as the tail of a path
// (`config/yaml/limits.test.ts`); a bare name (`turn.ts`) is a file's name somewhere in the tree.
// Names of other projects' files (`.go`, `.proto`, `.yaml`) are not looked at, nor those in NOT_OURS.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { basename, dirname, join, normalize } from 'node:path';

/** Names in comments that are not files of this repository (outputs, other projects, examples). */
const NOT_OURS = new Set([
  'Node.js',
  'report.md', // the benchmark's output (bench/outputs.ts)
  'summary.md', // the benchmark's output
  'grpc/doc/statuscodes.md', // gRPC's repository
  'path/to/bin/ratelimit.js', // an example command line
  './x.js', // an example import (scripts/eslint-layers.js)
  'dir/x.ts',
]);

const NAME = /(?<![\w@./-])((?:\.{1,2}\/)*(?:[\w.-]+\/)*[\w-]+(?:\.[\w-]+)*\.(?:ts|js|mjs|md))\b/g;
const COMMENT = /\/\/[^\n]*|\/\*[\s\S]*?\*\//g;

function lsFiles(...patterns: string[]): string[] {
  return execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', ...patterns], {
    encoding: 'utf8',
  })
    .split('\n')
    .filter(Boolean);
}

/** Each file name in the comments of `text` that names nothing in `tree`, with its line. */
export function missingNames(
  file: string,
  text: string,
  tree: { files: Set<string>; dirs: Set<string>; names: Set<string> },
): string[] {
  const exists = (p: string) =>
    tree.files.has(p) || tree.dirs.has(p) || (p.endsWith('.js') && tree.files.has(`${p.slice(0, -3)}.ts`));
  const missing: string[] = [];
  for (const c of text.matchAll(COMMENT)) {
    if (/https?:\/\//.test(c[0]) && c[0].startsWith('//')) continue;
    for (const m of c[0].matchAll(NAME)) {
      const name = m[1]!;
      if (NOT_OURS.has(name)) continue;
      if (exists(normalize(name)) || exists(normalize(join(dirname(file), name)))) continue;
      if (!name.includes('/')) {
        if (tree.names.has(name) || (name.endsWith('.js') && tree.names.has(`${name.slice(0, -3)}.ts`)))
          continue;
      } else {
        const tail = `/${name.replace(/^(\.{1,2}\/)+/, '')}`;
        const ts = tail.replace(/\.js$/, '.ts');
        if ([...tree.files].some((f) => f.endsWith(tail) || f.endsWith(ts))) continue;
      }
      const line = text.slice(0, c.index! + m.index!).split('\n').length;
      missing.push(`${file}:${line}: ${name}`);
    }
  }
  return missing;
}

const files = new Set(lsFiles());
const dirs = new Set<string>();
for (const f of files) for (let d = dirname(f); d !== '.'; d = dirname(d)) dirs.add(d);
const tree = { files, dirs, names: new Set([...files].map((f) => basename(f))) };

t.test('a file named in a comment is found; a stale name is reported with its line', async (t) => {
  const fake = {
    files: new Set(['a/b/turn.ts', 'a/c.md']),
    dirs: new Set(['a', 'a/b']),
    names: new Set(['turn.ts', 'c.md']),
  };
  t.same(missingNames('a/b/x.ts', '// see turn.ts and ../c.md\nconst x = 1; // b/turn.js\n', fake), []);
  t.same(missingNames('a/b/x.ts', 'const y = 2;\n/** moved to yaml-parser.ts */\n', fake), [
    'a/b/x.ts:2: yaml-parser.ts',
  ]);
  t.same(missingNames('a/b/x.ts', "import x from './gone.js'; // a/b/old-name.ts\n", fake), [
    'a/b/x.ts:1: a/b/old-name.ts',
  ]);
});

t.test('every file a comment names exists', async (t) => {
  // This file is left out: its cases hold stale names on purpose.
  const sources = lsFiles('*.ts', '*.js', '*.mjs').filter(
    (f) => !f.startsWith('papers/') && f !== 'scripts/comment-paths.test.ts',
  );
  t.ok(sources.length > 300, `${sources.length} files read`);
  const missing = sources.flatMap((f) => missingNames(f, readFileSync(f, 'utf8'), tree));
  t.same(missing, [], 'comments naming files that do not exist');
});
