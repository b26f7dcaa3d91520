// The bound on a config's compiled size: its descriptors, counted at every level of every domain
// (what the matcher and the rules grow with), against CONFIG_MAX_DESCRIPTORS. Every door (files, xDS
// pushes, the operator's and the command line's checks) builds through build.ts, which applies it, so a
// config too large for the pod's memory is refused at load with this error, like any invalid config,
// instead of growing the process until it is killed.
import { ConfigError } from './errors.js';
import type { DescriptorDoc } from './validate.js';

/**
 * CONFIG_MAX_DESCRIPTORS's default: what the chart's default memory limit holds with the margin
 * docs/performance.md derives (charts/ratelimit/values.yaml says how to size for more).
 */
export const DEFAULT_MAX_DESCRIPTORS = 100_000;

/** Descriptors in `entries`, nested ones included. */
export function countDescriptors(entries: readonly DescriptorDoc[] | undefined): number {
  if (entries === undefined) return 0;
  let n = entries.length;
  for (const e of entries) if (e.descriptors !== undefined) n += countDescriptors(e.descriptors);
  return n;
}

/** The error of a config whose descriptors pass `max`; `source` is the document that went past it. */
export function tooManyDescriptors(source: string, count: number, max: number): ConfigError {
  return new ConfigError(
    source,
    '',
    `error loading config: the config has ${count} descriptors (every level of every domain counted), ` +
      `more than the limit of ${max} (CONFIG_MAX_DESCRIPTORS); raise it together with the pod's memory limit`,
  );
}

/** Adds each document's descriptors to a running total and throws once the total passes `max`. */
export class DescriptorBudget {
  private total = 0;
  constructor(private readonly max: number = DEFAULT_MAX_DESCRIPTORS) {}

  add(source: string, count: number): void {
    this.total += count;
    if (this.total > this.max) throw tooManyDescriptors(source, this.total, this.max);
  }
}
