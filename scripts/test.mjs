#!/usr/bin/env node
// Runs the whole suite with tap, then prints one closing line `N passed, M failed, K skipped`
// counted from the per-file results tap saves in .tap/test-results (top-level tests of each file).
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';

const resultsDir = '.tap/test-results';
rmSync(resultsDir, { recursive: true, force: true });

// Static checks first (type check, lint, format): each counts as one test in the closing line.
// `npm test -- <files>` runs only the given test files and skips them.
const args = process.argv.slice(2);
const checks = args.length
  ? []
  : [
      ['typecheck', ['tsc', '-p', 'tsconfig.json', '--noEmit']],
      ['eslint', ['eslint', '.']],
      ['prettier', ['prettier', '--check', '.', '--log-level', 'warn']],
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
const run = spawnSync('npx', ['tap', ...args], { stdio: 'inherit' });

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
for (const file of walk(resultsDir)) {
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    // Top-level tests of a file are the unindented points; assertions inside subtests are indented.
    const m = /^(not )?ok \d+/.exec(line);
    if (!m) continue;
    if (/#\s*(SKIP|TODO)/i.test(line)) skipped++;
    else if (m[1]) failed++;
    else passed++;
  }
}
if (run.status !== 0 && failed === 0) failed = 1; // a crash outside any test still fails the run
console.log(`\n${passed} passed, ${failed} failed, ${skipped} skipped`);
process.exit(staticFailed > 0 ? 1 : (run.status ?? 1));
