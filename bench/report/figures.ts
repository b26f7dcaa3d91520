// Helpers for phases that turn their records into table rows (Figure: ours, reference, ratio, target).
import { stat } from '../harness/measure.js';
import type { Sample } from '../harness/measure.js';
import { evaluateTarget, type Figure, type FigureKey, type TargetRule } from './table.js';
import type { BenchResults } from './results.js';

/** Commands in flight at the edges of a window are counted on one side only: ±2 % is counting noise. */
export const COUNT_TOLERANCE = 0.02;

/** The shape of a sample; runs before shapes used 4 connections and 64 calls in flight. */
export const shapeOf = (s: Sample): string => s.shape ?? '4x16';
/** The driver of a sample; runs before drivers used ours. */
export const driverOf = (s: Sample): string => s.driver ?? 'loadgen';

/** The (shape, driver) pairs of the samples matching `f`, in the order they were measured. */
export function variantsOf(
  samples: Sample[],
  f: (s: Sample) => boolean,
): { shape: string; driver: string }[] {
  const seen = new Map<string, { shape: string; driver: string }>();
  for (const s of samples)
    if (f(s)) {
      const v = { shape: shapeOf(s), driver: driverOf(s) };
      seen.set(`${v.shape} ${v.driver}`, v);
    }
  return [...seen.values()];
}

/** Row name suffix naming the shape and driver, e.g. `[2x50, go]`. */
export const variantLabel = (v: { shape: string; driver: string }): string => `[${v.shape}, ${v.driver}]`;

/** Returns an `add` that appends a figure (ours and, when the run had it, the reference) to `out`. */
export function figureAdder(r: BenchResults, out: Figure[]) {
  const hasRef = r.meta.reference != null;
  return (
    group: string,
    name: string,
    unit: string,
    better: Figure['better'],
    pick: (k: string) => number[],
    target?: TargetRule,
    key?: FigureKey,
  ): void => {
    const f: Figure = { group, name, unit, better, ours: stat(pick('ours')) };
    if (hasRef) f.reference = stat(pick('reference'));
    if (key) f.key = key;
    if (target) f.target = evaluateTarget(target, f);
    if (f.ours.n > 0 || (f.reference?.n ?? 0) > 0) out.push(f);
  };
}

/** `pick` for a per-service record: the numbers of service `k`, none when it was not measured. */
export const pickRec =
  <T>(rec: Record<string, T>, f: (v: T) => number[]) =>
  (k: string): number[] =>
    rec[k] ? f(rec[k]) : [];
