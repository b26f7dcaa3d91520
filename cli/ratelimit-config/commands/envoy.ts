// ratelimit-config envoy: the route's rate_limits actions that produce the descriptors a domain's
// config matches, each key given a source (--header, --generic-key or --match); exit 1 when a key has none.
import { parseArgs } from 'node:util';
import { envoyRateLimits, formatEnvoyYaml, parseMatch, type HeaderCondition } from '../envoy.js';
import { COMMON, loadSet, requireValid, UsageError, type Io } from './common.js';

export const options = {
  ...COMMON,
  config: { type: 'string', multiple: true },
  domain: { type: 'string' },
  header: { type: 'string', multiple: true },
  'generic-key': { type: 'string', multiple: true },
  match: { type: 'string', multiple: true },
} as const;

export function run(args: string[], io: Io): number {
  // The config's files and folders: --config, or as positional arguments (as validate takes them).
  const { values, positionals } = parseArgs({ args, options, allowPositionals: true });
  const headers = new Map<string, string>();
  for (const pair of values.header ?? []) {
    const eq = pair.indexOf('=');
    if (eq <= 0 || eq === pair.length - 1) throw new UsageError(`--header ${pair}: expected KEY=HEADER`);
    headers.set(pair.slice(0, eq), pair.slice(eq + 1).toLowerCase());
  }
  const matches = new Map<string, HeaderCondition>();
  for (const spec of values.match ?? []) {
    try {
      const { keyValue, condition } = parseMatch(spec);
      matches.set(keyValue, condition);
    } catch (err) {
      throw new UsageError((err as Error).message);
    }
  }
  const set = loadSet([...(values.config ?? []), ...positionals], values, io);
  if (!requireValid(set, 'envoy', io)) return 2;
  const domains = [...set.domains.keys()];
  const domain = values.domain ?? (domains.length === 1 ? domains[0]! : undefined);
  if (domain === undefined)
    throw new UsageError(
      `--domain is required: the config has ${domains.length} domains (${domains.join(', ')})`,
    );
  if (!set.domains.has(domain)) {
    io.err(`envoy: domain ${domain} is not in the config (domains: ${domains.join(', ') || 'none'})\n`);
    return 2;
  }
  const { entries, unmapped } = envoyRateLimits(set, domain, {
    headers,
    genericKeys: new Set(values['generic-key'] ?? []),
    matches,
  });
  if (unmapped.length > 0) {
    const byKey = new Map<string, string[]>();
    for (const u of unmapped) {
      const line = `${u.path}: ${u.reason}`;
      byKey.set(u.key, [...(byKey.get(u.key) ?? []), line]);
    }
    io.err(`envoy: no action for the key(s) ${[...byKey.keys()].join(', ')}:\n`);
    for (const lines of byKey.values()) for (const l of lines) io.err(`  ${l}\n`);
    io.err(
      "give each a source: --header KEY=HEADER (the header's value), --generic-key KEY (the value in the " +
        'config, a constant of the route) or --match KEY=VALUE:HEADER[=TEXT|~TEXT] (that value when the header matches)\n',
    );
    return 1;
  }
  io.out(formatEnvoyYaml(domain, entries));
  return 0;
}
