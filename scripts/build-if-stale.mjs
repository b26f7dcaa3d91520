#!/usr/bin/env node
// Builds dist/ (tsc -p tsconfig.build.json) unless it is newer than every source file that goes into it.
// scripts/test.mjs runs it once before the suite; the e2e harness (harness/dist.ts) runs it before
// starting the built bins, so a single test file run by hand also tests the current code. Concurrent
// callers (tap runs test files in parallel) take a lock directory, so only one tsc runs at a time.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = join(dirname(fileURLToPath(import.meta.url)), '..');
const SOURCES = ['common', 'proto', 'h2grpc', 'ratelimit', 'control-plane', 'operator', 'cli'];
const CONFIGS = ['tsconfig.json', 'tsconfig.build.json', 'package.json'];
const STAMP = join(repo, 'dist', '.build-stamp');
const LOCK = join(repo, '.build.lock');

function newestSource() {
  let newest = 0;
  const walk = (dir) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.ts') || e.name.endsWith('.proto'))
        newest = Math.max(newest, statSync(p).mtimeMs);
    }
  };
  for (const s of SOURCES) walk(join(repo, s));
  for (const c of CONFIGS) newest = Math.max(newest, statSync(join(repo, c)).mtimeMs);
  return newest;
}

function stampTime() {
  try {
    return statSync(STAMP).mtimeMs;
  } catch {
    return 0;
  }
}

const fresh = () => stampTime() >= newestSource();

function sleep(ms) {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** Returns true when it built, false when dist/ was already current. Throws when tsc fails. */
export function buildIfStale({ quiet = false } = {}) {
  if (fresh()) return false;
  const deadline = Date.now() + 300_000;
  for (;;) {
    try {
      mkdirSync(LOCK);
      break;
    } catch {
      // Another process builds: wait for it, then re-check; a lock older than 5 minutes is abandoned.
      try {
        if (Date.now() - statSync(LOCK).mtimeMs > 300_000) rmSync(LOCK, { recursive: true, force: true });
      } catch {
        /* gone meanwhile */
      }
      if (Date.now() > deadline) throw new Error(`build lock ${LOCK} held for over 5 minutes`);
      sleep(200);
    }
  }
  try {
    if (fresh()) return false;
    const started = Date.now(); // the stamp gets this time: a source saved during tsc is stale next time
    // A dist/ without tsc's incremental state is from another layout (dist/e2e, dist/papers): start clean.
    if (!existsSync(join(repo, 'dist', '.tsbuildinfo')))
      rmSync(join(repo, 'dist'), { recursive: true, force: true });
    if (!quiet) process.stderr.write('build: dist/ is older than the sources; tsc -p tsconfig.build.json\n');
    const tsc = join(repo, 'node_modules', 'typescript', 'bin', 'tsc');
    const r = spawnSync(process.execPath, [tsc, '-p', join(repo, 'tsconfig.build.json')], {
      cwd: repo,
      stdio: quiet ? 'pipe' : 'inherit',
      encoding: 'utf8',
    });
    if (r.status !== 0)
      throw new Error(`tsc -p tsconfig.build.json failed\n${r.stdout ?? ''}${r.stderr ?? ''}`);
    mkdirSync(join(repo, 'dist'), { recursive: true });
    writeFileSync(STAMP, `built from the sources as of ${new Date(started).toISOString()}\n`);
    utimesSync(STAMP, started / 1000, started / 1000);
    return true;
  } finally {
    rmSync(LOCK, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  try {
    buildIfStale();
  } catch (err) {
    process.stderr.write(`${err.message}\n`);
    process.exit(1);
  }
}
