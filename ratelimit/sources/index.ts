// Public face of sources: where configs come from (files, an xDS control plane), one contract for both
// (source.ts), and the worker-thread pool that parses YAML and decodes xDS messages for them.
export * from './source.js';
export * from './file.js';
export * from './parse-pool.js';
export * from './backoff.js';
export * from './xds-client.js';
export * from './xds.js';
