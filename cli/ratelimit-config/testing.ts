// Test helpers for ratelimit-config: run main() in-process with captured output, or the executable as
// a real subprocess (through tsx, so no build is needed). Tests only; production code never imports it.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { TestApp } from '../../ratelimit/test-support.js';
import type { CounterReading } from './counters.js';
import { main } from './main.js';

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

export const REPO_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const ENTRY = join(REPO_ROOT, 'cli', 'ratelimit-config', 'cli.ts');

/** main() in this process; env replaces the process environment. */
export async function runInProcess(args: string[], env: Record<string, string> = {}): Promise<RunResult> {
  let stdout = '';
  let stderr = '';
  const code = await main(args, { out: (t) => (stdout += t), err: (t) => (stderr += t), env });
  return { code, stdout, stderr };
}

/** The executable as a subprocess, from the repository root. */
export function runBin(args: string[], env: Record<string, string> = {}): Promise<RunResult> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', ENTRY, ...args],
      {
        cwd: REPO_ROOT,
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
        timeout: 120_000,
        killSignal: 'SIGKILL',
      },
      (err, stdout, stderr) => {
        const code = err === null ? 0 : typeof err.code === 'number' ? err.code : -1;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

/** A temp dir with the given files (relative paths); remove() deletes it. */
export function tempFiles(files: Record<string, string>): {
  dir: string;
  path(p: string): string;
  remove(): void;
} {
  const dir = mkdtempSync(join(tmpdir(), 'rl-config-cli-'));
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, name)), { recursive: true });
    writeFileSync(join(dir, name), text);
  }
  return { dir, path: (p) => join(dir, p), remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** The counters tests' descriptor: example.yaml's remote_address limit. */
export const COUNTERS_CONFIG = join(REPO_ROOT, 'examples/config/example.yaml');
export const COUNTERS_DESCRIPTOR = 'remote_address=10.1.2.3';
export const COUNTERS_REQUEST = {
  domain: 'example',
  descriptors: [{ entries: [{ key: 'remote_address', value: '10.1.2.3' }] }],
};

/** `n` calls of COUNTERS_REQUEST to a service; its last status. */
export async function hitCounter(app: TestApp, n: number) {
  let last;
  for (let i = 0; i < n; i++) last = (await app.call(COUNTERS_REQUEST)).statuses[0]!;
  return last!;
}

/** The counters of a `counters get|reset --output json` run (throws with stderr when it failed). */
export function readings(r: RunResult): CounterReading[] {
  if (r.code !== 0) throw new Error(`exit ${r.code}: ${r.stderr}`);
  return (JSON.parse(r.stdout) as { counters: CounterReading[] }).counters;
}
