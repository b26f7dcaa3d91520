// Public face of settings/: one Settings object parsed once from the environment at startup (grouped
// by the part that reads it), and the environment reader with its typed, bounded values.
export * from './settings.js';
export * from './env.js';
