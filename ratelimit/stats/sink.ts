// What a statistics sink receives at each flush: counter deltas and timer samples, by the
// reference's dotted names. Sinks never sit on the decision path; only the flusher calls them.

export interface TimerFlush {
  /** Samples in milliseconds (a uniform sample when `count` is larger). */
  samples: readonly number[];
  /** Calls the samples stand for. */
  count: number;
}

export interface StatsSink {
  /** A counter increased by `delta` (> 0) since the previous flush. */
  flushCounter(name: string, delta: number): void;
  /** A gauge's current value (sent at every flush). */
  flushGauge?(name: string, value: number): void;
  /** Timer observations since the previous flush. */
  flushTimer(name: string, timer: TimerFlush): void;
  /** End of one flush: send what is buffered. */
  flushed(): void;
  close(): Promise<void>;
}

/** Characters that would break a StatsD line or the gostats tag encoding. */
const TAG_UNSAFE = /[.:|=,#@\s]/g;

export function sanitizeTagPart(s: string): string {
  return s.replace(TAG_UNSAFE, '_');
}

/** Extra tags sorted by key with unsafe characters replaced, as [key, value] pairs. */
export function normalizeTags(tags: Record<string, string>): [string, string][] {
  return Object.keys(tags)
    .sort()
    .map((k) => [sanitizeTagPart(k), sanitizeTagPart(tags[k])]);
}

/**
 * lyft/gostats' encoding of tags for plain StatsD: appended to the name as `.__key=value`
 * (sorted by key). The reference's StatsD output carries EXTRA_TAGS this way.
 */
export function gostatsTagSuffix(tags: readonly [string, string][]): string {
  let out = '';
  for (const [k, v] of tags) out += `.__${k}=${v}`;
  return out;
}
