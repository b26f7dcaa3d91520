// The one logger shape every binary and library part takes: pino's methods (an object of fields first, or
// a message alone), so a pino logger (common/log.ts's createLogger) passes as is, and `silentLogger` for
// tests and callers that want no output. Nothing here depends on pino: any object of this shape will do.
export interface Logger {
  debug(obj: object | string, msg?: string): void;
  info(obj: object | string, msg?: string): void;
  warn(obj: object | string, msg?: string): void;
  error(obj: object | string, msg?: string): void;
  /** Whether lines of this level are written: a caller skips building a costly line when they are not. */
  isLevelEnabled(level: 'debug' | 'info' | 'warn' | 'error'): boolean;
  /** A logger that adds these fields to each line. */
  child(bindings: Record<string, unknown>): Logger;
}

/** A Logger that drops everything. */
export const silentLogger: Logger = {
  debug() {},
  info() {},
  warn() {},
  error() {},
  isLevelEnabled: () => false,
  child: () => silentLogger,
};
