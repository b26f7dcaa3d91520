// pino configured like the reference's logrus output:
//   LOG_FORMAT=json -> {"@timestamp": ..., "level": "warning", "@message": ...}
//   otherwise text  -> time="..." level=warning msg="..." (plus any extra fields as key=value)
import pino, { type Logger } from 'pino';

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

const LABEL: Record<string, string> = { warn: 'warning' };

function quote(v: unknown): string {
  const s = typeof v === 'string' ? v : JSON.stringify(v);
  return /^[A-Za-z0-9_.:/@+-]+$/.test(s) ? s : JSON.stringify(s);
}

/** A destination that rewrites pino's JSON lines as logrus-style text lines. */
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
      for (const [k, v] of Object.entries(rest)) text += ` ${k}=${quote(v)}`;
      out.write(text + '\n');
    },
  };
}

export function createLogger(
  opts: { level?: string; format?: 'text' | 'json' } = {},
  destination: { write(s: string): unknown } = process.stderr,
): Logger {
  const level = LEVELS[(opts.level ?? 'warn').toLowerCase()] ?? 'warn';
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
