// Child-process helpers for the e2e harnesses. Free ports, polling with a deadline, temp dirs and long-lived
// server processes (with the exit-time safety net) live in net.ts and are re-exported here, so kube.ts and the
// tests have one place to import process plumbing from; this file adds short-lived commands (kubectl, helm).
import { spawn } from 'node:child_process';

export {
  LOOPBACK,
  ServerProcess,
  freePort,
  freePorts,
  makeTempDir,
  removeTempDir,
  tryConnect,
  waitForPort,
  waitUntil,
  type SpawnServerOptions,
  type WaitOptions,
} from './net.js';

export interface CommandResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs a command to completion and collects its output (for short CLI calls such as `kubectl get`).
 * Rejects only when the command cannot be spawned; a non-zero exit is in the result. The command is
 * SIGKILLed after `timeoutMs` (default 60 s) so a hung CLI cannot hang a test.
 */
export function runCommand(
  command: string,
  args: readonly string[],
  opts: { env?: NodeJS.ProcessEnv; timeoutMs?: number; input?: string; cwd?: string } = {},
): Promise<CommandResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      env: opts.env ?? process.env,
      cwd: opts.cwd,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 60_000);
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(new Error(`cannot run ${command}: ${err.message}`, { cause: err }));
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
    child.stdin.on('error', () => {}); // the command may exit without reading its input
    child.stdin.end(opts.input ?? '');
  });
}
