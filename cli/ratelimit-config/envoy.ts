// ratelimit-config envoy: the Envoy route `rate_limits` that make Envoy send the descriptors a config's
// rules match. Every path of the descriptor tree that ends at a limit (rate_limit or rate_limits) is one
// `rate_limits` entry whose actions, one per level, produce that level's key: Envoy's own actions for the
// keys it knows (remote_address, destination_cluster, source_cluster, generic_key), and for the others
// the source the user names (a request header, a constant of the route, or a header condition). Paths
// that need the same actions are one entry: Envoy sends the request's value and the service picks the
// rule. A key without a source is an error, never a guess.
import { Document, isMap, isSeq } from 'yaml';
import type { ConfigSet } from '../../control-plane/config-set/index.js';

/** Where the value of a key comes from, as the user mapped it. */
export interface ActionMappings {
  /** key → request header whose value is sent (`request_headers`). */
  readonly headers: ReadonlyMap<string, string>;
  /** Keys sent as a constant of the route: the config's value (`generic_key`). */
  readonly genericKeys: ReadonlySet<string>;
  /** `key=value` → header condition (`header_value_match`): sent with that value when the header matches. */
  readonly matches: ReadonlyMap<string, HeaderCondition>;
}

export interface HeaderCondition {
  readonly header: string;
  /** present: the header is there; exact / contains: its value. */
  readonly kind: 'present' | 'exact' | 'contains';
  readonly text?: string;
}

/** `KEY=VALUE:HEADER`, `KEY=VALUE:HEADER=TEXT` (equals), `KEY=VALUE:HEADER~TEXT` (contains). */
export function parseMatch(spec: string): { keyValue: string; condition: HeaderCondition } {
  const colon = spec.lastIndexOf(':');
  const kv = colon < 0 ? '' : spec.slice(0, colon);
  const cond = colon < 0 ? '' : spec.slice(colon + 1);
  const eq = kv.indexOf('=');
  const m = /^([A-Za-z0-9_.:-]+?)(?:([=~])(.*))?$/.exec(cond);
  if (eq <= 0 || eq === kv.length - 1 || !m) {
    throw new Error(
      `--match ${spec}: expected KEY=VALUE:HEADER (header present), KEY=VALUE:HEADER=TEXT or KEY=VALUE:HEADER~TEXT`,
    );
  }
  const header = m[1]!.toLowerCase();
  if (m[2] === undefined) return { keyValue: kv, condition: { header, kind: 'present' } };
  if (m[3] === '') throw new Error(`--match ${spec}: empty text after ${m[2]}`);
  return { keyValue: kv, condition: { header, kind: m[2] === '=' ? 'exact' : 'contains', text: m[3]! } };
}

/** Envoy's well-known actions: keys whose value Envoy computes itself. */
const WELL_KNOWN: Readonly<Record<string, string>> = {
  remote_address: 'remote_address',
  destination_cluster: 'destination_cluster',
  source_cluster: 'source_cluster',
};

export interface EnvoyEntry {
  /** envoy.config.route.v3.RateLimit, in proto JSON field names. */
  readonly actions: readonly Record<string, unknown>[];
  /** The config paths (`key=value/key`) this entry reaches. */
  readonly paths: readonly string[];
}

export interface Unmapped {
  readonly key: string;
  readonly value: string;
  /** The config path where it was found. */
  readonly path: string;
  readonly reason: string;
}

interface Entry {
  key: string;
  value?: string;
  rate_limit?: unknown;
  rate_limits?: unknown;
  descriptors?: unknown;
}

function isWildcard(value: string): boolean {
  return value.endsWith('*');
}

function actionFor(
  e: Entry,
  m: ActionMappings,
): { action: Record<string, unknown> } | { reason: string } | undefined {
  const value = e.value ?? '';
  const cond = value === '' ? undefined : m.matches.get(`${e.key}=${value}`);
  if (cond) {
    const header: Record<string, unknown> = { name: cond.header };
    if (cond.kind === 'present') header.present_match = true;
    else header.string_match = cond.kind === 'exact' ? { exact: cond.text } : { contains: cond.text };
    return {
      action: {
        header_value_match: {
          ...(e.key === 'header_match' ? {} : { descriptor_key: e.key }),
          descriptor_value: value,
          headers: [header],
        },
      },
    };
  }
  const header = m.headers.get(e.key);
  if (header !== undefined) {
    return { action: { request_headers: { header_name: header, descriptor_key: e.key } } };
  }
  if (m.genericKeys.has(e.key) || e.key === 'generic_key') {
    if (value === '' || isWildcard(value)) {
      return {
        reason:
          value === ''
            ? 'a constant (generic_key) needs the value the config expects, and this entry has none'
            : `a constant (generic_key) cannot stand for the wildcard ${value}`,
      };
    }
    return {
      action: {
        generic_key: {
          ...(e.key === 'generic_key' ? {} : { descriptor_key: e.key }),
          descriptor_value: value,
        },
      },
    };
  }
  const wk = WELL_KNOWN[e.key];
  if (wk !== undefined) return { action: { [wk]: {} } };
  return undefined;
}

function show(e: Entry): string {
  return e.value === undefined || e.value === '' ? e.key : `${e.key}=${e.value}`;
}

/**
 * The `rate_limits` entries for a served domain, in the order of the config's paths (depth first),
 * identical action lists once; and the keys no action could be found for.
 */
export function envoyRateLimits(
  set: ConfigSet,
  domain: string,
  m: ActionMappings,
): { entries: EnvoyEntry[]; unmapped: Unmapped[] } {
  const served = set.domains.get(domain);
  const byActions = new Map<string, { actions: Record<string, unknown>[]; paths: string[] }>();
  const unmapped: Unmapped[] = [];
  const walk = (list: unknown, prefix: Entry[], actions: Record<string, unknown>[], ok: boolean): void => {
    if (!Array.isArray(list)) return;
    for (const raw of list as Entry[]) {
      const path = [...prefix, raw];
      const where = path.map(show).join(' / ');
      const found = actionFor(raw, m);
      let here = ok;
      let next = actions;
      if (found === undefined) {
        unmapped.push({ key: raw.key, value: raw.value ?? '', path: where, reason: 'no source given' });
        here = false;
      } else if ('reason' in found) {
        unmapped.push({ key: raw.key, value: raw.value ?? '', path: where, reason: found.reason });
        here = false;
      } else {
        next = [...actions, found.action];
      }
      if (here && (raw.rate_limit !== undefined || raw.rate_limits !== undefined)) {
        const id = JSON.stringify(next);
        const got = byActions.get(id);
        if (got) got.paths.push(where);
        else byActions.set(id, { actions: next, paths: [where] });
      }
      walk(raw.descriptors, path, next, here);
    }
  };
  walk(served?.descriptors, [], [], true);
  return { entries: [...byActions.values()], unmapped };
}

/** The YAML printed: `rate_limits:` with a comment on each entry naming the config paths it reaches. */
export function formatEnvoyYaml(domain: string, entries: readonly EnvoyEntry[]): string {
  const doc = new Document({ rate_limits: entries.map((e) => ({ actions: e.actions })) });
  doc.commentBefore =
    ` rate_limits for domain ${domain} (ratelimit-config envoy): under a route or a virtual host of a\n` +
    ` listener whose envoy.filters.http.ratelimit filter has domain: ${domain}`;
  const seq = isMap(doc.contents) ? doc.contents.get('rate_limits', true) : undefined;
  if (isSeq(seq)) {
    seq.items.forEach((item, i) => {
      (item as { commentBefore?: string }).commentBefore = ` ${entries[i]!.paths.join(', ')}`;
    });
  }
  return doc.toString({ lineWidth: 0, flowCollectionPadding: true });
}
