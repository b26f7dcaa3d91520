// Compiling one entry's rate_limit / rate_limits into the immutable rule the matcher returns, and the
// rule's /rlconfig line(s), written from the rule when /rlconfig is asked for (not kept per rule: for a
// 10k-descriptor config they were 20,000 arrays and 10,000 strings more for each reload to build and
// for every major GC to mark).
import type { ConfigFeature, LimitSpec, RateLimitRule, Unit } from './types.js';
import { UNIT_SECONDS, parseUnit } from './units.js';
import type { DescriptorDoc, LimitDoc } from './validate.js';

export const NO_REPLACES: readonly string[] = Object.freeze([]);
export const NO_LIMITS: readonly LimitSpec[] = Object.freeze([]);
const NO_DOCS: readonly LimitDoc[] = Object.freeze([]);

export function compileLimit(l: LimitDoc, name: string): LimitSpec {
  const unit = parseUnit(l.unit ?? '') ?? 'SECOND';
  const algorithm = l.algorithm ?? 'fixed_window';
  const requestsPerUnit = l.requests_per_unit ?? 0;
  return Object.freeze({
    algorithm,
    requestsPerUnit,
    unit,
    unitSeconds: UNIT_SECONDS[unit],
    burst: algorithm === 'token_bucket' ? (l.burst ?? requestsPerUnit) : 0,
    name,
    ...(l.quota_unit === undefined || l.quota_unit === 'requests' ? {} : { quotaUnit: l.quota_unit }),
  });
}

/**
 * The /rlconfig line of one limit: the reference's format, plus the algorithm when not the default.
 * Without its newline: dump() adds the name (when asked) and the newline.
 */
function dumpLimit(
  statKey: string,
  unit: string,
  l: LimitSpec | undefined,
  rpu: number,
  shadow: boolean,
  quota: boolean,
) {
  let line = `${statKey}: unit=${unit} requests_per_unit=${rpu}, shadow_mode: ${shadow}, quota_mode: ${quota}`;
  if (l !== undefined && l.algorithm !== 'fixed_window') line += `, algorithm: ${l.algorithm}`;
  if (l !== undefined && l.algorithm === 'token_bucket') line += `, burst: ${l.burst}`;
  return line;
}

/**
 * Appends the /rlconfig lines of `rule` to `out`: one per limit, or one for an unlimited rule; with
 * `names`, each followed by its limit's name.
 */
export function dumpRule(rule: RateLimitRule, names: boolean, out: string[]): void {
  const end = (line: string, name: string) => out.push(names ? `${line}, name: ${name}\n` : `${line}\n`);
  if (rule.limits.length === 0) {
    // Unlimited: no limit; the reference prints UNKNOWN for a unit it was not given.
    const unit = rule.unitSeconds === 0 ? 'UNKNOWN' : rule.unit;
    end(
      dumpLimit(rule.statKey, unit, undefined, rule.requestsPerUnit, rule.shadowMode, rule.quotaMode),
      rule.ruleName,
    );
    return;
  }
  for (const l of rule.limits)
    end(dumpLimit(rule.statKey, l.unit, l, l.requestsPerUnit, rule.shadowMode, rule.quotaMode), l.name);
}

export function compileRule(entry: DescriptorDoc, statKey: string, path: string): RateLimitRule | undefined {
  const rl = entry.rate_limit;
  const list = entry.rate_limits;
  if (rl === undefined && list === undefined) return undefined;
  const shadowMode = entry.shadow_mode === true;
  const metadata = entry.metadata === undefined ? {} : { metadata: Object.freeze({ ...entry.metadata }) };
  const failureMode = entry.failure_mode === undefined ? {} : { failureMode: entry.failure_mode };
  if (list !== undefined) {
    // Validation guarantees 1..8 limits, each with a valid unit.
    const ruleName = path;
    const limits = Object.freeze(list.map((l, i) => compileLimit(l, `${ruleName}[${i}]`)));
    const first = limits[0]!;
    return Object.freeze({
      requestsPerUnit: first.requestsPerUnit,
      unit: first.unit,
      unitSeconds: first.unitSeconds,
      name: '',
      ruleName,
      unlimited: false,
      shadowMode,
      quotaMode: entry.quota_mode === true,
      ...failureMode,
      replaces: NO_REPLACES,
      statKey,
      ...metadata,
      limits,
      scripted: true,
    });
  }
  const r = rl!;
  const unlimited = r.unlimited === true;
  const parsed = r.unit === undefined ? undefined : parseUnit(r.unit);
  // Validation guarantees a unit unless unlimited. An unlimited rule never reaches the limiter; its
  // unit is a placeholder and unitSeconds 0 (the reference keeps UNKNOWN there).
  const unit: Unit = parsed ?? 'SECOND';
  const requestsPerUnit = r.requests_per_unit ?? 0;
  const replaces = r.replaces === undefined ? NO_REPLACES : Object.freeze(r.replaces.map((x) => x.name));
  const ruleName = r.name !== undefined && r.name !== '' ? r.name : path;
  const limit = unlimited ? undefined : compileLimit(r, ruleName);
  return Object.freeze({
    requestsPerUnit,
    unit,
    unitSeconds: parsed === undefined ? 0 : UNIT_SECONDS[parsed],
    name: r.name ?? '',
    ruleName,
    unlimited,
    shadowMode,
    quotaMode: entry.quota_mode === true,
    ...failureMode,
    replaces,
    statKey,
    ...metadata,
    limits: limit === undefined ? NO_LIMITS : Object.freeze([limit]),
    scripted: limit !== undefined && limit.algorithm !== 'fixed_window',
  });
}

/**
 * Adds the features the entries' rules use (RateLimitConfig.features), walking nested entries: more than
 * one limit per rule, and the algorithms beyond the fixed window. The same rules as compileRule's.
 */
export function addFeatures(entries: readonly DescriptorDoc[], out: Set<ConfigFeature>): void {
  for (const e of entries) {
    const list = e.rate_limits;
    if (list !== undefined && list.length > 1) out.add('rate_limits');
    const rl = e.rate_limit;
    const limits = list ?? (rl !== undefined && rl.unlimited !== true ? [rl] : NO_DOCS);
    for (const l of limits) {
      if (l.algorithm === 'sliding_window') out.add('sliding_window');
      else if (l.algorithm === 'token_bucket') out.add('token_bucket');
    }
    if (e.descriptors !== undefined) addFeatures(e.descriptors, out);
  }
}
