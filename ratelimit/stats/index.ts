// Public face of stats/: the statistics store the service counts in, and its sinks (statsd, DogStatsD,
// Prometheus, the log), flushed by one pipeline built from the settings. The StatsD and Prometheus sinks
// are not exported here: their clients load only when a setting asks for them (pipeline.ts), so they
// are imported from their own modules.
export * from './store.js';
export * from './sink.js';
export { StatsFlusher, type StatsFlusherOptions } from './flusher.js';
export { LoggingSink } from './logging-sink.js';
export { MogrifierMap, MogrifierError, mogrifiersFromEnv } from './mogrifier.js';
export { createStatsPipeline, type StatsPipeline } from './pipeline.js';
