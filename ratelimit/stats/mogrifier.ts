// DogStatsD mogrifiers: turn a dotted statistic name into a shorter name plus tags, e.g.
//   ratelimit.service.rate_limit.mongo_cps.database_users.total_hits
//   -> ratelimit.service.rate_limit.total_hits  #domain:mongo_cps,descriptor:database_users
// Configured like the reference (src/godogstats/mogrifier_map.go): DOG_STATSD_MOGRIFIERS names
// them; per name, DOG_STATSD_MOGRIFIER_<NAME>_PATTERN / _NAME / _TAGS (also accepted with
// MOGRIFIERS_). $0..$9 in NAME and TAGS are the regex's match groups. First match wins.
import type { Env } from '../settings/index.js';

export class MogrifierError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MogrifierError';
  }
}

interface Mogrifier {
  readonly name: string;
  readonly pattern: RegExp;
  readonly metricName: string;
  readonly tags: readonly [string, string][];
}

const GROUP_REF = /\$(\d+)/g;

function expand(template: string, match: RegExpExecArray): string {
  return template.replace(GROUP_REF, (ref, digits: string) => {
    const i = Number(digits);
    return i < match.length ? (match[i] ?? '') : ref;
  });
}

export class MogrifierMap {
  constructor(private readonly entries: readonly Mogrifier[]) {}

  get size(): number {
    return this.entries.length;
  }

  /** The mogrified name and tags (`key:value`), or the name unchanged and no tags. */
  mogrify(name: string): { name: string; tags: string[] } {
    for (const m of this.entries) {
      const match = m.pattern.exec(name);
      if (!match) continue;
      return { name: expand(m.metricName, match), tags: m.tags.map(([k, v]) => `${k}:${expand(v, match)}`) };
    }
    return { name, tags: [] };
  }
}

function readVar(env: Env, name: string, field: string): string | undefined {
  for (const prefix of ['DOG_STATSD_MOGRIFIER_', 'DOG_STATSD_MOGRIFIERS_']) {
    const v = env[`${prefix}${name}_${field}`];
    if (v !== undefined && v !== '') return v;
  }
  return undefined;
}

/** `key:value,key:value` (envconfig's map form, which the reference reads). */
function parseTags(raw: string, mogrifier: string): [string, string][] {
  const out: [string, string][] = [];
  for (const part of raw.split(',')) {
    const item = part.trim();
    if (item === '') continue;
    const i = item.indexOf(':');
    if (i < 0) throw new MogrifierError(`mogrifier ${mogrifier}: tag '${item}' is not key:value`);
    const key = item.slice(0, i).trim();
    const value = item.slice(i + 1).trim();
    if (key === '') throw new MogrifierError(`mogrifier ${mogrifier}: a tag has no key`);
    if (value === '') throw new MogrifierError(`mogrifier ${mogrifier}: tag ${key} has no value`);
    out.push([key, value]);
  }
  return out;
}

/** Reads the named mogrifiers from the environment; a missing PATTERN or NAME is an error. */
export function mogrifiersFromEnv(names: readonly string[], env: Env): MogrifierMap {
  const entries: Mogrifier[] = [];
  for (const raw of names) {
    const name = raw.trim().toUpperCase();
    if (name === '') continue;
    const pattern = readVar(env, name, 'PATTERN');
    if (!pattern) throw new MogrifierError(`no PATTERN specified for mogrifier ${name}`);
    let re: RegExp;
    try {
      re = new RegExp(pattern);
    } catch (err) {
      throw new MogrifierError(
        `failed to compile pattern for ${name}: ${pattern}: ${(err as Error).message}`,
      );
    }
    const metricName = readVar(env, name, 'NAME');
    if (!metricName) throw new MogrifierError(`no NAME specified for mogrifier ${name}`);
    const tags = parseTags(readVar(env, name, 'TAGS') ?? '', name);
    entries.push({ name, pattern: re, metricName, tags });
  }
  return new MogrifierMap(entries);
}
