// ratelimit-config: validate, convert, envoy, explain, diff and counters, on the service's own config model.
// Exit status: 0 fine (diff: no change), 1 invalid config or nothing to check (validate, convert), a key
// without a source (envoy), changes found (diff) or nothing deleted (counters reset), 2 usage error,
// unreadable or invalid input where a valid config is needed, or Redis failure.
// This file dispatches and words the failures; each command is one file of commands/ (its options and
// its run), the work it does is in the files beside this one.
import * as convert from './commands/convert.js';
import * as counters from './commands/counters.js';
import * as diff from './commands/diff.js';
import * as envoy from './commands/envoy.js';
import * as explain from './commands/explain.js';
import * as validate from './commands/validate.js';
import { CliError, UsageError, type Io } from './commands/common.js';
import { COMMAND_HELP, COMMANDS, packageVersion, suggest, USAGE, type Command } from './help.js';

export type { Io };

const defaultIo: Io = {
  out: (t) => process.stdout.write(t),
  err: (t) => process.stderr.write(t),
  env: process.env,
};

export { USAGE };

/** Each command's options, for the suggestion on a misspelt one. */
const OPTIONS: Readonly<Record<Command, object>> = {
  validate: validate.options,
  convert: convert.options,
  envoy: envoy.options,
  explain: explain.options,
  diff: diff.options,
  counters: counters.options,
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
        return validate.run(rest, io);
      case 'convert':
        return convert.run(rest, io);
      case 'envoy':
        return envoy.run(rest, io);
      case 'explain':
        return await explain.run(rest, io);
      case 'diff':
        return diff.run(rest, io);
      case 'counters':
        return await counters.run(rest, io);
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
