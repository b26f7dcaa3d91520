// Reconnect backoff with the knobs of XDS_CLIENT_BACKOFF_*: the n-th wait (n from 0) is
// initial * factor^n, with jitter drawn uniformly from [initial, that], clamped to [initial, max].
// Once at max, later waits stay at max. A factor <= 1 (the reference's default is 0.5) never grows,
// so the wait stays at the initial interval. reset() after a stream delivered a response.

export interface BackoffOptions {
  /** XDS_CLIENT_BACKOFF_INITIAL_INTERVAL (reference default 10 s). */
  readonly initialMs: number;
  /** XDS_CLIENT_BACKOFF_MAX_INTERVAL (reference default 60 s). */
  readonly maxMs: number;
  /** XDS_CLIENT_BACKOFF_RANDOM_FACTOR: the per-attempt multiplier (reference default 0.5). */
  readonly randomFactor: number;
  /** XDS_CLIENT_BACKOFF_JITTER (reference default true). */
  readonly jitter: boolean;
}

export const DEFAULT_BACKOFF: BackoffOptions = {
  initialMs: 10_000,
  maxMs: 60_000,
  randomFactor: 0.5,
  jitter: true,
};

export class ExponentialBackoff {
  private attempt = 0;
  constructor(
    private readonly opts: BackoffOptions,
    private readonly random: () => number = Math.random,
  ) {}

  /** The wait before the next attempt; advances the attempt counter. */
  next(): number {
    const { initialMs, maxMs, randomFactor, jitter } = this.opts;
    const min = Math.max(0, initialMs);
    const max = Math.max(min, maxMs);
    let d = min * Math.pow(randomFactor > 0 ? randomFactor : 2, this.attempt);
    if (this.attempt < 1024) this.attempt++;
    if (!Number.isFinite(d) || d > max) d = max;
    if (jitter && d > min) d = min + this.random() * (d - min);
    if (d < min) d = min;
    return Math.round(d);
  }

  reset(): void {
    this.attempt = 0;
  }

  get attempts(): number {
    return this.attempt;
  }
}
