// statsd_exporter's metric mapping, the part the reference's Prometheus sink relies on:
// glob rules (`*` is one dot-free component, anchored) tried first, then regex rules
// (unanchored, like Go's FindStringSubmatch) in file order; `$1`/`${1}`/`$name` templates in
// names and labels; match_metric_type; action: drop; per-rule or default timer_type, buckets
// and quantiles. A name no rule maps becomes an escaped Prometheus name without labels.
import { parse as parseYaml } from 'yaml';

export type StatsdType = 'counter' | 'gauge' | 'observer';
export type TimerType = 'histogram' | 'summary';

export class MappingError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MappingError';
  }
}

export interface Quantile {
  quantile: number;
  error: number;
}

export interface MetricMapping {
  readonly match: string;
  readonly matchType: 'glob' | 'regex';
  readonly regex: RegExp;
  readonly name: string;
  readonly labels: readonly [string, string][];
  readonly timerType: TimerType;
  readonly buckets: readonly number[];
  readonly quantiles: readonly Quantile[];
  readonly help: string;
  readonly action: 'map' | 'drop';
  readonly matchMetricType?: StatsdType;
}

export interface MappingResult {
  /** Prometheus metric name. */
  name: string;
  labels: Record<string, string>;
  /** Undefined for unmapped names. */
  mapping?: MetricMapping;
  drop: boolean;
}

/** Prometheus' DefBuckets, statsd_exporter's default. */
export const DEFAULT_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const DEFAULT_QUANTILES: Quantile[] = [
  { quantile: 0.5, error: 0.05 },
  { quantile: 0.9, error: 0.01 },
  { quantile: 0.99, error: 0.001 },
];

const STATSD_METRIC = '[a-zA-Z_](-?[a-zA-Z0-9_])+';
const METRIC_LINE = new RegExp(`^(\\*\\.|${STATSD_METRIC}\\.)+(\\*|${STATSD_METRIC})$`);
const TEMPLATE = '(\\$\\{?\\w+\\}?)';
const METRIC_NAME = new RegExp(`^([a-zA-Z_]|${TEMPLATE})([a-zA-Z0-9_]|${TEMPLATE})*$`);
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/** Go's regexp Expand: `$$`, `$1`, `${1}`, `$name`, `${name}` (longest word after `$`). */
export function expandTemplate(template: string, m: RegExpExecArray): string {
  if (!template.includes('$')) return template;
  return template.replace(/\$(\$|\{(\w+)\}|(\w+))/g, (_all, tok: string, braced?: string, bare?: string) => {
    if (tok === '$') return '$';
    const ref = braced ?? bare!;
    if (/^\d+$/.test(ref)) return m[Number(ref)] ?? '';
    return m.groups?.[ref] ?? '';
  });
}

/** statsd_exporter's escape for names no rule maps: invalid characters become '_'. */
export function escapeMetricName(name: string): string {
  let out = name.replace(/[^a-zA-Z0-9_]/g, '_');
  if (/^[0-9]/.test(out)) out = '_' + out;
  return out;
}

function asNumberList(v: unknown, where: string): number[] | undefined {
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v) || v.some((x) => typeof x !== 'number'))
    throw new MappingError(`${where}: buckets must be a list of numbers`);
  return v.length > 0 ? (v as number[]) : undefined;
}

function asQuantiles(v: unknown, where: string): Quantile[] | undefined {
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v)) throw new MappingError(`${where}: quantiles must be a list`);
  if (v.length === 0) return undefined;
  return v.map((q: { quantile?: unknown; error?: unknown }) => {
    if (typeof q?.quantile !== 'number') throw new MappingError(`${where}: quantile must be a number`);
    return { quantile: q.quantile, error: typeof q.error === 'number' ? q.error : 0.01 };
  });
}

function asTimerType(v: unknown, where: string): TimerType | undefined {
  if (v === undefined || v === null || v === '' || v === 'default') return undefined;
  if (v === 'histogram' || v === 'summary') return v;
  throw new MappingError(`${where}: invalid timer_type '${String(v)}'`);
}

export class MetricMapper {
  readonly mappings: readonly MetricMapping[];
  private readonly globs: readonly MetricMapping[];
  private readonly regexes: readonly MetricMapping[];
  private readonly cache = new Map<string, MappingResult>();

  constructor(yamlText: string) {
    let doc: unknown;
    try {
      doc = parseYaml(yamlText);
    } catch (err) {
      throw new MappingError(`mapping YAML: ${(err as Error).message}`);
    }
    const root = (doc ?? {}) as { defaults?: Record<string, unknown>; mappings?: unknown };
    const d = root.defaults ?? {};
    const defTimer = asTimerType(d.timer_type ?? d.observer_type, 'defaults') ?? 'summary';
    const defBuckets = asNumberList(d.buckets, 'defaults') ?? DEFAULT_BUCKETS;
    const defQuantiles = asQuantiles(d.quantiles, 'defaults') ?? DEFAULT_QUANTILES;
    const defMatchType = d.match_type === 'regex' ? 'regex' : 'glob';
    if (root.mappings !== undefined && !Array.isArray(root.mappings))
      throw new MappingError('mappings must be a list');
    const list = (root.mappings ?? []) as Record<string, unknown>[];
    this.mappings = list.map((m, i) => {
      const where = `mappings[${i}]`;
      const match = m.match;
      if (typeof match !== 'string' || match === '') throw new MappingError(`${where}: match is required`);
      const name = m.name;
      const action = m.action === 'drop' ? 'drop' : 'map';
      if (action === 'map' && (typeof name !== 'string' || name === ''))
        throw new MappingError(`line ${i}: metric mapping didn't set a metric name`);
      if (typeof name === 'string' && name !== '' && !METRIC_NAME.test(name))
        throw new MappingError(`${where}: metric name '${name}' is not a valid Prometheus name`);
      const labels: [string, string][] = [];
      for (const [k, v] of Object.entries((m.labels ?? {}) as Record<string, unknown>)) {
        if (!LABEL_NAME.test(k)) throw new MappingError(`invalid label key: ${k}`);
        labels.push([k, String(v)]);
      }
      const matchType = m.match_type === 'regex' ? 'regex' : m.match_type === 'glob' ? 'glob' : defMatchType;
      let regex: RegExp;
      if (matchType === 'glob') {
        if (!METRIC_LINE.test(match)) throw new MappingError(`invalid match: ${match}`);
        regex = new RegExp('^' + match.replace(/\./g, '\\.').replace(/\*/g, '([^.]*)') + '$');
      } else {
        try {
          // Go's named-group syntax (?P<name>...) is (?<name>...) in JavaScript.
          regex = new RegExp(match.replace(/\(\?P</g, '(?<'));
        } catch (err) {
          throw new MappingError(`invalid regex ${match} in mapping: ${(err as Error).message}`);
        }
      }
      const mmt = m.match_metric_type;
      if (mmt !== undefined && mmt !== 'counter' && mmt !== 'gauge' && mmt !== 'observer')
        throw new MappingError(`${where}: invalid match_metric_type '${String(mmt)}'`);
      return {
        match,
        matchType,
        regex,
        name: typeof name === 'string' ? name : '',
        labels,
        timerType: asTimerType(m.timer_type ?? m.observer_type, where) ?? defTimer,
        buckets: asNumberList(m.buckets, where) ?? defBuckets,
        quantiles: asQuantiles(m.quantiles, where) ?? defQuantiles,
        help: typeof m.help === 'string' ? m.help : '',
        action,
        matchMetricType: mmt as StatsdType | undefined,
      } satisfies MetricMapping;
    });
    this.globs = this.mappings.filter((m) => m.matchType === 'glob');
    this.regexes = this.mappings.filter((m) => m.matchType === 'regex');
  }

  /** Label names any mapping may give a (static) metric name: Prometheus needs them up front. */
  labelNamesFor(metricName: string, mapping?: MetricMapping): string[] {
    const names = new Set<string>();
    for (const m of this.mappings) if (m.name === metricName) for (const [k] of m.labels) names.add(k);
    if (mapping) for (const [k] of mapping.labels) names.add(k);
    return [...names];
  }

  private tryList(list: readonly MetricMapping[], name: string, type: StatsdType): MappingResult | undefined {
    for (const m of list) {
      const match = m.regex.exec(name);
      if (!match) continue;
      if (m.matchMetricType !== undefined && m.matchMetricType !== type) continue;
      if (m.action === 'drop') return { name: '', labels: {}, mapping: m, drop: true };
      const labels: Record<string, string> = {};
      for (const [k, v] of m.labels) labels[k] = expandTemplate(v, match);
      return { name: expandTemplate(m.name, match), labels, mapping: m, drop: false };
    }
    return undefined;
  }

  /** Maps one statsd name; results are cached because the same names come back every flush. */
  map(name: string, type: StatsdType): MappingResult {
    const key = type + '\u0000' + name;
    let r = this.cache.get(key);
    if (r) return r;
    r = this.tryList(this.globs, name, type) ??
      this.tryList(this.regexes, name, type) ?? { name: escapeMetricName(name), labels: {}, drop: false };
    if (this.cache.size < 100_000) this.cache.set(key, r);
    return r;
  }
}
