// USE_STATSD=false: statistics go to the log at debug level, one line per value, in the shape
// of lyft/gostats' logging sink that the reference uses (src/stats/logger.go):
//   {"level":"debug","ts":1700000000.123456,"logger":"gostats.loggingsink","msg":"flushing counter",
//    "json":{"name":"ratelimit.service.config_load_success","type":"counter","value":"1.000000"}}
import type { Logger } from '../../common/index.js';
import { gostatsTagSuffix, normalizeTags, type StatsSink, type TimerFlush } from './sink.js';

export class LoggingSink implements StatsSink {
  private readonly suffix: string;

  constructor(
    private readonly logger: Logger,
    extraTags: Record<string, string> = {},
    private readonly now: () => number = Date.now,
  ) {
    this.suffix = gostatsTagSuffix(normalizeTags(extraTags));
  }

  private line(name: string, type: string, value: number): void {
    const json: Record<string, string> = { type, value: value.toFixed(6) };
    if (name !== '') json.name = name + this.suffix;
    this.logger.debug(
      JSON.stringify({
        level: 'debug',
        ts: Number((this.now() / 1000).toFixed(6)),
        logger: 'gostats.loggingsink',
        msg: `flushing ${type}`,
        json,
      }),
    );
  }

  flushCounter(name: string, delta: number): void {
    if (this.logger.isLevelEnabled('debug')) this.line(name, 'counter', delta);
  }

  flushTimer(name: string, timer: TimerFlush): void {
    if (!this.logger.isLevelEnabled('debug')) return;
    for (const ms of timer.samples) this.line(name, 'timer', ms);
  }

  flushGauge(name: string, value: number): void {
    if (this.logger.isLevelEnabled('debug')) this.line(name, 'gauge', value);
  }

  flushed(): void {
    if (this.logger.isLevelEnabled('debug')) this.line('', 'all stats', 0);
  }

  async close(): Promise<void> {}
}
