// StatsD and DogStatsD over UDP through hot-shots. Counters arrive already aggregated (one line
// per changed counter per flush); lines are packed into datagrams of at most MAX_DATAGRAM bytes.
import StatsDClient, { type StatsD } from 'hot-shots';
import type { Logger } from '../../common/index.js';
import type { MogrifierMap } from './mogrifier.js';
import { gostatsTagSuffix, normalizeTags, type StatsSink, type TimerFlush } from './sink.js';

/** Fits one Ethernet frame with IP/UDP headers; what StatsD clients commonly use. */
const MAX_DATAGRAM = 1432;

export interface StatsdSinkOptions {
  host: string;
  port: number;
  /** EXTRA_TAGS: appended to names as `.__k=v` (StatsD) or sent as `#k:v` tags (DogStatsD). */
  extraTags?: Record<string, string>;
  logger?: Logger;
}

export interface DogStatsdSinkOptions extends StatsdSinkOptions {
  mogrifiers?: MogrifierMap;
}

/** hot-shots' raw send (used by its own child clients), for timings that carry `|@rate`. */
type RawSend = { send(message: string, tags?: string[]): void };

abstract class HotShotsSink implements StatsSink {
  protected readonly client: StatsD;
  private lastErrorLog = 0;

  constructor(
    opts: StatsdSinkOptions,
    dogstatsd: boolean,
    private readonly logger?: Logger,
  ) {
    this.client = new StatsDClient({
      host: opts.host,
      port: opts.port,
      protocol: 'udp',
      maxBufferSize: MAX_DATAGRAM,
      bufferFlushInterval: 1000,
      // Plain StatsD must not grow `|#tags` or Datadog extension fields from DD_* variables.
      includeDataDogTags: dogstatsd,
      ...(dogstatsd ? {} : { datadog: false, includeDatadogTelemetry: false }),
      errorHandler: (err) => this.onError(err),
    });
  }

  private onError(err: Error): void {
    const now = Date.now();
    if (now - this.lastErrorLog < 60_000) return;
    this.lastErrorLog = now;
    this.logger?.warn(`statsd sink: ${err.message}`);
  }

  protected timing(name: string, t: TimerFlush, tags: string[] | undefined): void {
    if (t.count <= t.samples.length) {
      for (const ms of t.samples) this.client.timing(name, ms, tags);
      return;
    }
    // A reservoir sample: tell the server the rate so its counts stay right.
    const rate = t.samples.length / t.count;
    const raw = this.client as unknown as RawSend;
    for (const ms of t.samples) raw.send(`${name}:${ms}|ms|@${Number(rate.toPrecision(6))}`, tags);
  }

  abstract flushCounter(name: string, delta: number): void;
  abstract flushTimer(name: string, timer: TimerFlush): void;

  flushed(): void {
    this.client.flush();
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.client.close(() => resolve()));
  }
}

/** Plain StatsD, the reference's default sink: `name[.__k=v...]:value|c`. */
export class StatsdSink extends HotShotsSink {
  private readonly suffix: string;

  constructor(opts: StatsdSinkOptions) {
    super(opts, false, opts.logger);
    this.suffix = gostatsTagSuffix(normalizeTags(opts.extraTags ?? {}));
  }

  flushCounter(name: string, delta: number): void {
    this.client.increment(name + this.suffix, delta);
  }

  flushTimer(name: string, timer: TimerFlush): void {
    this.timing(name + this.suffix, timer, undefined);
  }

  flushGauge(name: string, value: number): void {
    this.client.gauge(name + this.suffix, value);
  }
}

/** DogStatsD: extra tags as `#k:v`, names rewritten by the mogrifiers (with their tags). */
export class DogStatsdSink extends HotShotsSink {
  private readonly extra: string[];
  private readonly mogrifiers?: MogrifierMap;
  /** Mogrified name and tags per statistic name: names repeat every flush. */
  private readonly cache = new Map<string, { name: string; tags: string[] }>();

  constructor(opts: DogStatsdSinkOptions) {
    super(opts, true, opts.logger);
    this.extra = normalizeTags(opts.extraTags ?? {}).map(([k, v]) => `${k}:${v}`);
    this.mogrifiers = opts.mogrifiers;
  }

  private resolve(name: string): { name: string; tags: string[] } {
    let r = this.cache.get(name);
    if (!r) {
      const m = this.mogrifiers ? this.mogrifiers.mogrify(name) : { name, tags: [] };
      r = { name: m.name, tags: [...this.extra, ...m.tags] };
      if (this.cache.size < 100_000) this.cache.set(name, r);
    }
    return r;
  }

  flushCounter(name: string, delta: number): void {
    const r = this.resolve(name);
    this.client.increment(r.name, delta, r.tags);
  }

  flushTimer(name: string, timer: TimerFlush): void {
    const r = this.resolve(name);
    this.timing(r.name, timer, r.tags.length > 0 ? r.tags : undefined);
  }

  flushGauge(name: string, value: number): void {
    const r = this.resolve(name);
    this.client.gauge(r.name, value, r.tags);
  }
}
