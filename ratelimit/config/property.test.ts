// Property tests: random configurations and requests. The oracle below is a direct transcription of
// the reference's GetLimit (string-keyed tree walk, stats keys built as it builds them), with its
// wildcard test generalised to a `*` anywhere in the value (matched here with a RegExp,
// independently of the matcher's split-and-indexOf); the compiled matcher must agree with it on
// every request.
import fc from 'fast-check';
import t from 'tap';
import {
  buildConfigInSlices,
  checkDocument,
  compileConfig,
  toCheckedDocument,
  type DescriptorEntry,
  type RateLimitConfig,
} from './index.js';

interface Doc {
  key: string;
  value?: string;
  rate_limit?: { unit: string; requests_per_unit: number };
  detailed_metric?: boolean;
  value_to_metric?: boolean;
  share_threshold?: boolean;
  descriptors?: Doc[];
}

const KEYS = ['a', 'b', 'a_b', 'a_', 'a*', 'b*_'];
const VALUES = [undefined, 'x', 'y', 'x*', '*', 'x_y', 'y*', 'xy', 'x*y', '*y', 'x*_*'];
const REQ_KEYS = ['a', 'b', 'a_b', 'c', 'a*', 'ab', 'b*_'];
const REQ_VALUES = ['x', 'y', 'xy', 'x_y', '', 'x*', 'yy', 'y_x', 'xay', 'x*y', 'x__'];

const composite = (key: string, value: string | undefined) => (value ? `${key}_${value}` : key);

const entryArb: fc.Memo<Doc> = fc.memo((depth: number) =>
  fc
    .record({
      key: fc.constantFrom(...KEYS),
      value: fc.constantFrom(...VALUES),
      rpu: fc.option(fc.integer({ min: 0, max: 1000 }), { nil: undefined }),
      detailed: fc.boolean(),
      v2m: fc.boolean(),
      share: fc.boolean(),
      children: depth > 1 ? fc.array(entryArb(depth - 1), { maxLength: 4 }) : fc.constant([] as Doc[]),
    })
    .map(({ key, value, rpu, detailed, v2m, share, children }) => {
      const d: Doc = { key };
      if (value !== undefined) d.value = value;
      if (rpu !== undefined) d.rate_limit = { unit: 'minute', requests_per_unit: rpu };
      if (detailed) d.detailed_metric = true;
      if (v2m) d.value_to_metric = true;
      if (share && composite(key, value).endsWith('*')) d.share_threshold = true;
      const kids = dedupe(children);
      if (kids.length > 0) d.descriptors = kids;
      return d;
    }),
);

function dedupe(list: Doc[]): Doc[] {
  const seen = new Set<string>();
  return list.filter((d) => {
    const k = composite(d.key, d.value);
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}

const configArb = fc
  .array(entryArb(3), { maxLength: 6 })
  .map((list) => ({ domain: 'dom', descriptors: dedupe(list) }));
const requestArb = fc.array(
  fc.record({ key: fc.constantFrom(...REQ_KEYS), value: fc.constantFrom(...REQ_VALUES) }),
  { maxLength: 4 },
);

// ---- the oracle: the reference's data structure and GetLimit, transcribed ----------------------
interface ONode {
  descriptors: Map<string, ONode>;
  wildcardKeys: string[];
  /** Per wildcard key: the RegExp its requests must match. */
  wildcardRes: Map<string, RegExp>;
  limit?: { fullKey: string; rpu: number; detailed: boolean };
  valueToMetric: boolean;
  shareThreshold: boolean;
  wildcardPattern: string;
}

function oload(into: ONode, parentKey: string, list: Doc[] | undefined): void {
  for (const d of list ?? []) {
    const finalKey = composite(d.key, d.value);
    const node: ONode = {
      descriptors: new Map(),
      wildcardKeys: [],
      wildcardRes: new Map(),
      valueToMetric: d.value_to_metric === true,
      shareThreshold: d.share_threshold === true,
      wildcardPattern: d.share_threshold && finalKey.endsWith('*') ? finalKey : '',
    };
    if (d.rate_limit) {
      node.limit = {
        fullKey: parentKey + finalKey,
        rpu: d.rate_limit.requests_per_unit,
        detailed: d.detailed_metric === true,
      };
    }
    oload(node, parentKey + finalKey + '.', d.descriptors);
    into.descriptors.set(finalKey, node);
    const re = wildcardRegExp(d.key, d.value, finalKey);
    if (re) {
      into.wildcardKeys.push(finalKey);
      into.wildcardRes.set(finalKey, re);
    }
  }
}

const trimPrefix = (s: string, p: string) => (s.startsWith(p) ? s.slice(p.length) : s);

const escapeRe = (p: string) => p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * A `*` in the value matches any run (also empty), everything else literally, anchored at both
 * ends; a key-only entry whose key ends in `*` is the reference's prefix match on the composite key.
 */
function wildcardRegExp(key: string, value: string | undefined, finalKey: string): RegExp | undefined {
  if (value?.includes('*')) {
    return new RegExp('^' + escapeRe(key + '_') + value.split('*').map(escapeRe).join('.*') + '$', 's');
  }
  if (finalKey.endsWith('*')) return new RegExp('^' + escapeRe(finalKey.slice(0, -1)), 's');
  return undefined;
}

function oracle(root: ONode, domain: string, entries: DescriptorEntry[]) {
  let rateLimit: { fullKey: string; rpu: number; detailed: boolean; patterns?: string[] } | undefined;
  let map = root.descriptors;
  let prev = root;
  let detailed = domain;
  let v2m = domain;
  const patterns = new Map<number, string>();
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i]!;
    let finalKey = e.key + '_' + e.value;
    detailed += '.' + finalKey;
    let next = map.get(finalKey);
    let wk = '';
    if (next === undefined && prev.wildcardKeys.length > 0) {
      for (const w of prev.wildcardKeys) {
        if (prev.wildcardRes.get(w)!.test(finalKey)) {
          next = map.get(w);
          wk = w;
          break;
        }
      }
    }
    let usingValue = next !== undefined;
    if (next === undefined) {
      finalKey = e.key;
      next = map.get(finalKey);
      usingValue = false;
    }
    if (wk !== '' && next && next.shareThreshold && next.wildcardPattern !== '') {
      patterns.set(i, trimPrefix(next.wildcardPattern, e.key + '_'));
    }
    v2m += '.';
    const kv = e.key + (e.value !== '' ? '_' + e.value : '');
    if (next) {
      const share = patterns.get(i) ?? '';
      if (wk !== '') {
        if (share !== '') v2m += e.key + '_' + share;
        else if (next.valueToMetric) v2m += kv;
        else v2m += e.key + '_' + trimPrefix(wk, e.key + '_');
      } else if (usingValue) {
        v2m += share !== '' ? e.key + '_' + share : kv;
      } else {
        v2m += next.valueToMetric ? kv : e.key;
      }
    } else {
      v2m += e.key;
    }
    if (next && next.limit && i === entries.length - 1) {
      rateLimit = { ...next.limit };
      if (patterns.size > 0) {
        rateLimit.patterns = entries.map(() => '');
        for (const [idx, p] of patterns) rateLimit.patterns[idx] = p;
      }
    }
    if (next && next.descriptors.size > 0) {
      map = next.descriptors;
    } else {
      break;
    }
    prev = next;
  }
  if (!rateLimit) return undefined;
  let fullKey = rateLimit.fullKey;
  if (rateLimit.detailed) {
    if (rateLimit.patterns) {
      fullKey = domain;
      entries.forEach((e, i) => {
        const p = rateLimit!.patterns![i]!;
        fullKey += '.' + (p !== '' ? e.key + '_' + p : e.key + (e.value !== '' ? '_' + e.value : ''));
      });
    } else {
      fullKey = detailed;
    }
  } else if (v2m !== fullKey) {
    fullKey = v2m;
  }
  const keyEntries = entries.map((e, i) => {
    const p = rateLimit!.patterns?.[i] ?? '';
    return p !== '' ? { key: e.key, value: p } : { key: e.key, value: e.value };
  });
  return { rpu: rateLimit.rpu, statKey: fullKey, keyEntries };
}

/** Requests that follow the config's own paths, with values that hit exact, wildcard and key-only entries. */
function derivedRequests(
  list: Doc[] | undefined,
  path: DescriptorEntry[] = [],
  out: DescriptorEntry[][] = [],
) {
  if (out.length > 200) return out;
  for (const d of list ?? []) {
    const base = d.value === undefined ? 'x' : d.value.replace(/\*$/, '');
    for (const value of new Set([base, `${base}z`, '', 'y'])) {
      const entries = [...path, { key: d.key, value }];
      out.push(entries);
      derivedRequests(d.descriptors, entries, out);
    }
  }
  return out;
}

t.test(
  'random configs and requests: getLimit never throws and agrees with the reference oracle',
  async (t) => {
    let matched = 0;
    let checked = 0;
    fc.assert(
      fc.property(configArb, fc.array(requestArb, { minLength: 1, maxLength: 8 }), (doc, requests) => {
        const config = compileConfig([{ name: 'gen', document: doc }]);
        const root: ONode = {
          descriptors: new Map(),
          wildcardKeys: [],
          wildcardRes: new Map(),
          valueToMetric: false,
          shareThreshold: false,
          wildcardPattern: '',
        };
        oload(root, 'dom.', doc.descriptors);
        for (const entries of [...requests, ...derivedRequests(doc.descriptors)]) {
          const got = config.getLimit('dom', { entries });
          const want = oracle(root, 'dom', entries);
          checked++;
          if (want === undefined) {
            if (got !== undefined) return false;
            continue;
          }
          matched++;
          if (got === undefined) return false;
          if (got.rule.requestsPerUnit !== want.rpu || got.statKey !== want.statKey) return false;
          if (JSON.stringify(got.keyEntries) !== JSON.stringify(want.keyEntries)) return false;
        }
        return true;
      }),
      { numRuns: 200, seed: 42 },
    );
    t.ok(matched > checked / 20, `enough requests matched a rule (${matched}/${checked})`);
  },
);

t.test(
  'random configs: every rule reached through exact values is found, with its own stats key',
  async (t) => {
    fc.assert(
      fc.property(configArb, (doc) => {
        const config = compileConfig([{ name: 'gen', document: doc }]);
        const walk = (list: Doc[] | undefined, path: DescriptorEntry[], keyPath: string): boolean => {
          for (const d of list ?? []) {
            // exact = a non-wildcard value; wildcard and key-only entries need other request values
            if (d.value === undefined || d.value.endsWith('*')) continue;
            const entries = [...path, { key: d.key, value: d.value }];
            const statKey = `${keyPath}.${composite(d.key, d.value)}`;
            if (d.rate_limit) {
              const m = config.getLimit('dom', { entries });
              if (m === undefined || m.rule.requestsPerUnit !== d.rate_limit.requests_per_unit) return false;
              if (m.rule.statKey !== statKey) return false;
              const expected = d.detailed_metric
                ? `dom.${entries.map((e) => `${e.key}_${e.value}`).join('.')}`
                : statKey;
              if (m.statKey !== expected) return false;
              if (m.keyEntries.length !== entries.length) return false;
            }
            if (!walk(d.descriptors, entries, statKey)) return false;
          }
          return true;
        };
        return walk(doc.descriptors, [], 'dom');
      }),
      { numRuns: 300, seed: 7 },
    );
    t.pass('properties hold');
  },
);

t.test('arbitrary strings in requests never throw', async (t) => {
  const config = compileConfig([
    {
      name: 'fixed',
      document: {
        domain: 'd',
        descriptors: [
          {
            key: 'k',
            value: 'v*',
            share_threshold: true,
            value_to_metric: true,
            rate_limit: { unit: 'second', requests_per_unit: 1 },
          },
          {
            key: 'k',
            detailed_metric: true,
            descriptors: [{ key: 'j', rate_limit: { unit: 'hour', requests_per_unit: 2 } }],
          },
        ],
      },
    },
  ]);
  fc.assert(
    fc.property(
      fc.string(),
      fc.array(
        fc.record({ key: fc.oneof(fc.constant('k'), fc.constant('j'), fc.string()), value: fc.string() }),
        { maxLength: 5 },
      ),
      fc.option(
        fc.record({ requestsPerUnit: fc.nat(), unit: fc.constantFrom('SECOND' as const, 'WEEK' as const) }),
        { nil: undefined },
      ),
      (domain, entries, limit) => {
        config.getLimit(domain, { entries, limit });
        config.getLimit('d', { entries, limit });
        return true;
      },
    ),
    { numRuns: 500, seed: 3 },
  );
  t.pass('no throw');
});

t.test(
  "random configs: built from checked documents (compiled on first lookup), every answer, dump and key path is the eager build's",
  async (t) => {
    const answers = (config: RateLimitConfig, requests: DescriptorEntry[][]) =>
      JSON.stringify(requests.map((entries) => config.getLimit('dom', { entries }) ?? null));
    await fc.assert(
      fc.asyncProperty(
        configArb,
        fc.array(requestArb, { minLength: 1, maxLength: 8 }),
        fc.nat(6),
        async (doc, random, split) => {
          const eager = compileConfig([{ name: 'gen', document: doc }]);
          const list = checkDocument('gen', doc).document!.descriptors ?? [];
          // Two documents of one domain, merged: the second's entries continue the first's.
          const parts = [list.slice(0, split), list.slice(split)].map((descriptors, i) =>
            toCheckedDocument(`gen${i}`, { domain: 'dom', descriptors }),
          );
          const lazy = await buildConfigInSlices(parts, true, { sliceMs: 0 });
          if (lazy.dump(true) !== eager.dump(true)) return false;
          if (JSON.stringify(lazy.ruleKeyPaths('dom')) !== JSON.stringify(eager.ruleKeyPaths('dom')))
            return false;
          const requests = [...random, ...derivedRequests(doc.descriptors)].reverse();
          const first = requests.map((entries) => lazy.getLimit('dom', { entries })?.rule);
          if (answers(lazy, requests) !== answers(eager, requests)) return false;
          // Asked again, from the entries compiled by the first lookups: the same rule objects, whether
          // an entry was first reached by its key or by its wildcard pattern.
          if (requests.some((entries, i) => lazy.getLimit('dom', { entries })?.rule !== first[i]))
            return false;
          return lazy.dump(true) === eager.dump(true);
        },
      ),
      { numRuns: 200, seed: 11 },
    );
    t.pass('properties hold');
  },
);
