// diff: the semantic difference between two config sets, as pods would serve them, in markdown for a
// pull request. Entries are identified by their path of composite keys (domain, then key or
// key=value per level), so reordering, comments and formatting are not changes.
import { parseUnit, UNIT_SECONDS } from '../../ratelimit/config/index.js';
import { isObject, type ConfigSet } from '../../control-plane/config-set/index.js';

export type ChangeKind =
  | 'added'
  | 'removed'
  | 'raised'
  | 'lowered'
  | 'window changed'
  | 'made unlimited'
  | 'no longer unlimited'
  | 'made shadow'
  | 'unshadowed'
  | 'exempted'
  | 'changed';

export interface Change {
  readonly kind: ChangeKind;
  readonly domain: string;
  /** `key=value > key` from the top level down. */
  readonly descriptor: string;
  readonly before: string;
  readonly after: string;
  /** `file:line` in the new set (the old one for removals). */
  readonly where: string;
}

interface FlatEntry {
  readonly descriptor: string;
  readonly where: string;
  readonly rateLimit: Record<string, unknown> | undefined;
  readonly shadow: boolean;
  readonly hasChildren: boolean;
  /** Other entry fields (quota_mode, detailed_metric, ...), compared as text. */
  readonly other: string;
}

const ENTRY_FIELDS = new Set(['key', 'value', 'rate_limit', 'shadow_mode', 'descriptors']);

function flatten(set: ConfigSet): Map<string, Map<string, FlatEntry>> {
  const out = new Map<string, Map<string, FlatEntry>>();
  for (const served of set.domains.values()) {
    const entries = new Map<string, FlatEntry>();
    const visit = (
      d: unknown,
      parent: string,
      where: string,
      field: string,
      locate: (f: string) => number,
    ) => {
      if (!isObject(d)) return;
      const value = typeof d.value === 'string' && d.value !== '' ? d.value : undefined;
      const self = value === undefined ? String(d.key) : `${String(d.key)}=${value}`;
      const descriptor = parent === '' ? self : `${parent} > ${self}`;
      const children = Array.isArray(d.descriptors) ? d.descriptors : [];
      const other = Object.keys(d)
        .filter((k) => !ENTRY_FIELDS.has(k))
        .sort()
        .map((k) => `${k}=${JSON.stringify(d[k])}`)
        .join(' ');
      entries.set(descriptor, {
        descriptor,
        where: `${where}:${locate(field)}`,
        rateLimit: isObject(d.rate_limit) ? d.rate_limit : undefined,
        shadow: d.shadow_mode === true,
        hasChildren: children.length > 0,
        other,
      });
      children.forEach((c, j) => visit(c, descriptor, where, `${field}.descriptors[${j}]`, locate));
    };
    served.descriptors.forEach((d, i) => {
      const o = served.origins[i]!;
      visit(d, '', o.source.file, o.field, (f) => o.source.locate(f).line);
    });
    out.set(served.domain, entries);
  }
  return out;
}

function unitOf(rl: Record<string, unknown>): string {
  return typeof rl.unit === 'string' ? (parseUnit(rl.unit) ?? rl.unit).toLowerCase() : '';
}

/** `10 per minute`, `unlimited`, `no limit`; with ` (shadow)` when shadowed. */
function describe(e: FlatEntry | undefined): string {
  if (e === undefined) return '—';
  const rl = e.rateLimit;
  let s: string;
  if (rl === undefined) s = e.hasChildren ? 'no limit (nested rules only)' : 'no limit';
  else if (rl.unlimited === true) s = 'unlimited';
  else s = `${Number(rl.requests_per_unit ?? 0)} per ${unitOf(rl)}`;
  return e.shadow ? `${s} (shadow)` : s;
}

/** Requests per second of a limited rule, for raised/lowered. */
function rate(rl: Record<string, unknown>): number {
  const unit = typeof rl.unit === 'string' ? parseUnit(rl.unit) : undefined;
  return unit === undefined ? 0 : Number(rl.requests_per_unit ?? 0) / UNIT_SECONDS[unit];
}

function restOf(rl: Record<string, unknown> | undefined): string {
  if (rl === undefined) return '';
  return Object.keys(rl)
    .filter((k) => k !== 'requests_per_unit' && k !== 'unit' && k !== 'unlimited')
    .sort()
    .map((k) => `${k}=${JSON.stringify(rl[k])}`)
    .join(' ');
}

function compare(domain: string, a: FlatEntry, b: FlatEntry): Change[] {
  const out: Change[] = [];
  const add = (kind: ChangeKind) =>
    out.push({
      kind,
      domain,
      descriptor: b.descriptor,
      before: describe(a),
      after: describe(b),
      where: b.where,
    });
  const ra = a.rateLimit;
  const rb = b.rateLimit;
  if (ra !== undefined && rb === undefined) add(b.hasChildren ? 'removed' : 'exempted');
  else if (ra === undefined && rb !== undefined) add('added');
  else if (ra !== undefined && rb !== undefined) {
    const ua = ra.unlimited === true;
    const ub = rb.unlimited === true;
    if (!ua && ub) add('made unlimited');
    else if (ua && !ub) add('no longer unlimited');
    else if (!ua && !ub) {
      const x = rate(ra);
      const y = rate(rb);
      if (y > x) add('raised');
      else if (y < x) add('lowered');
      else if (unitOf(ra) !== unitOf(rb)) add('window changed');
    }
    if (restOf(ra) !== restOf(rb)) {
      out.push({
        kind: 'changed',
        domain,
        descriptor: b.descriptor,
        before: restOf(ra) || '—',
        after: restOf(rb) || '—',
        where: b.where,
      });
    }
  }
  if (!a.shadow && b.shadow) add('made shadow');
  else if (a.shadow && !b.shadow) add('unshadowed');
  if (a.other !== b.other) {
    out.push({
      kind: 'changed',
      domain,
      descriptor: b.descriptor,
      before: a.other || '—',
      after: b.other || '—',
      where: b.where,
    });
  }
  return out;
}

/** Every change from `before` to `after`, by domain and descriptor path. */
export function diffSets(before: ConfigSet, after: ConfigSet): Change[] {
  const a = flatten(before);
  const b = flatten(after);
  const changes: Change[] = [];
  const domains = [...new Set([...a.keys(), ...b.keys()])].sort();
  for (const domain of domains) {
    const ea = a.get(domain) ?? new Map<string, FlatEntry>();
    const eb = b.get(domain) ?? new Map<string, FlatEntry>();
    for (const [path, x] of ea) {
      const y = eb.get(path);
      if (y === undefined) {
        if (x.rateLimit !== undefined || !x.hasChildren) {
          changes.push({
            kind: 'removed',
            domain,
            descriptor: path,
            before: describe(x),
            after: '—',
            where: x.where,
          });
        }
      } else {
        changes.push(...compare(domain, x, y));
      }
    }
    for (const [path, y] of eb) {
      if (ea.has(path)) continue;
      if (y.rateLimit !== undefined || !y.hasChildren) {
        changes.push({
          kind: y.rateLimit === undefined ? 'exempted' : 'added',
          domain,
          descriptor: path,
          before: '—',
          after: describe(y),
          where: y.where,
        });
      }
    }
  }
  return changes;
}

function cell(s: string): string {
  return s.replace(/\|/g, '\\|').replace(/\n/g, ' ');
}

/** Markdown for a pull request: a summary line and one table row per change. */
export function formatDiffMarkdown(changes: readonly Change[]): string {
  if (changes.length === 0) return '**Rate limits:** no changes.\n';
  const counts = new Map<ChangeKind, number>();
  for (const c of changes) counts.set(c.kind, (counts.get(c.kind) ?? 0) + 1);
  const summary = [...counts].map(([k, n]) => `${n} ${k}`).join(', ');
  const lines = [
    `**Rate limits:** ${changes.length} change${changes.length === 1 ? '' : 's'} (${summary}).`,
    '',
    '| change | domain | descriptor | before | after | where |',
    '|---|---|---|---|---|---|',
    ...changes.map(
      (c) =>
        `| ${c.kind} | ${cell(c.domain)} | \`${cell(c.descriptor)}\` | ${cell(c.before)} | ${cell(c.after)} | ${cell(c.where)} |`,
    ),
  ];
  return lines.join('\n') + '\n';
}
