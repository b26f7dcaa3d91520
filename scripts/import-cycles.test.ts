// No import circles anywhere in the repository (type-only imports included), and the circle finder
// itself finds what it should.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { circles, importGraph, importsOf } from './import-graph.js';

t.test('importsOf: relative imports, type-only imports and re-exports, as .ts paths', async (t) => {
  const text = [
    "import { a } from './a.js';",
    "import type { B } from '../b/index.js';",
    "export * from './c.js';",
    "export { d } from './d.js';",
    "import { readFileSync } from 'node:fs';",
    "import pino from 'pino';",
    "import './side-effect.mjs';",
  ].join('\n');
  t.same(importsOf('x/y/file.ts', text), [
    'x/y/a.ts',
    'x/b/index.ts',
    'x/y/c.ts',
    'x/y/d.ts',
    'x/y/side-effect.mts',
  ]);
});

t.test('circles: every strongly connected set, and a file that imports itself', async (t) => {
  const graph = new Map([
    ['a', ['b']],
    ['b', ['c']],
    ['c', ['a', 'd']],
    ['d', ['d']],
    ['e', ['f']],
    ['f', []],
  ]);
  t.same(circles(graph), [['a', 'b', 'c'], ['d']]);
  t.same(
    circles(
      new Map([
        ['a', ['b']],
        ['b', []],
      ]),
    ),
    [],
  );
});

t.test('the repository has no import circle', async (t) => {
  const files = execFileSync('git', ['ls-files', '-co', '--exclude-standard', '*.ts'], { encoding: 'utf8' })
    .split('\n')
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'));
  t.ok(files.length > 100, `${files.length} files read`);
  const found = circles(importGraph(files));
  t.same(
    found.map((c) => c.join(' <-> ')),
    [],
    'import circles',
  );
});
