// USE_PROMETHEUS: statistics mapped to Prometheus metrics (statsd_exporter rules, the default
// mapping or PROMETHEUS_MAPPER_YAML) in a prom-client registry owned by this sink, served on
// PROMETHEUS_ADDR + PROMETHEUS_PATH. Counters stay counters; timers become a histogram or a
// summary as the rule's timer_type says, observed in seconds.
import type { Logger } from '../../../common/index.js';
import { EndpointServer, metricsEndpoint } from '../../../common/index.js';
import { collectDefaultMetrics, Counter, Gauge, Registry, Summary } from 'prom-client';
import { normalizeTags, type StatsSink, type TimerFlush } from '../sink.js';
import { AggregatedHistogram } from './aggregated-histogram.js';
import { DEFAULT_MAPPING_YAML } from './default-mapping.js';
import { MetricMapper, type StatsdType } from './mapper.js';

export interface PrometheusSinkOptions {
  /** PROMETHEUS_ADDR: `host:port`, `:port` (all interfaces) or `[v6]:port`. */
  addr: string;
  /** PROMETHEUS_PATH. */
  path: string;
  /** Mapping YAML text; the built-in mapping when absent. */
  mappingYaml?: string;
  /** EXTRA_TAGS, added to every metric as labels. */
  extraTags?: Record<string, string>;
  logger?: Logger;
  /** Called before each scrape so the page shows what was counted up to now. */
  beforeScrape?: () => void;
  /** process_* and nodejs_* metrics (the reference exports go_* and process_*). */
  defaultMetrics?: boolean;
  /**
   * PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS: with the built-in mapping, the response time histogram
   * observes milliseconds (its name still ends in `_seconds`), as the reference's flag of that name
   * does for dashboards written against its older output. A custom mapping is left as it is.
   */
  responseTimeAsMilliseconds?: boolean;
}

/** The built-in mapping's metric that PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS keeps in milliseconds. */
const RESPONSE_TIME_METRIC = 'ratelimit_service_response_time_seconds';

type Metric =
  | { kind: 'counter'; m: Counter }
  | { kind: 'gauge'; m: Gauge }
  | { kind: 'histogram'; m: AggregatedHistogram }
  | { kind: 'summary'; m: Summary };

export class PrometheusSink implements StatsSink {
  readonly registry = new Registry();
  readonly mapper: MetricMapper;
  private readonly metrics = new Map<string, Metric>();
  private readonly extraLabels: Record<string, string>;
  private readonly server: EndpointServer;
  private conflictLogged = new Set<string>();
  /** Events dropped because a name was already used by another metric type (statsd_exporter counts these too). */
  conflicts = 0;
  /** Observer metric names whose samples stay in milliseconds. */
  private readonly millisecondMetrics: ReadonlySet<string>;

  constructor(private readonly opts: PrometheusSinkOptions) {
    this.mapper = new MetricMapper(opts.mappingYaml ?? DEFAULT_MAPPING_YAML);
    this.millisecondMetrics = new Set(
      opts.responseTimeAsMilliseconds === true && opts.mappingYaml === undefined
        ? [RESPONSE_TIME_METRIC]
        : [],
    );
    this.extraLabels = Object.fromEntries(
      normalizeTags(opts.extraTags ?? {}).map(([k, v]) => [k.replace(/[^a-zA-Z0-9_]/g, '_'), v]),
    );
    if (opts.defaultMetrics !== false) collectDefaultMetrics({ register: this.registry });
    const scrape = metricsEndpoint(this.registry, opts.beforeScrape, (err) =>
      opts.logger?.warn(`prometheus: flush before scrape failed: ${err.message}`),
    );
    this.server = new EndpointServer(opts.addr, { [opts.path]: scrape }, 'PROMETHEUS_ADDR');
  }

  async start(): Promise<void> {
    await this.server.start();
    this.opts.logger?.info(`listening for prometheus on ${this.server.boundAddress} path ${this.opts.path}`);
  }

  get port(): number {
    return this.server.port;
  }

  private conflict(name: string, kind: string): undefined {
    this.conflicts++;
    if (!this.conflictLogged.has(name)) {
      this.conflictLogged.add(name);
      this.opts.logger?.warn(`prometheus: ${name} is already registered with another type; ${kind} dropped`);
    }
    return undefined;
  }

  private resolve(
    statName: string,
    type: StatsdType,
  ): { metric: Metric; labels: Record<string, string>; name: string } | undefined {
    const r = this.mapper.map(statName, type);
    if (r.drop) return undefined;
    const labels = { ...this.extraLabels, ...r.labels };
    const want = type === 'counter' || type === 'gauge' ? type : (r.mapping?.timerType ?? 'summary');
    let metric = this.metrics.get(r.name);
    if (metric) {
      if (metric.kind !== want) return this.conflict(r.name, want);
      return { metric, labels, name: r.name };
    }
    const labelNames = [
      ...new Set([...Object.keys(this.extraLabels), ...this.mapper.labelNamesFor(r.name, r.mapping)]),
    ];
    // Rules without a help text (a PROMETHEUS_MAPPER_YAML's, or no rule at all) say where the metric
    // comes from: the first statistic seen under this name.
    const help =
      r.mapping?.help ||
      (r.mapping
        ? `Mapped from StatsD statistics such as ${statName} (the mapping rule has no help text)`
        : `The StatsD statistic ${statName} (no mapping rule names it)`);
    const common = { name: r.name, help, labelNames, registers: [this.registry] };
    try {
      if (want === 'counter') metric = { kind: 'counter', m: new Counter(common) };
      else if (want === 'gauge') metric = { kind: 'gauge', m: new Gauge(common) };
      else if (want === 'histogram')
        metric = {
          kind: 'histogram',
          m: new AggregatedHistogram(r.name, help, r.mapping?.buckets ?? [], this.registry),
        };
      else
        metric = {
          kind: 'summary',
          m: new Summary({ ...common, percentiles: (r.mapping?.quantiles ?? []).map((q) => q.quantile) }),
        };
    } catch (err) {
      // A name prom-client already holds (e.g. a default process_* metric).
      this.opts.logger?.warn(`prometheus: cannot register ${r.name}: ${(err as Error).message}`);
      return this.conflict(r.name, want);
    }
    this.metrics.set(r.name, metric);
    return { metric, labels, name: r.name };
  }

  flushCounter(name: string, delta: number): void {
    const r = this.resolve(name, 'counter');
    if (r && r.metric.kind === 'counter') r.metric.m.inc(r.labels, delta);
  }

  flushTimer(name: string, timer: TimerFlush): void {
    const r = this.resolve(name, 'observer');
    if (!r || r.metric.kind === 'counter' || r.metric.kind === 'gauge') return;
    // StatsD timers are milliseconds; Prometheus wants seconds (statsd_exporter divides too).
    const seconds = this.millisecondMetrics.has(r.name)
      ? timer.samples
      : timer.samples.map((ms) => ms / 1000);
    if (r.metric.kind === 'histogram') {
      // A reservoir sample stands for timer.count calls: _count stays exact.
      r.metric.m.observeMany(r.labels, seconds, timer.count);
    } else {
      const child = r.metric.m.labels(r.labels);
      for (const s of seconds) child.observe(s);
    }
  }

  flushGauge(name: string, value: number): void {
    const r = this.resolve(name, 'gauge');
    if (r && r.metric.kind === 'gauge') r.metric.m.set(r.labels, value);
  }

  flushed(): void {}

  async close(): Promise<void> {
    await this.server.close();
    this.registry.clear();
  }
}
