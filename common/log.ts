// The one logger factory of the three binaries (ratelimit, ratelimit-control-plane, ratelimit-operator),
// so one log stack sees one format: the reference service's logrus output.
//   text (default) -> time="2026-01-02T03:04:05.678Z" level=warning msg="..." key=value ...
//   json           -> {"level":"warning","@timestamp":"...","@message":"...","key":...}
// Levels are words (debug, info, warning, error, fatal) in both formats. A text value is quoted once,
// and only when it needs it, so a multi-line message (a YAML error) reads as one quoted string.
import pino, { type Logger as PinoLogger } from 'pino';

export type LogFormat = 'text' | 'json';
export const LOG_FORMATS: readonly LogFormat[] = ['text', 'json'];

/** Level names accepted (case-insensitive), mapped to pino's: logrus' words as well as pino's. */
const LEVELS: Record<string, string> = {
  trace: 'trace',
  debug: 'debug',
  info: 'info',
  warn: 'warn',
  warning: 'warn',
  error: 'error',
  fatal: 'fatal',
  panic: 'fatal',
};

/** Pino's level name as logrus spells it. */
const LABEL: Record<string, string> = { warn: 'warning' };

/** The pino level for a LOG_LEVEL / --log-level value, or undefined when it names no level. */
export function parseLogLevel(value: string): string | undefined {
  return LEVELS[value.toLowerCase()];
}

/** Formats a LOG_FORMAT / --log-format value, or undefined when it is neither text nor json. */
export function parseLogFormat(value: string): LogFormat | undefined {
  const v = value.toLowerCase();
  return v === 'text' || v === 'json' ? v : undefined;
}

// The characters logrus leaves unquoted (a colon, a space or a quote makes it quote the value).
const BARE = /^[A-Za-z0-9_./@^+-]+$/;

/** A text value as logrus writes it: bare when it is one plain word, else quoted once. */
function quote(v: unknown): string {
  let s: string;
  if (typeof v === 'string') s = v;
  else if (v !== null && typeof v === 'object' && typeof (v as { message?: unknown }).message === 'string')
    s = (v as { message: string }).message; // an error (pino's serialized err): its message
  else s = JSON.stringify(v) ?? String(v);
  return BARE.test(s) ? s : JSON.stringify(s);
}

/** A destination that rewrites the JSON lines pino writes as logrus-style text lines. */
export function textDestination(out: { write(s: string): unknown }): { write(line: string): void } {
  return {
    write(line: string) {
      let o: Record<string, unknown>;
      try {
        o = JSON.parse(line);
      } catch {
        out.write(line);
        return;
      }
      const { '@timestamp': time, level, '@message': msg, ...rest } = o;
      let text = `time=${quote(time)} level=${level} msg=${quote(msg ?? '')}`;
      for (const [k, v] of Object.entries(rest)) if (v !== undefined) text += ` ${k}=${quote(v)}`;
      out.write(text + '\n');
    },
  };
}

export interface LogOptions {
  /** A level name (see parseLogLevel); an unknown one falls back to `defaultLevel`. */
  level?: string;
  /** The level when `level` is missing or unknown (default warn, the reference service's). */
  defaultLevel?: string;
  format?: LogFormat;
}

/** A logger writing the common format to `destination` (stderr by default). */
export function createLogger(
  opts: LogOptions = {},
  destination: { write(s: string): unknown } = process.stderr,
): PinoLogger {
  const fallback = parseLogLevel(opts.defaultLevel ?? 'warn') ?? 'warn';
  const level = (opts.level && parseLogLevel(opts.level)) || fallback;
  const options: pino.LoggerOptions = {
    level,
    base: null,
    messageKey: '@message',
    timestamp: () => `,"@timestamp":"${new Date().toISOString()}"`,
    formatters: { level: (label) => ({ level: LABEL[label] ?? label }) },
  };
  if (opts.format === 'json') return pino(options, destination as pino.DestinationStream);
  return pino(options, textDestination(destination) as pino.DestinationStream);
}

/**
 * The log options of a command-line binary: the --log-level / --log-format flag, else the
 * LOG_LEVEL / LOG_FORMAT environment variable, else info and text. Throws on a value that names
 * no level or format (a typo should not silently change what is logged).
 */
export function cliLogOptions(
  flags: { level?: string; format?: string },
  env: NodeJS.ProcessEnv = process.env,
): { level: string; format: LogFormat } {
  const levelText = flags.level ?? (env.LOG_LEVEL || undefined) ?? 'info';
  const formatText = flags.format ?? (env.LOG_FORMAT || undefined) ?? 'text';
  const from = (flag: string | undefined, name: string) =>
    flag !== undefined ? `--${name}` : name.toUpperCase().replace('-', '_');
  const level = parseLogLevel(levelText);
  if (!level)
    throw new Error(
      `${from(flags.level, 'log-level')}: not a level (trace, debug, info, warn, error): ${levelText}`,
    );
  const format = parseLogFormat(formatText);
  if (!format) throw new Error(`${from(flags.format, 'log-format')}: text or json, not ${formatText}`);
  return { level, format };
}
