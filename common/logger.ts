// The one logger shape every binary and library part takes: pino's object-first methods, so a pino
// logger passes as is, and `silentLogger` for tests and callers that want no output. Nothing here
// depends on pino: the control plane, the operator and the xDS client accept any object of this shape.
export interface Logger {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

/** A Logger that drops everything. */
export const silentLogger: Logger = { debug() {}, info() {}, warn() {}, error() {} };
