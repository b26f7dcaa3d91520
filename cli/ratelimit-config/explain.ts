// explain: which rule a request descriptor matches, why, and the cache key it counts under.
// Every decision is the service's: the limit comes from the compiled config's getLimit, the cache
// key from the limiter's cacheKey. To say which entry matched at each level (and where the walk
// stopped) without a second matcher, a probe config is compiled from the same entries with a named
// rule on every entry; the service's matcher, asked for each prefix of the request, names the entry
// it reached at that depth. A rule counted by the limit script (sliding_window, token_bucket, several
// rate_limits) is explained with the keys the limiter's buildLimitCheck names for it.
import {
  compileConfig,
  type DescriptorEntry,
  type LimitMatch,
  type LimitSpec,
  type RateLimitConfig,
  type RateLimitRule,
} from '../../ratelimit/config/index.js';
import { buildLimitCheck, taggedKeyBase } from '../../ratelimit/counting/index.js';
import { cacheKey, resetSeconds, windowStart } from '../../ratelimit/limiter/index.js';
import { compileSet, isObject, type ConfigSet } from '../../control-plane/config-set/index.js';
import type { SourceDocument } from '../../control-plane/config-set/index.js';

/** An entry of the served config, with where it is written. */
export interface EntryInfo {
  readonly key: string;
  readonly value: string | undefined;
  readonly source: SourceDocument;
  readonly field: string;
  readonly line: number;
  readonly hasRateLimit: boolean;
  readonly hasChildren: boolean;
  /** Entries of the level below (empty without children). */
  readonly children: readonly EntryInfo[];
}

/** Where a config entry is, for output. */
export interface EntryRef {
  readonly key: string;
  readonly value?: string;
  readonly file: string;
  /** 1-based document index in the file. */
  readonly document: number;
  readonly field: string;
  readonly line: number;
}

export interface LevelStep {
  readonly depth: number;
  readonly request: DescriptorEntry;
  /** exact: key and value; wildcard: a value pattern; default: the key alone (any value, a counter per value). */
  readonly how: 'exact' | 'wildcard' | 'default';
  readonly entry: EntryRef;
}

function refOf(e: EntryInfo): EntryRef {
  return {
    key: e.key,
    ...(e.value === undefined ? {} : { value: e.value }),
    file: e.source.file,
    document: e.source.index,
    field: e.field,
    line: e.line,
  };
}

export interface RuleExplanation {
  readonly file: string;
  readonly document: number;
  readonly field: string;
  readonly line: number;
  readonly statKey: string;
  readonly requestsPerUnit: number;
  readonly unit: string;
  /** The algorithm of a single limit; with several rate_limits, theirs joined by '+'. */
  readonly algorithm: string;
  /** Every limit of the rule (one unless rate_limits lists several). */
  readonly limits: readonly LimitExplanation[];
  readonly name: string;
  /** The rule's name in headers, dynamic metadata, logs and statistics (RateLimitRule.ruleName). */
  readonly ruleName: string;
  readonly unlimited: boolean;
  readonly shadowMode: boolean;
  readonly quotaMode: boolean;
  readonly replaces: readonly string[];
}

export interface LimitExplanation {
  readonly algorithm: string;
  readonly requestsPerUnit: number;
  readonly unit: string;
  /** token_bucket only: hits admitted at once from a full bucket. */
  readonly burst?: number;
  /** The limit's name in headers, dynamic metadata, logs and statistics (LimitSpec.name). */
  readonly name: string;
}

/** The keys one limit counts under right now. */
export interface LimitKeys extends LimitExplanation {
  /** fixed_window: the window's counter; sliding_window: current then previous window; token_bucket: the bucket. */
  readonly keys: readonly string[];
  /** What the keys hold, in words (HOLDS). */
  readonly holds: string;
}

/**
 * What each algorithm's keys hold. A reservation is a hit, a settle more hits or a refund
 * (is_negative_hits), so every key holds their net; no key keeps what was refunded apart.
 */
export const HOLDS: Readonly<Record<LimitSpec['algorithm'], string>> = {
  fixed_window: 'the hits charged in this window: every hit added, every refund taken off (down to 0)',
  sliding_window:
    'the hits charged in the current and in the previous window, each net of refunds (a refund takes from the current first); the limit decides on current + previous weighted by the part of it still inside the sliding period',
  token_bucket:
    "the bucket's theoretical arrival time as ms:ticks:rate; how far it is ahead of now is the debt, the hits charged and not yet refilled (a hit moves it forward one emission interval, a refund back, never before now)",
};

/** What `counters` needs to read a scripted rule's state (kept out of the JSON output). */
export interface ScriptedCounter {
  /** The descriptor's hash-tagged key base (taggedKeyBase). */
  readonly tagged: string;
  readonly rule: RateLimitRule;
}

const scripted = new WeakMap<DescriptorExplanation, ScriptedCounter>();

/** The scripted rule behind a counted explanation; undefined for reference fixed windows. */
export function scriptedCounterOf(x: DescriptorExplanation): ScriptedCounter | undefined {
  return scripted.get(x);
}

export interface DescriptorExplanation {
  readonly descriptor: readonly DescriptorEntry[];
  readonly matched: boolean;
  readonly steps: readonly LevelStep[];
  readonly rule?: RuleExplanation;
  /** Absent when not counted (no match, unlimited, replaced); for a scripted rule, its first key. */
  readonly cacheKey?: string;
  /** Per limit, the keys counted right now (absent when not counted). */
  readonly limitKeys?: readonly LimitKeys[];
  /** Reference fixed windows only: the window's start and the seconds until it ends. */
  readonly windowStart?: number;
  readonly resetsInSeconds?: number;
  /** Counted in the store? (false: no rule, unlimited, or replaced by another descriptor's rule). */
  readonly counted: boolean;
  readonly replacedBy?: readonly number[];
  /** Why nothing matches, or why the match is not counted. */
  readonly reasons: readonly string[];
}

export interface ExplainOptions {
  readonly cacheKeyPrefix?: string;
  /** Unix seconds (default: now). */
  readonly nowSeconds?: number;
}

/** The served entries with ids: the probe config's rule names. */
class EntryIndex {
  readonly byId: EntryInfo[] = [];
  readonly roots = new Map<string, EntryInfo[]>();
  readonly probeDocs: { name: string; document: unknown }[] = [];

  constructor(set: ConfigSet) {
    for (const served of set.domains.values()) {
      const roots: EntryInfo[] = [];
      const probe = served.descriptors.map((d, i) => {
        const origin = served.origins[i]!;
        return this.add(d, origin.source, origin.field, roots);
      });
      this.roots.set(served.domain, roots);
      this.probeDocs.push({ name: served.domain, document: { domain: served.domain, descriptors: probe } });
    }
  }

  /** Registers an entry (and its children); returns its probe entry. */
  private add(d: unknown, source: SourceDocument, field: string, level: EntryInfo[]): unknown {
    const e = isObject(d) ? d : {};
    const children: EntryInfo[] = [];
    const list = Array.isArray(e.descriptors) ? e.descriptors : [];
    const info: EntryInfo = {
      key: String(e.key),
      value: typeof e.value === 'string' && e.value !== '' ? e.value : undefined,
      source,
      field,
      line: source.locate(field).line,
      hasRateLimit: isObject(e.rate_limit),
      hasChildren: list.length > 0,
      children,
    };
    const id = this.byId.length;
    this.byId.push(info);
    level.push(info);
    const probeChildren = list.map((c, j) => this.add(c, source, `${field}.descriptors[${j}]`, children));
    return {
      key: e.key,
      ...(info.value === undefined ? {} : { value: info.value }),
      rate_limit: { unit: 'second', requests_per_unit: 1, name: `#${id}` },
      ...(probeChildren.length > 0 ? { descriptors: probeChildren } : {}),
    };
  }
}

function show(entries: readonly DescriptorEntry[]): string {
  return entries.map((e) => `${e.key}=${e.value}`).join(',');
}

function showEntry(e: { key: string; value?: string | undefined }): string {
  return e.value === undefined ? `${e.key} (any value)` : `${e.key}=${e.value}`;
}

function limitOf(l: LimitSpec): LimitExplanation {
  return {
    algorithm: l.algorithm,
    requestsPerUnit: l.requestsPerUnit,
    unit: l.unit,
    ...(l.algorithm === 'token_bucket' ? { burst: l.burst } : {}),
    name: l.name,
  };
}

function howMatched(entry: EntryInfo, req: DescriptorEntry): LevelStep['how'] {
  if (entry.value === undefined) return 'default';
  return entry.value === req.value ? 'exact' : 'wildcard';
}

export class Explainer {
  private readonly config: RateLimitConfig;
  private readonly probe: RateLimitConfig;
  private readonly index: EntryIndex;

  constructor(set: ConfigSet) {
    this.config = compileSet(set);
    this.index = new EntryIndex(set);
    this.probe = compileConfig(this.index.probeDocs);
  }

  get domains(): readonly string[] {
    return this.config.domains;
  }

  /** The service's match, or undefined. */
  getLimit(domain: string, entries: readonly DescriptorEntry[]): LimitMatch | undefined {
    return this.config.getLimit(domain, { entries });
  }

  /** The entry the service's matcher reaches at each depth of the request, until it stops. */
  private walk(domain: string, entries: readonly DescriptorEntry[]): EntryInfo[] {
    const path: EntryInfo[] = [];
    for (let k = 1; k <= entries.length; k++) {
      const m = this.probe.getLimit(domain, { entries: entries.slice(0, k) });
      if (!m) break;
      path.push(this.index.byId[Number(m.rule.name.slice(1))]!);
    }
    return path;
  }

  private ruleOf(rule: RateLimitRule, entry: EntryInfo): RuleExplanation {
    return {
      file: entry.source.file,
      document: entry.source.index,
      field: entry.field,
      line: entry.line,
      statKey: rule.statKey,
      requestsPerUnit: rule.requestsPerUnit,
      unit: rule.unit,
      algorithm: rule.limits.length === 0 ? 'none' : rule.limits.map((l) => l.algorithm).join('+'),
      limits: rule.limits.map(limitOf),
      name: rule.name,
      ruleName: rule.ruleName,
      unlimited: rule.unlimited,
      shadowMode: rule.shadowMode,
      quotaMode: rule.quotaMode,
      replaces: rule.replaces,
    };
  }

  private whyNoMatch(
    domain: string,
    entries: readonly DescriptorEntry[],
    path: readonly EntryInfo[],
  ): string[] {
    const n = entries.length;
    const last = path[path.length - 1];
    if (n === 0) return ['the descriptor has no entries'];
    if (path.length === n) {
      const e = last!;
      if (!e.hasRateLimit && e.hasChildren) {
        return [
          `${showEntry(e)} (${e.source.file}:${e.line}) has no rate_limit: it only holds nested descriptors, so a request must carry more entries to be limited by them`,
        ];
      }
      return [
        `${showEntry(e)} (${e.source.file}:${e.line}) has no rate_limit: requests matching it are never limited`,
      ];
    }
    if (last !== undefined && !last.hasChildren) {
      return [
        `the request has ${n} entries but the config under ${showEntry(last)} (${last.source.file}:${last.line}) is only ${path.length} level(s) deep; a rule matches only a request of its own depth`,
      ];
    }
    const level = last === undefined ? (this.index.roots.get(domain) ?? []) : last.children;
    const req = entries[path.length]!;
    const shown = level.slice(0, 12).map(showEntry).join(', ');
    const more = level.length > 12 ? ` and ${level.length - 12} more` : '';
    return [
      `level ${path.length + 1}: no entry matches ${req.key}=${req.value}; entries at this level: ${shown}${more}`,
    ];
  }

  /** One explanation per descriptor; `replaces` is applied across them as the service does. */
  explain(
    domain: string,
    descriptors: readonly (readonly DescriptorEntry[])[],
    opts: ExplainOptions = {},
  ): DescriptorExplanation[] {
    const now = opts.nowSeconds ?? Math.floor(Date.now() / 1000);
    const prefix = opts.cacheKeyPrefix ?? '';
    const matches = descriptors.map((entries) => this.getLimit(domain, entries));
    // The service's replaces rule: a rule named in any matched rule's `replaces` is not counted.
    const replacedBy = new Map<string, number[]>();
    matches.forEach((m, i) => {
      for (const r of m?.rule.replaces ?? []) {
        let list = replacedBy.get(r);
        if (!list) replacedBy.set(r, (list = []));
        list.push(i);
      }
    });
    return descriptors.map((entries, i): DescriptorExplanation => {
      const m = matches[i];
      if (!this.config.hasDomain(domain)) {
        return {
          descriptor: entries,
          matched: false,
          steps: [],
          counted: false,
          reasons: [
            `domain '${domain}' is not in the config (domains: ${this.config.domains.join(', ') || 'none'})`,
          ],
        };
      }
      const path = this.walk(domain, entries);
      const steps: LevelStep[] = path.map((e, k) => ({
        depth: k + 1,
        request: entries[k]!,
        how: howMatched(e, entries[k]!),
        entry: refOf(e),
      }));
      if (!m) {
        return {
          descriptor: entries,
          matched: false,
          steps,
          counted: false,
          reasons: this.whyNoMatch(domain, entries, path),
        };
      }
      const entry = path[path.length - 1]!;
      const rule = this.ruleOf(m.rule, entry);
      const reasons: string[] = [];
      const by = m.rule.name === '' ? undefined : replacedBy.get(m.rule.name);
      if (m.rule.unlimited) {
        reasons.push(
          'unlimited: answered OK locally (limitRemaining 4294967295), never counted in the store',
        );
        return { descriptor: entries, matched: true, steps, rule, counted: false, reasons };
      }
      if (by !== undefined) {
        reasons.push(
          `replaced: rule '${m.rule.name}' is named in the replaces of descriptor(s) ${by.map((j) => j + 1).join(', ')} of this request, so it is not counted`,
        );
        return { descriptor: entries, matched: true, steps, rule, counted: false, replacedBy: by, reasons };
      }
      if (m.keyEntries !== entries) {
        reasons.push(
          `share_threshold: every value matching the wildcard shares one counter (key built from ${show(m.keyEntries)})`,
        );
      }
      if (m.rule.shadowMode) reasons.push('shadow_mode: counted, but the decision is always OK');
      if (m.rule.requestsPerUnit === 0) reasons.push('requests_per_unit 0: every request is over the limit');
      if (m.rule.scripted) {
        // The limiter's own key layout: buildLimitCheck names every key of every limit, in order.
        const tagged = taggedKeyBase(prefix, domain, m.keyEntries);
        const keys = buildLimitCheck(tagged, m.rule, 0, now * 1000).keys;
        let k = 0;
        const limitKeys = m.rule.limits.map((l): LimitKeys => {
          const n = l.algorithm === 'sliding_window' ? 2 : 1;
          k += n;
          return { ...limitOf(l), keys: keys.slice(k - n, k), holds: HOLDS[l.algorithm] };
        });
        const x: DescriptorExplanation = {
          descriptor: entries,
          matched: true,
          steps,
          rule,
          counted: true,
          cacheKey: keys[0]!,
          limitKeys,
          reasons,
        };
        scripted.set(x, { tagged, rule: m.rule });
        return x;
      }
      const key = cacheKey(prefix, domain, m.keyEntries, m.rule.unitSeconds, now);
      return {
        descriptor: entries,
        matched: true,
        steps,
        rule,
        counted: true,
        cacheKey: key,
        limitKeys: [{ ...limitOf(m.rule.limits[0]!), keys: [key], holds: HOLDS.fixed_window }],
        windowStart: windowStart(now, m.rule.unitSeconds),
        resetsInSeconds: resetSeconds(m.rule.unitSeconds, now),
        reasons,
      };
    });
  }
}

/** `k=v,k2=v2` -> entries. The value is everything after the first '='; it may be empty. */
export function parseDescriptor(text: string): DescriptorEntry[] {
  if (text.trim() === '') throw new Error('empty --descriptor');
  return text.split(',').map((pair) => {
    const eq = pair.indexOf('=');
    if (eq <= 0) throw new Error(`--descriptor ${text}: '${pair}' is not key=value`);
    return { key: pair.slice(0, eq), value: pair.slice(eq + 1) };
  });
}

const HOW: Record<LevelStep['how'], string> = {
  exact: 'exact key and value',
  wildcard: 'wildcard value',
  default: 'key only (default: any value, one counter per value)',
};

/** One limit; with `named`, its own name (one of several limits: the rule's name plus `[i]`). */
function showLimit(l: LimitExplanation, named = false): string {
  const burst = l.burst === undefined ? '' : `, burst ${l.burst}`;
  const name = named ? `; named ${l.name}` : '';
  return `${l.requestsPerUnit} per ${l.unit.toLowerCase()}; algorithm: ${l.algorithm}${burst}${name}`;
}

/** Human-readable explanation. */
export function formatExplanations(domain: string, list: readonly DescriptorExplanation[]): string {
  const out: string[] = [];
  list.forEach((x, i) => {
    out.push(`descriptor ${i + 1}: ${show(x.descriptor)} (domain ${domain})`);
    for (const s of x.steps) {
      out.push(
        `  level ${s.depth}: ${s.request.key}=${s.request.value} matches ${showEntry(s.entry)} — ${HOW[s.how]} — ${s.entry.file}:${s.entry.line} ${s.entry.field}`,
      );
    }
    if (x.rule) {
      const r = x.rule;
      const limit = r.unlimited ? 'unlimited' : `${r.requestsPerUnit} per ${r.unit.toLowerCase()}`;
      out.push(`  rule: ${r.statKey} at ${r.file}:${r.line} (${r.field})`);
      out.push(`  named: ${r.ruleName}`);
      if (r.limits.length > 1) {
        out.push(
          `  limits (a hit is admitted only when every one admits it; a rejected hit counts in none):`,
        );
        for (const l of r.limits) out.push(`    ${showLimit(l, true)}`);
      } else {
        out.push(`  limit: ${r.limits[0] === undefined ? limit : showLimit(r.limits[0])}`);
      }
      const flags = [
        `shadow_mode=${r.shadowMode}`,
        `unlimited=${r.unlimited}`,
        ...(r.quotaMode ? ['quota_mode=true'] : []),
        ...(r.name ? [`name=${r.name}`] : []),
        ...(r.replaces.length ? [`replaces=${r.replaces.join('|')}`] : []),
      ];
      out.push(`  flags: ${flags.join(' ')}`);
    } else {
      out.push('  no rule matches: the service answers OK without a limit and counts nothing');
    }
    if (x.windowStart !== undefined) {
      out.push(`  cache key: ${x.cacheKey} (window from ${x.windowStart}, resets in ${x.resetsInSeconds}s)`);
      out.push(`    holds: ${HOLDS.fixed_window}`);
    } else if (x.limitKeys !== undefined) {
      for (const l of x.limitKeys) {
        const roles =
          l.algorithm === 'sliding_window'
            ? `${l.keys[0]} (current window), ${l.keys[1]} (previous window)`
            : l.algorithm === 'token_bucket'
              ? `${l.keys[0]} (the bucket)`
              : `${l.keys[0]} (this window's count)`;
        out.push(`  ${l.algorithm} ${l.unit.toLowerCase()} keys: ${roles}`);
        out.push(`    holds: ${l.holds}`);
      }
    }
    for (const r of x.reasons) out.push(`  ${x.matched ? 'note' : 'why'}: ${r}`);
  });
  return out.join('\n') + '\n';
}
