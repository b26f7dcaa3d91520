// Public face of stats/: the statistics store the service counts in, and its sinks (statsd, DogStatsD,
// Prometheus, the log), flushed by one pipeline built from the settings.
export * from './store.js';
export * from './sink.js';
export { StatsFlusher, type StatsFlusherOptions } from './flusher.js';
export {
  StatsdSink,
  DogStatsdSink,
  type StatsdSinkOptions,
  type DogStatsdSinkOptions,
} from './statsd-sink.js';
export { LoggingSink } from './logging-sink.js';
export { MogrifierMap, MogrifierError, mogrifiersFromEnv } from './mogrifier.js';
export { PrometheusSink, type PrometheusSinkOptions } from './prometheus/prometheus-sink.js';
export { MetricMapper, MappingError, escapeMetricName, DEFAULT_BUCKETS } from './prometheus/mapper.js';
export { DEFAULT_MAPPING_YAML } from './prometheus/default-mapping.js';
export { createStatsPipeline, type StatsPipeline } from './pipeline.js';
