// ratelimit-config: validate, convert, envoy, explain, diff and counters, on the service's own config model.
// Exit status: 0 fine (diff: no change), 1 invalid config or nothing to check (validate, convert), a key
// without a source (envoy), changes found (diff) or nothing deleted (counters reset), 2 usage error,
// unreadable or invalid input where a valid config is needed, or Redis failure.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs, parseEnv } from 'node:util';
import { loadSettings, type RedisSettings, type Settings } from '../../ratelimit/settings/index.js';
import { buildConfigSet, compileSet, hasErrors, type ConfigSet, type Problem } from './config-set.js';
import { convertSources } from './convert.js';
import { CounterClient, formatReadings } from './counters.js';
import { diffSets, formatDiffMarkdown } from './diff.js';
import { envoyRateLimits, formatEnvoyYaml, parseMatch, type HeaderCondition } from './envoy.js';
import { Explainer, formatExplanations, parseDescriptor } from './explain.js';
import {
  type BucketReading,
  fetchAssignments,
  formatAssignments,
  formatBucketReading,
  type LiveSubscriber,
  parseBucket,
  readBuckets,
  bucketProblems,
} from './explain-bucket.js';
import { COMMAND_HELP, COMMANDS, packageVersion, suggest, USAGE, type Command } from './help.js';
import { expandPaths, readSources, RLC_KIND } from './sources.js';

export interface Io {
  out(text: string): void;
  err(text: string): void;
  env: Readonly<Record<string, string | undefined>>;
}

const defaultIo: Io = {
  out: (t) => process.stdout.write(t),
  err: (t) => process.stderr.write(t),
  env: process.env,
};

class UsageError extends Error {}

/** A failure already worded for the user, printed as it is (one line, no library internals). */
class CliError extends Error {}

export { USAGE };

const COMMON = {
  format: { type: 'string' },
  'merge-domain-config': { type: 'boolean' },
  namespace: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

const CONVERT_OPTIONS = { ...COMMON, out: { type: 'string' } } as const;
const VALIDATE_OPTIONS = { ...COMMON, rlqs: { type: 'boolean' } } as const;

const ENVOY_OPTIONS = {
  ...COMMON,
  config: { type: 'string', multiple: true },
  domain: { type: 'string' },
  header: { type: 'string', multiple: true },
  'generic-key': { type: 'string', multiple: true },
  match: { type: 'string', multiple: true },
} as const;

function problemLine(p: Problem, format: string): string {
  const field = p.field === '' ? '' : `${p.field}: `;
  if (format === 'github') {
    const esc = (s: string) => s.replace(/%/g, '%25').replace(/\r/g, '%0D').replace(/\n/g, '%0A');
    const prop = (s: string) => esc(s).replace(/:/g, '%3A').replace(/,/g, '%2C');
    return `::${p.severity} file=${prop(p.file)},line=${p.line},col=${p.col},title=${prop(`ratelimit-config: document ${p.document}`)}::${esc(field + p.message)}`;
  }
  if (format === 'annotations') {
    return `${p.file}:${p.line}:${p.col}: ${p.severity === 'warning' ? 'warning: ' : ''}${field}${p.message}`;
  }
  return `${p.severity}: ${p.file} (document ${p.document}, line ${p.line}) ${field}${p.message}`;
}

function loadSet(
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
function requireValid(set: ConfigSet, what: string, io: Io): boolean {
  if (!hasErrors(set)) return true;
  io.err(`${what}: the config is invalid:\n`);
  for (const p of set.problems) if (p.severity === 'error') io.err(`  ${problemLine(p, 'annotations')}\n`);
  return false;
}

function validate(args: string[], io: Io): number {
  const { values, positionals } = parseArgs({ args, options: VALIDATE_OPTIONS, allowPositionals: true });
  const format = values.format ?? 'text';
  if (!['text', 'json', 'annotations', 'github'].includes(format))
    throw new UsageError(`unknown --format ${format}`);
  if (positionals.length > 0 && expandPaths(positionals).length === 0) {
    // Fails closed: a typo in a CI path must not pass as "nothing wrong".
    io.err(`ratelimit-config validate: no YAML file (*.yaml, *.yml) in ${positionals.join(', ')}\n`);
    return 1;
  }
  const loaded = loadSet(positionals, values, io);
  if (loaded.documents === loaded.skipped) {
    io.err(
      `ratelimit-config validate: no ratelimit config or ${RLC_KIND} in ${positionals.join(', ')}` +
        ` (${loaded.documents} document(s), all empty or of other kinds)\n`,
    );
    return 1;
  }
  // Rate limit quota buckets: a warning by default (only a service with RLQS on refuses it), an error with --rlqs.
  const set = hasErrors(loaded)
    ? loaded
    : {
        ...loaded,
        problems: [...loaded.problems, ...bucketProblems(loaded, values.rlqs ? 'error' : 'warning')],
      };
  const errors = set.problems.filter((p) => p.severity === 'error').length;
  const warnings = set.problems.length - errors;
  if (format === 'json') {
    io.out(
      JSON.stringify(
        {
          valid: errors === 0,
          errors,
          warnings,
          documents: set.documents,
          skipped: set.skipped,
          domains: [...set.domains.keys()],
          problems: set.problems,
        },
        null,
        2,
      ) + '\n',
    );
  } else {
    for (const p of set.problems) io.out(problemLine(p, format) + '\n');
    if (format === 'text') {
      io.out(
        `${errors === 0 ? 'valid' : 'invalid'}: ${errors} error(s), ${warnings} warning(s) in ${set.documents} document(s)` +
          `${set.skipped ? ` (${set.skipped} skipped: other kinds or empty)` : ''}; domains: ${[...set.domains.keys()].join(', ') || 'none'}\n`,
      );
    }
  }
  return errors === 0 ? 0 : 1;
}

function convert(args: string[], io: Io): number {
  const { values, positionals } = parseArgs({ args, options: CONVERT_OPTIONS, allowPositionals: true });
  const format = values.format ?? 'text';
  if (!['text', 'annotations', 'github'].includes(format))
    throw new UsageError(
      `unknown --format ${format} (text, annotations or github: how refused input is reported)`,
    );
  if (positionals.length === 0) throw new UsageError('no files or folders given');
  const sources = readSources(positionals);
  const result = convertSources(sources, {
    mergeDomainConfig: values['merge-domain-config'] ?? io.env.MERGE_DOMAIN_CONFIG === 'true',
    ...(values.namespace === undefined ? {} : { namespace: values.namespace }),
  });
  if (!result.ok) {
    if (result.message !== undefined) {
      io.err(`ratelimit-config convert: ${result.message}\n`);
      return 2;
    }
    const problems = result.set!.problems;
    for (const p of problems) io.err(problemLine(p, format) + '\n');
    const errors = problems.filter((p) => p.severity === 'error').length;
    io.err(`convert: the config is invalid: ${errors} error(s); nothing written\n`);
    return 1;
  }
  const { resources, check } = result;
  if (resources.length === 0) {
    io.err(`ratelimit-config convert: no ratelimit config document in ${positionals.join(', ')}\n`);
    return 1;
  }
  for (const p of check.problems) {
    const r = resources[p.document - 1];
    io.err(
      `convert: ${p.severity}: resource ${r?.name ?? '?'} (domain ${r?.domain ?? '?'}): ${p.field}: ${p.message}\n`,
    );
  }
  if (values.out === undefined) {
    io.out(resources.map((r) => r.yaml).join('---\n'));
    return 0;
  }
  mkdirSync(values.out, { recursive: true });
  for (const r of resources) {
    const file = join(values.out, `${r.name}.yaml`);
    writeFileSync(file, r.yaml);
    io.err(`${file}: domain ${r.domain} from ${r.files.join(', ')}\n`);
  }
  return 0;
}

function envoy(args: string[], io: Io): number {
  const { values } = parseArgs({ args, options: ENVOY_OPTIONS, allowPositionals: false });
  const headers = new Map<string, string>();
  for (const pair of values.header ?? []) {
    const eq = pair.indexOf('=');
    if (eq <= 0 || eq === pair.length - 1) throw new UsageError(`--header ${pair}: expected KEY=HEADER`);
    headers.set(pair.slice(0, eq), pair.slice(eq + 1).toLowerCase());
  }
  const matches = new Map<string, HeaderCondition>();
  for (const spec of values.match ?? []) {
    try {
      const { keyValue, condition } = parseMatch(spec);
      matches.set(keyValue, condition);
    } catch (err) {
      throw new UsageError((err as Error).message);
    }
  }
  const set = loadSet(values.config ?? [], values, io);
  if (!requireValid(set, 'envoy', io)) return 2;
  const domains = [...set.domains.keys()];
  const domain = values.domain ?? (domains.length === 1 ? domains[0]! : undefined);
  if (domain === undefined)
    throw new UsageError(
      `--domain is required: the config has ${domains.length} domains (${domains.join(', ')})`,
    );
  if (!set.domains.has(domain)) {
    io.err(`envoy: domain ${domain} is not in the config (domains: ${domains.join(', ') || 'none'})\n`);
    return 2;
  }
  const { entries, unmapped } = envoyRateLimits(set, domain, {
    headers,
    genericKeys: new Set(values['generic-key'] ?? []),
    matches,
  });
  if (unmapped.length > 0) {
    const byKey = new Map<string, string[]>();
    for (const u of unmapped) {
      const line = `${u.path}: ${u.reason}`;
      byKey.set(u.key, [...(byKey.get(u.key) ?? []), line]);
    }
    io.err(`envoy: no action for the key(s) ${[...byKey.keys()].join(', ')}:\n`);
    for (const lines of byKey.values()) for (const l of lines) io.err(`  ${l}\n`);
    io.err(
      "give each a source: --header KEY=HEADER (the header's value), --generic-key KEY (the value in the " +
        'config, a constant of the route) or --match KEY=VALUE:HEADER[=TEXT|~TEXT] (that value when the header matches)\n',
    );
    return 1;
  }
  io.out(formatEnvoyYaml(domain, entries));
  return 0;
}

const REQUEST = {
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

interface RequestValues {
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
function settingsFrom(values: RequestValues, io: Io): Settings {
  const env: Record<string, string | undefined> = { ...io.env };
  for (const f of values['env-file'] ?? []) Object.assign(env, parseEnv(readFileSync(f, 'utf8')));
  for (const pair of values.env ?? []) {
    const eq = pair.indexOf('=');
    if (eq <= 0) throw new UsageError(`--env ${pair}: expected NAME=VALUE`);
    env[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  return loadSettings(env);
}

function explainRequest(values: RequestValues, io: Io, settings: Settings) {
  if (!values.descriptor?.length) throw new UsageError('at least one --descriptor k=v[,k=v] is required');
  return explainWithBuckets(values, io, settings)?.list;
}

/** explain's work: the --descriptor requests, then each --bucket read as the descriptor it matches as. */
function explainWithBuckets(values: RequestValues, io: Io, settings: Settings) {
  if (!values.domain) throw new UsageError('--domain is required');
  if (!values.descriptor?.length && !values.bucket?.length)
    throw new UsageError('at least one --descriptor k=v[,k=v] (or --bucket k=v[,k=v]) is required');
  const descriptors = (values.descriptor ?? []).map((d) => {
    try {
      return parseDescriptor(d);
    } catch (err) {
      throw new UsageError((err as Error).message);
    }
  });
  const bucketMaps = (values.bucket ?? []).map((b) => {
    try {
      return parseBucket(b);
    } catch (err) {
      throw new UsageError((err as Error).message);
    }
  });
  const set = loadSet(values.config ?? [], values, io);
  if (!requireValid(set, 'explain', io)) return undefined;
  let buckets: BucketReading[] = [];
  if (bucketMaps.length > 0) {
    try {
      buckets = readBuckets(compileSet(set), values.domain, bucketMaps);
    } catch (err) {
      io.err(`explain: ${(err as Error).message}\n`);
      return undefined;
    }
  }
  let nowSeconds: number | undefined;
  if (values.now !== undefined) {
    nowSeconds = Number(values.now);
    if (!Number.isInteger(nowSeconds) || nowSeconds < 0) throw new UsageError('--now must be unix seconds');
  }
  const explainer = new Explainer(set);
  const opts = {
    cacheKeyPrefix: settings.cacheKeyPrefix,
    ...(nowSeconds === undefined ? {} : { nowSeconds }),
  };
  const list = explainer.explain(values.domain, descriptors.length > 0 ? descriptors : [], opts);
  const bucketList = buckets.map((b) =>
    b.descriptor === undefined ? undefined : explainer.explain(values.domain!, [[...b.descriptor]], opts)[0]!,
  );
  return { list, buckets, bucketList };
}

async function explain(args: string[], io: Io): Promise<number> {
  const { values } = parseArgs({ args, options: REQUEST, allowPositionals: false });
  const format = values.format ?? 'text';
  if (!['text', 'json'].includes(format)) throw new UsageError(`unknown --format ${format}`);
  const r = explainWithBuckets(values, io, settingsFrom(values, io));
  if (!r) return 2;
  const url = values['rlqs-url'];
  const timeoutMs = values.timeout === undefined ? 10_000 : Number(values.timeout) * 1000;
  if (!(timeoutMs > 0)) throw new UsageError('--timeout must be a positive number of seconds');
  const live: (LiveSubscriber[] | string)[] = [];
  if (url !== undefined) {
    for (const b of r.buckets) {
      try {
        live.push(await fetchAssignments(url, values.domain!, b.bucket, timeoutMs));
      } catch (err) {
        live.push(`cannot read ${url}/rlqs: ${(err as Error).message}`);
      }
    }
  }
  if (format === 'json') {
    const buckets = r.buckets.map((b, i) => ({
      bucket: b.bucket,
      descriptor: b.descriptor ?? null,
      explanation: r.bucketList[i] ?? null,
      ...(url === undefined ? {} : { assignments: live[i] }),
    }));
    io.out(JSON.stringify({ domain: values.domain, descriptors: r.list, buckets }, null, 2) + '\n');
    return 0;
  }
  if (r.list.length > 0) io.out(formatExplanations(values.domain!, r.list));
  r.buckets.forEach((b, i) => {
    io.out(formatBucketReading(b));
    const x = r.bucketList[i];
    if (x) io.out(formatExplanations(values.domain!, [x]));
    if (url !== undefined) {
      const l = live[i]!;
      io.out(typeof l === 'string' ? `  ${l}\n` : formatAssignments(url, l));
    }
  });
  return 0;
}

function diff(args: string[], io: Io): number {
  const { values, positionals } = parseArgs({ args, options: COMMON, allowPositionals: true });
  const format = values.format ?? 'markdown';
  if (!['markdown', 'json'].includes(format)) throw new UsageError(`unknown --format ${format}`);
  if (positionals.length !== 2) throw new UsageError('diff takes two paths: <old> <new>');
  const before = loadSet([positionals[0]!], values, io);
  const after = loadSet([positionals[1]!], values, io);
  if (
    !requireValid(before, `diff: ${positionals[0]}`, io) ||
    !requireValid(after, `diff: ${positionals[1]}`, io)
  ) {
    return 2;
  }
  const changes = diffSets(before, after);
  if (format === 'json') io.out(JSON.stringify({ changed: changes.length > 0, changes }, null, 2) + '\n');
  else io.out(formatDiffMarkdown(changes));
  return changes.length > 0 ? 1 : 0;
}

async function counters(args: string[], io: Io): Promise<number> {
  const { values, positionals } = parseArgs({ args, options: REQUEST, allowPositionals: true });
  const action = positionals[0];
  if ((action !== 'get' && action !== 'reset') || positionals.length !== 1) {
    throw new UsageError('counters get|reset');
  }
  const format = values.format ?? 'text';
  if (!['text', 'json'].includes(format)) throw new UsageError(`unknown --format ${format}`);
  if (!values.config?.length)
    throw new UsageError('--config is required (the rule gives the key, limit and window)');
  const settings = settingsFrom(values, io);
  const list = explainRequest(values, io, settings);
  if (!list) return 2;
  const reset = action === 'reset';
  if (reset && values.yes !== true) {
    io.err('counters reset deletes the counters of the current window; add --yes to do it\n');
    return 2;
  }
  const timeoutMs = values.timeout === undefined ? 10_000 : Number(values.timeout) * 1000;
  if (!(timeoutMs > 0) || !Number.isFinite(timeoutMs))
    throw new UsageError('--timeout must be a positive number of seconds');
  const deadline = Date.now() + timeoutMs;
  const within = `within ${timeoutMs / 1000} s`;
  // Every attempt of the store is bounded by --timeout too (REDIS_TIMEOUT may be longer).
  const bound = (r: RedisSettings): RedisSettings => {
    const t = r.timeoutMs > 0 ? Math.min(r.timeoutMs, timeoutMs) : timeoutMs;
    return { ...r, timeoutMs: t, staleRequestMs: t * 2 };
  };
  const client = new CounterClient({
    ...settings,
    redis: {
      ...settings.redis,
      main: bound(settings.redis.main),
      perSecond: settings.redis.perSecond && bound(settings.redis.perSecond),
    },
  });
  const where = (err: unknown) =>
    errorText(err).includes('REDIS_PERSECOND_URL=') && settings.redis.perSecond
      ? settings.redis.perSecond.url
      : settings.redis.main.url;
  try {
    try {
      await withDeadline(client.start(timeoutMs), timeoutMs);
    } catch (err) {
      throw new CliError(
        `ratelimit-config counters: cannot reach Redis at ${where(err)} ${within}${redisCause(err)}`,
      );
    }
    let readings;
    try {
      // A Redis that accepts the connection and then stops answering must not hang the command.
      readings = await withDeadline(client.read(list, reset), Math.max(1, deadline - Date.now()));
    } catch (err) {
      throw new CliError(
        err instanceof DeadlineError
          ? `ratelimit-config counters: no answer from Redis at ${where(err)} ${within}`
          : `ratelimit-config counters: reading from Redis at ${where(err)} failed${redisCause(err) || `: ${firstLine(err)}`}`,
      );
    }
    if (format === 'json')
      io.out(JSON.stringify({ domain: values.domain, counters: readings }, null, 2) + '\n');
    else io.out(formatReadings(list, readings));
    if (reset && !readings.some((r) => r.deleted === true)) {
      // A reset that changed nothing (wrong descriptor, prefix or deployment, or already empty)
      // must not look like one that worked.
      io.err(
        readings.length === 0
          ? 'counters reset: nothing deleted: none of these descriptors is counted\n'
          : 'counters reset: nothing deleted: no counter of these descriptors exists right now\n',
      );
      return 1;
    }
    return 0;
  } finally {
    // Closing never holds the exit either.
    await withDeadline(client.close(), 1000).catch(() => undefined);
  }
}

class DeadlineError extends Error {}

function withDeadline<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new DeadlineError(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([p, expired]).finally(() => clearTimeout(timer));
}

/** An error's message and the messages of its causes. */
function errorText(err: unknown): string {
  const parts: string[] = [];
  for (let e: unknown = err, i = 0; e !== undefined && e !== null && i < 5; i++) {
    parts.push(e instanceof Error ? e.message : String(e));
    e = e instanceof Error ? e.cause : undefined;
  }
  return parts.join(' ');
}

function firstLine(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).split('\n')[0]!.slice(0, 200);
}

/** Why Redis could not be reached, in words, when the error says (empty when it does not). */
function redisCause(err: unknown): string {
  const text = errorText(err);
  const causes: [RegExp, string][] = [
    [/ECONNREFUSED/, 'connection refused'],
    [/ENOTFOUND|EAI_AGAIN/, 'host not found'],
    [/WRONGPASS|NOAUTH|invalid password|invalid username-password/i, 'authentication failed'],
    [/ENOENT/, 'no such socket'],
    [/EHOSTUNREACH|ENETUNREACH/, 'host unreachable'],
    [/certificate|SSL|TLS/, 'TLS handshake failed'],
  ];
  for (const [re, why] of causes) if (re.test(text)) return ` (${why})`;
  return '';
}

const OPTIONS: Readonly<Record<Command, object>> = {
  validate: VALIDATE_OPTIONS,
  convert: CONVERT_OPTIONS,
  envoy: ENVOY_OPTIONS,
  explain: REQUEST,
  diff: COMMON,
  counters: REQUEST,
};

function isCommand(word: string | undefined): word is Command {
  return (COMMANDS as readonly (string | undefined)[]).includes(word);
}

/** `--help` / `-h` among a command's arguments (before a `--`). */
function wantsHelp(args: readonly string[]): boolean {
  for (const a of args) {
    if (a === '--') return false;
    if (a === '--help' || a === '-h') return true;
  }
  return false;
}

/** A usage error in one line, with a suggestion for a misspelt option, and where to find help. */
function usageMessage(command: Command | undefined, err: Error & { code?: string }): string {
  let message = err.message;
  if (err.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
    const option = /'([^']+)'/.exec(message)?.[1] ?? '';
    const names = command === undefined ? [] : Object.keys(OPTIONS[command]).map((o) => `--${o}`);
    const near = option.startsWith('--') ? suggest(option, names) : undefined;
    message = `unknown option ${option}${near === undefined ? '' : `; did you mean ${near}?`}`;
  } else if (err.code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') {
    message = message.replace(/^Option '(-[^ ']+)[^']*'.*argument missing$/, '$1 needs a value');
  } else if (err.code === 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL') {
    message = `unexpected argument ${/'([^']+)'/.exec(message)?.[1] ?? ''}`;
  }
  const where = command === undefined ? 'ratelimit-config' : `ratelimit-config ${command}`;
  const help = command === undefined ? `'ratelimit-config --help'` : `'ratelimit-config ${command} --help'`;
  return `${where}: ${message}\nSee ${help} for usage and examples.\n`;
}

/** A file system error as a person reads it (no errno, no syscall). */
function fsMessage(err: Error & { code?: string; path?: string }): string | undefined {
  const why: Record<string, string> = {
    ENOENT: 'no such file or directory',
    EACCES: 'permission denied',
    ENOTDIR: 'not a directory',
    EISDIR: 'is a directory',
    ELOOP: 'too many symbolic links',
  };
  const text = err.code === undefined ? undefined : why[err.code];
  return text === undefined || err.path === undefined ? undefined : `${err.path}: ${text}`;
}

/** Runs one command line; resolves with the exit status. */
export async function main(argv: readonly string[], io: Io = defaultIo): Promise<number> {
  const [first, ...rest] = argv;
  const command = isCommand(first) ? first : undefined;
  try {
    if (command !== undefined && wantsHelp(rest)) {
      io.out(COMMAND_HELP[command]);
      return 0;
    }
    switch (first) {
      case 'validate':
        return validate(rest, io);
      case 'convert':
        return convert(rest, io);
      case 'envoy':
        return envoy(rest, io);
      case 'explain':
        return await explain(rest, io);
      case 'diff':
        return diff(rest, io);
      case 'counters':
        return await counters(rest, io);
      case '--version':
      case 'version':
        io.out(`ratelimit-config ${packageVersion()}\n`);
        return 0;
      case 'help':
        if (rest[0] !== undefined) {
          if (!isCommand(rest[0])) throw new UsageError(unknownCommand(rest[0]));
          io.out(COMMAND_HELP[rest[0]]);
          return 0;
        }
        io.out(USAGE);
        return 0;
      case '-h':
      case '--help':
        io.out(USAGE);
        return 0;
      case undefined:
        io.err(USAGE);
        return 2;
      default:
        throw new UsageError(unknownCommand(first));
    }
  } catch (err) {
    const e = err as Error & { code?: string; path?: string };
    if (err instanceof UsageError || e.code?.startsWith('ERR_PARSE_ARGS')) io.err(usageMessage(command, e));
    else if (err instanceof CliError) io.err(`${err.message}\n`);
    else
      io.err(`ratelimit-config${command === undefined ? '' : ` ${command}`}: ${fsMessage(e) ?? e.message}\n`);
    return 2;
  }
}

function unknownCommand(word: string): string {
  const near = word.startsWith('-')
    ? suggest(word, ['--help', '--version'])
    : suggest(word, [...COMMANDS, 'help', 'version']);
  return `unknown ${word.startsWith('-') ? 'option' : 'command'} '${word}'${near === undefined ? '' : `; did you mean ${near}?`}`;
}
