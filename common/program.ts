// What every command-line program does the same way: its flags parsed with "did you mean" for a
// misspelt one, `--version`, and one way to end: `<program>: <message>` on stderr, exit 2 for bad usage
// and 1 for a failure at run time, with a clean sentence for an address already in use.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { parseListenAddress } from './http-endpoint.js';
import { suggest } from './suggest.js';

export { editDistance, suggest } from './suggest.js';

/** Bad usage: exit 2. */
export class UsageError extends Error {
  override name = 'UsageError';
}

/** The version in the package.json above this file (source tree and dist/ alike). */
export function packageVersion(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++) {
    const file = join(dir, 'package.json');
    if (existsSync(file)) {
      const pkg = JSON.parse(readFileSync(file, 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'envoy-ratelimit-ts' && typeof pkg.version === 'string') return pkg.version;
    }
    dir = dirname(dir);
  }
  return 'unknown';
}

/**
 * parseArgs with the program's rules: an unknown option is a UsageError that suggests the nearest known
 * one, a missing value or a stray argument a UsageError too.
 */
export function parseProgramArgs<T extends ParseArgsConfig>(config: T): ReturnType<typeof parseArgs<T>> {
  try {
    return parseArgs(config);
  } catch (err) {
    const e = err as Error & { code?: string };
    if (!e.code?.startsWith('ERR_PARSE_ARGS_')) throw err;
    const unknown = /Unknown option '(-{1,2}[^']+)'/.exec(e.message)?.[1];
    if (unknown) {
      const near = suggest(unknown.replace(/^-+/, '').split('=')[0]!, Object.keys(config.options ?? {}));
      throw new UsageError(`unknown option '${unknown}'${near ? `; did you mean --${near}?` : ''}`);
    }
    throw new UsageError(e.message.split('\n')[0]!.replace(/\. To specify a positional argument.*$/, ''));
  }
}

/** Checks a `host:port` flag value up front, so a bad one is bad usage (exit 2), named with its flag. */
export function checkListenFlag(value: string | undefined, flag: string): void {
  if (value === undefined) return;
  try {
    parseListenAddress(value, flag);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

/** An error's message for the one line a program ends with: a port in use as a clean sentence. */
export function failureMessage(err: Error & { code?: string; address?: string; port?: number }): string {
  // A listener's bind failure, from node:net (code EADDRINUSE) or inside grpc-js's message.
  const inUse = /EADDRINUSE: address already in use (\S+?)\]?$/.exec(err.message)?.[1];
  if (err.code === 'EADDRINUSE' || inUse) {
    const where = inUse ?? (err.address !== undefined ? `${err.address}:${err.port}` : 'the address');
    return `cannot listen on ${where}: address already in use (another process listens there)`;
  }
  return err.message;
}

/**
 * Runs a program's main and exits: its code when it returns; on an error, `<name>: <message>` (plus
 * `see <name> --help` for bad usage) on stderr and exit 2 for a UsageError, 1 otherwise.
 */
export function runProgram(name: string, main: () => Promise<number>): void {
  main().then(
    (code) => process.exit(code),
    (err: Error) => {
      const usage = err instanceof UsageError;
      process.stderr.write(`${name}: ${failureMessage(err)}${usage ? ` (see ${name} --help)` : ''}\n`);
      process.exit(usage ? 2 : 1);
    },
  );
}
