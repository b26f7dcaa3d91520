// Chooses the sinks from the settings, as the reference's runner does, and builds the flusher:
//   DISABLE_STATS=true   -> no sink (counters still kept in memory for the debug /stats page)
//   USE_DOG_STATSD=true  -> DogStatsD to STATSD_HOST:STATSD_PORT, with DOG_STATSD_MOGRIFIERS
//   USE_STATSD=true      -> StatsD over UDP to STATSD_HOST:STATSD_PORT (the default)
//   otherwise            -> the log, at debug level (unless Prometheus is the only output)
//   USE_PROMETHEUS=true  -> in addition, a Prometheus endpoint on PROMETHEUS_ADDR/PROMETHEUS_PATH
//                           (PROMETHEUS_MAPPER_YAML read once at start by the bounded file reader)
// A sink's client (hot-shots, prom-client) loads in start(), only when that sink is on.
import { readBoundedFileSync, type Logger } from '../../common/index.js';
import type { Env, Settings } from '../settings/index.js';
import { StatsFlusher } from './flusher.js';
import { LoggingSink } from './logging-sink.js';
import { mogrifiersFromEnv } from './mogrifier.js';
import type { PrometheusSink } from './prometheus/prometheus-sink.js';
import type { StatsSink } from './sink.js';
import type { StatsStore } from './store.js';

/** Bound on PROMETHEUS_MAPPER_YAML (a mapping is a few kilobytes). */
export const MAPPER_FILE_MAX_BYTES = 1024 * 1024;

export interface StatsPipeline {
  flusher: StatsFlusher;
  /** USE_PROMETHEUS: the /metrics sink, from start() on. */
  prometheus?: PrometheusSink;
  start(): Promise<void>;
  close(): Promise<void>;
}

export function createStatsPipeline(
  settings: Settings['stats'],
  deps: { store: StatsStore; logger: Logger; env?: Env },
): StatsPipeline {
  const { store, logger } = deps;
  const sinks: StatsSink[] = [];
  // The flusher holds the (still empty) sink list; start() adds the sinks.
  const flusher = new StatsFlusher({ store, sinks, intervalMs: settings.flushIntervalMs, logger });
  const extraTags = settings.extraTags;
  // What the settings name is read and checked here (a bad mogrifier or an unreadable mapping file fails
  // the construction); the clients load in start().
  const sink: 'dogstatsd' | 'statsd' | 'log' | undefined = settings.disabled
    ? undefined
    : settings.useDogStatsd
      ? 'dogstatsd'
      : settings.useStatsd
        ? 'statsd'
        : settings.usePrometheus
          ? undefined
          : 'log';
  const mogrifiers =
    sink === 'dogstatsd'
      ? mogrifiersFromEnv(settings.dogStatsdMogrifiers, deps.env ?? process.env)
      : undefined;
  const mappingYaml =
    !settings.disabled && settings.usePrometheus && settings.prometheusMapperYaml
      ? readBoundedFileSync(settings.prometheusMapperYaml, { maxBytes: MAPPER_FILE_MAX_BYTES }).toString()
      : undefined;
  const pipeline: StatsPipeline = {
    flusher,
    async start() {
      if (sink === 'dogstatsd' || sink === 'statsd') {
        const { DogStatsdSink, StatsdSink } = await import('./statsd-sink.js');
        const at = { host: settings.statsdHost, port: settings.statsdPort, extraTags, logger };
        sinks.push(sink === 'dogstatsd' ? new DogStatsdSink({ ...at, mogrifiers }) : new StatsdSink(at));
      } else if (sink === 'log') {
        sinks.push(new LoggingSink(logger, extraTags));
      }
      if (!settings.disabled && settings.usePrometheus) {
        const { PrometheusSink } = await import('./prometheus/prometheus-sink.js');
        const prometheus = new PrometheusSink({
          addr: settings.prometheusAddr,
          path: settings.prometheusPath,
          mappingYaml,
          extraTags,
          logger,
          beforeScrape: () => flusher.flush(),
          responseTimeAsMilliseconds: settings.prometheusResponseTimeAsMilliseconds,
        });
        sinks.push(prometheus);
        pipeline.prometheus = prometheus;
        await prometheus.start();
      }
      flusher.start();
    },
    close: () => flusher.close(),
  };
  return pipeline;
}
