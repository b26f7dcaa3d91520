// Chooses the sinks from the settings, as the reference's runner does, and builds the flusher:
//   DISABLE_STATS=true   -> no sink (counters still kept in memory for the debug /stats page)
//   USE_DOG_STATSD=true  -> DogStatsD to STATSD_HOST:STATSD_PORT, with DOG_STATSD_MOGRIFIERS
//   USE_STATSD=true      -> StatsD over UDP to STATSD_HOST:STATSD_PORT (the default)
//   otherwise            -> the log, at debug level (unless Prometheus is the only output)
//   USE_PROMETHEUS=true  -> in addition, a Prometheus endpoint on PROMETHEUS_ADDR/PROMETHEUS_PATH
//                           (PROMETHEUS_MAPPER_YAML read once at start by the bounded file reader)
import { readBoundedFileSync, type Logger } from '../../common/index.js';
import type { Env, Settings } from '../settings/index.js';
import { StatsFlusher } from './flusher.js';
import { LoggingSink } from './logging-sink.js';
import { mogrifiersFromEnv } from './mogrifier.js';
import { PrometheusSink } from './prometheus/prometheus-sink.js';
import type { StatsSink } from './sink.js';
import { DogStatsdSink, StatsdSink } from './statsd-sink.js';
import type { StatsStore } from './store.js';

/** Bound on PROMETHEUS_MAPPER_YAML (a mapping is a few kilobytes). */
export const MAPPER_FILE_MAX_BYTES = 1024 * 1024;

export interface StatsPipeline {
  flusher: StatsFlusher;
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
  let prometheus: PrometheusSink | undefined;
  // The flusher holds the (still empty) sink list; sinks are added below.
  const flusher = new StatsFlusher({ store, sinks, intervalMs: settings.flushIntervalMs, logger });
  if (!settings.disabled) {
    const extraTags = settings.extraTags;
    if (settings.useDogStatsd) {
      sinks.push(
        new DogStatsdSink({
          host: settings.statsdHost,
          port: settings.statsdPort,
          extraTags,
          logger,
          mogrifiers: mogrifiersFromEnv(settings.dogStatsdMogrifiers, deps.env ?? process.env),
        }),
      );
    } else if (settings.useStatsd) {
      sinks.push(new StatsdSink({ host: settings.statsdHost, port: settings.statsdPort, extraTags, logger }));
    } else if (!settings.usePrometheus) {
      sinks.push(new LoggingSink(logger, extraTags));
    }
    if (settings.usePrometheus) {
      prometheus = new PrometheusSink({
        addr: settings.prometheusAddr,
        path: settings.prometheusPath,
        mappingYaml: settings.prometheusMapperYaml
          ? readBoundedFileSync(settings.prometheusMapperYaml, { maxBytes: MAPPER_FILE_MAX_BYTES }).toString()
          : undefined,
        extraTags,
        logger,
        beforeScrape: () => flusher.flush(),
        responseTimeAsMilliseconds: settings.prometheusResponseTimeAsMilliseconds,
      });
      sinks.push(prometheus);
    }
  }
  return {
    flusher,
    prometheus,
    async start() {
      await prometheus?.start();
      flusher.start();
    },
    close: () => flusher.close(),
  };
}
