// The shipped artifact under test: e2e tests and the benchmark start the built bins (bin/*.js, which
// import dist/), never the TypeScript sources through tsx, so the worker-thread and proto-path code
// that production runs is the code tested and measured. dist/ is built on first use when it is older
// than the sources (scripts/build-if-stale.mjs, shared with scripts/test.mjs, under a lock).
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

export const REPO_ROOT = new URL('../', import.meta.url).pathname.replace(/\/$/, '');

export type BinName = 'ratelimit' | 'ratelimit-operator' | 'ratelimit-control-plane' | 'ratelimit-client';

let built = false;

/** Builds dist/ if it is stale (once per process); throws with tsc's output when the build fails. */
export function ensureBuilt(): void {
  if (built) return;
  const r = spawnSync(process.execPath, [join(REPO_ROOT, 'scripts', 'build-if-stale.mjs')], {
    cwd: REPO_ROOT,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  if (r.status !== 0) throw new Error(`building dist/ failed:\n${r.stdout}${r.stderr}`);
  built = true;
}

/** Path of a built bin (bin/<name>.js), after making sure dist/ is current. */
export function builtBin(name: BinName): string {
  ensureBuilt();
  return join(REPO_ROOT, 'bin', `${name}.js`);
}

/**
 * Imports a module of the build (`dist/<path>.js`) for in-process benchmarks; the caller types it with the
 * source module's type: `await importBuilt<typeof import('../proto/index.js')>('proto/index')`.
 */
export async function importBuilt<T>(path: string): Promise<T> {
  ensureBuilt();
  return (await import(pathToFileURL(join(REPO_ROOT, 'dist', `${path}.js`)).href)) as T;
}
