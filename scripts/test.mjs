#!/usr/bin/env node
// Runs the whole suite with tap (the rate limiter's tests, then the papers workspace's own), then prints
// one closing line `N passed, M failed, K skipped` counted from the per-file results tap saves in
// .tap/test-results and papers/.tap/test-results (top-level tests of each file).
// dist/ is built first (once, skipped when current): the e2e tests run the built bins.
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { buildIfStale } from './build-if-stale.mjs';

const PAPERS = 'papers';
const resultsDirs = ['.tap/test-results', join(PAPERS, '.tap/test-results')];
for (const d of resultsDirs) rmSync(d, { recursive: true, force: true });

// Static checks first (type check, lint, format): each counts as one test in the closing line.
// `npm test -- <files>` runs only the given test files and skips them.
const args = process.argv.slice(2);
const inPapers = (a) => !a.startsWith('-') && relative(PAPERS, resolve(a)).split('/')[0] !== '..';
const papersArgs = args.filter(inPapers).map((a) => relative(PAPERS, resolve(a)));
const rootArgs = args.filter((a) => !inPapers(a));
const checks = args.length
  ? []
  : [
      ['typecheck', ['tsc', '-p', 'tsconfig.json', '--noEmit']],
      ['eslint', ['eslint', '.']],
      ['prettier', ['prettier', '--check', '.', '--log-level', 'warn']],
      ['typecheck papers', ['tsc', '-p', join(PAPERS, 'tsconfig.json'), '--noEmit']],
    ];
let staticPassed = 0;
let staticFailed = 0;
for (const [name, cmd] of checks) {
  const r = spawnSync('npx', cmd, { stdio: 'inherit' });
  if (r.status === 0) staticPassed++;
  else {
    staticFailed++;
    console.error(`static check failed: ${name}`);
  }
}
try {
  buildIfStale();
} catch (err) {
  staticFailed++;
  console.error(`static check failed: build (${err.message})`);
}
// With file arguments, each package runs only its own files (and not at all when it has none).
const runs = [];
if (!args.length || rootArgs.length) runs.push(spawnSync('npx', ['tap', ...rootArgs], { stdio: 'inherit' }));
if (!args.length || papersArgs.length)
  runs.push(spawnSync('npx', ['tap', ...papersArgs], { stdio: 'inherit', cwd: PAPERS }));
const tapFailed = runs.some((r) => r.status !== 0);

function walk(dir) {
  let out = [];
  let names;
  try {
    names = readdirSync(dir);
  } catch {
    return out;
  }
  for (const n of names) {
    const p = join(dir, n);
    if (statSync(p).isDirectory()) out = out.concat(walk(p));
    else if (p.endsWith('.tap')) out.push(p);
  }
  return out;
}

let passed = staticPassed;
let failed = staticFailed;
let skipped = 0;
for (const file of resultsDirs.flatMap(walk)) {
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    // Top-level tests of a file are the unindented points; assertions inside subtests are indented.
    const m = /^(not )?ok \d+/.exec(line);
    if (!m) continue;
    if (/#\s*(SKIP|TODO)/i.test(line)) skipped++;
    else if (m[1]) failed++;
    else passed++;
  }
}
if (tapFailed && failed === 0) failed = 1; // a crash outside any test still fails the run
console.log(`\n${passed} passed, ${failed} failed, ${skipped} skipped`);
process.exit(staticFailed > 0 || tapFailed ? 1 : 0);
