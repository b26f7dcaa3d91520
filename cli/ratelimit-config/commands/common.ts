// What the commands of ratelimit-config share: the output, the two kinds of worded failure, the options
// every command takes, reading a config set, printing a problem, and the service's settings as a
// command sees them.
import { readFileSync } from 'node:fs';
import { parseEnv } from 'node:util';
import { loadSettings, type Settings } from '../../../ratelimit/settings/index.js';
import {
  buildConfigSet,
  hasErrors,
  problemLine,
  readSources,
  type ConfigSet,
} from '../../../control-plane/config-set/index.js';
import { UsageError } from '../../../common/index.js';

export interface Io {
  out(text: string): void;
  err(text: string): void;
  env: Readonly<Record<string, string | undefined>>;
}

/** A mistake in the command line: printed with where to find help, exit status 2 (every program's class). */
export { UsageError };

/** A failure already worded for the user, printed as it is (one line, no library internals). */
export class CliError extends Error {}

export const COMMON = {
  format: { type: 'string' },
  'merge-domain-config': { type: 'boolean' },
  namespace: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

export { problemLine };

export function loadSet(
  paths: readonly string[],
  values: { namespace?: string; 'merge-domain-config'?: boolean },
  io: Io,
): ConfigSet {
  if (paths.length === 0) throw new UsageError('no files or folders given');
  return buildConfigSet(
    readSources(paths, values.namespace === undefined ? {} : { namespace: values.namespace }),
    {
      mergeDomainConfig: values['merge-domain-config'] ?? io.env.MERGE_DOMAIN_CONFIG === 'true',
    },
  );
}

/** For explain, diff and counters: a set with errors is refused (as the service refuses it). */
export function requireValid(set: ConfigSet, what: string, io: Io): boolean {
  if (!hasErrors(set)) return true;
  io.err(`${what}: the config is invalid:\n`);
  for (const p of set.problems) if (p.severity === 'error') io.err(`${problemLine(p)}\n`);
  return false;
}

export const REQUEST = {
  ...COMMON,
  config: { type: 'string', multiple: true },
  domain: { type: 'string' },
  descriptor: { type: 'string', multiple: true },
  now: { type: 'string' },
  'env-file': { type: 'string', multiple: true },
  env: { type: 'string', multiple: true },
  yes: { type: 'boolean' },
  timeout: { type: 'string' },
  bucket: { type: 'string', multiple: true },
  'rlqs-url': { type: 'string' },
} as const;

export interface RequestValues {
  config?: string[];
  domain?: string;
  descriptor?: string[];
  now?: string;
  'env-file'?: string[];
  env?: string[];
  namespace?: string;
  'merge-domain-config'?: boolean;
  bucket?: string[];
  'rlqs-url'?: string;
  timeout?: string;
}

/** The service's settings from the environment, then --env-file files, then --env pairs. */
export function settingsFrom(values: RequestValues, io: Io): Settings {
  const env: Record<string, string | undefined> = { ...io.env };
  for (const f of values['env-file'] ?? []) Object.assign(env, parseEnv(readFileSync(f, 'utf8')));
  for (const pair of values.env ?? []) {
    const eq = pair.indexOf('=');
    if (eq <= 0) throw new UsageError(`--env ${pair}: expected NAME=VALUE`);
    env[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  return loadSettings(env);
}
