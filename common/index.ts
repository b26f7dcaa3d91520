// Public face of common/: what every binary needs once (the logger shape and the one log format, the
// one bounded file reader, TLS files read and reloaded, listen addresses, the metrics and health endpoint). The bottom layer: it imports nothing of ours.
export * from './logger.js';
export * from './log.js';
export * from './bounded-file.js';
export * from './tls-files.js';
export * from './http-endpoint.js';
export * from './program.js';
