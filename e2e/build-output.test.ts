// What ships is production code only: the build output (dist/, which the image copies) holds no tests,
// test helpers, benchmarks, e2e harness or papers code, every bin runs from it, and papers/ is its own
// workspace with its own dependencies.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import t from 'tap';
import { ensureBuilt, REPO_ROOT } from '../harness/dist.js';

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    return statSync(p).isDirectory() ? files(p) : [p];
  });
}

t.test('dist/ holds the production folders only, without tests, test helpers or benchmarks', async (t) => {
  ensureBuilt();
  const dist = join(REPO_ROOT, 'dist');
  // dist/image is where `npm run image` writes the image tarball, not compiled code.
  const top = readdirSync(dist).filter((n) => !n.startsWith('.') && n !== 'image');
  // The production folders are those tsconfig.build.json compiles.
  const build = readFileSync(join(REPO_ROOT, 'tsconfig.build.json'), 'utf8');
  const include = JSON.parse(/"include":\s*(\[[^\]]*\])/.exec(build)![1]!) as string[];
  t.ok(
    include.includes('ratelimit') && include.includes('h2grpc'),
    'the build compiles the service and its gRPC server',
  );
  t.same(top.sort(), [...include].sort());
  const js = files(dist)
    .filter((f) => f.endsWith('.js'))
    .map((f) => relative(dist, f));
  t.ok(js.length > 50, `${js.length} compiled modules`);
  const nonProduction = js.filter((f) => /\.test\.js$|(^|\/)(test-support|testing|bench)\.js$/.test(f));
  t.same(nonProduction, [], 'no tests, test helpers or benchmarks');
  t.ok(js.includes('ratelimit/sources/parse-worker.js'), 'the parse worker is built (loaded by path)');
});

t.test('every bin of the package runs from dist/', async (t) => {
  const pkg = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8'));
  for (const [name, path] of Object.entries<string>(pkg.bin)) {
    const text = readFileSync(join(REPO_ROOT, path), 'utf8');
    // `import '../dist/…'`, or `await import('../dist/…')` where the bin answers --help first.
    const targets = [...text.matchAll(/import\s*\(?'\.\.\/(dist\/[^']+)'/g)].map((m) => m[1]!);
    t.ok(targets.length > 0, `${name} imports a module of dist/`);
    for (const target of targets)
      t.ok(statSync(join(REPO_ROOT, target)).isFile(), `${name}: ${target} is built`);
  }
  t.notOk('papers' in pkg.bin, 'the papers bin belongs to the papers workspace');
});

t.test('papers/ is its own workspace with its own dependencies', async (t) => {
  const root = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8'));
  const papers = JSON.parse(readFileSync(join(REPO_ROOT, 'papers', 'package.json'), 'utf8'));
  t.same(root.workspaces, ['papers']);
  for (const dep of ['umap-js', 'playwright-core']) {
    t.notOk(dep in { ...root.dependencies, ...root.devDependencies }, `${dep} is not the rate limiter's`);
    t.ok(dep in papers.devDependencies, `${dep} is papers'`);
  }
  t.ok(papers.dependencies.fastify, "papers declares its server's dependencies");
  t.equal(papers.bin.papers, 'bin/papers.js');
  t.equal(papers.scripts.build, 'tsc -p tsconfig.build.json');
});
