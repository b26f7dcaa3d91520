// The service's logger is the common one (common/log.ts), so the three binaries write one format;
// kept as a module so the service's importers need not change.
export { createLogger, parseLogLevel, textDestination } from '../common/index.js';
