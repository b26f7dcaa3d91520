// Parsers for environment values in the forms the reference service accepts (Go's envconfig):
// booleans as strconv.ParseBool, durations as time.ParseDuration, maps as `k1:v1,k2:v2`.

export class SettingsError extends Error {
  constructor(
    readonly variable: string,
    message: string,
  ) {
    super(`${variable}: ${message}`);
    this.name = 'SettingsError';
  }
}

export type Env = Readonly<Record<string, string | undefined>>;

const TRUE = new Set(['1', 't', 'T', 'true', 'TRUE', 'True']);
const FALSE = new Set(['0', 'f', 'F', 'false', 'FALSE', 'False']);

export class EnvReader {
  constructor(private readonly env: Env) {}

  raw(name: string): string | undefined {
    const v = this.env[name];
    return v === undefined || v === '' ? undefined : v;
  }

  string(name: string, def: string): string {
    return this.raw(name) ?? def;
  }

  bool(name: string, def: boolean): boolean {
    const v = this.raw(name);
    if (v === undefined) return def;
    if (TRUE.has(v)) return true;
    if (FALSE.has(v)) return false;
    throw new SettingsError(name, `invalid boolean '${v}' (use true or false)`);
  }

  int(name: string, def: number, opts: { min?: number; max?: number } = {}): number {
    const v = this.raw(name);
    if (v === undefined) return def;
    if (!/^[+-]?\d+$/.test(v.trim())) throw new SettingsError(name, `invalid integer '${v}'`);
    const n = Number(v.trim());
    if (opts.min !== undefined && n < opts.min)
      throw new SettingsError(name, `must be >= ${opts.min}, got ${n}`);
    if (opts.max !== undefined && n > opts.max)
      throw new SettingsError(name, `must be <= ${opts.max}, got ${n}`);
    return n;
  }

  float(name: string, def: number, opts: { min?: number; max?: number } = {}): number {
    const v = this.raw(name);
    if (v === undefined) return def;
    const n = Number(v.trim());
    if (v.trim() === '' || !Number.isFinite(n)) throw new SettingsError(name, `invalid number '${v}'`);
    if (opts.min !== undefined && n < opts.min)
      throw new SettingsError(name, `must be >= ${opts.min}, got ${n}`);
    if (opts.max !== undefined && n > opts.max)
      throw new SettingsError(name, `must be <= ${opts.max}, got ${n}`);
    return n;
  }

  /** A Go duration ("300ms", "1h30m", "10s", "0") in milliseconds. */
  durationMs(name: string, defMs: number): number {
    const v = this.raw(name);
    if (v === undefined) return defMs;
    const ms = parseGoDuration(v);
    if (ms === undefined) throw new SettingsError(name, `invalid duration '${v}' (e.g. 500ms, 10s, 1m)`);
    return ms;
  }

  /** `<k1:v1>,<k2:v2>` (angle brackets optional), as envconfig's map form. */
  map(name: string): Record<string, string> {
    const v = this.raw(name);
    const out: Record<string, string> = {};
    if (v === undefined) return out;
    for (const part of v.split(',')) {
      const item = part.trim().replace(/^<(.*)>$/, '$1');
      if (item === '') continue;
      const i = item.indexOf(':');
      if (i <= 0) throw new SettingsError(name, `invalid entry '${item}' (expected key:value)`);
      out[item.slice(0, i).trim()] = item.slice(i + 1).trim();
    }
    return out;
  }

  list(name: string): string[] {
    const v = this.raw(name);
    if (v === undefined) return [];
    return v
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== '');
  }

  oneOf<T extends string>(name: string, def: T, allowed: readonly T[], caseInsensitive = true): T {
    const v = this.raw(name);
    if (v === undefined) return def;
    const found = allowed.find((a) => (caseInsensitive ? a.toLowerCase() === v.toLowerCase() : a === v));
    if (!found) throw new SettingsError(name, `invalid value '${v}' (one of: ${allowed.join(', ')})`);
    return found;
  }
}

const UNIT_MS: Record<string, number> = {
  ns: 1e-6,
  us: 1e-3,
  µs: 1e-3,
  μs: 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

/** Parses a Go time.Duration string into milliseconds; undefined when malformed. */
export function parseGoDuration(text: string): number | undefined {
  let s = text.trim();
  if (s === '0') return 0;
  let sign = 1;
  if (s.startsWith('-') || s.startsWith('+')) {
    if (s[0] === '-') sign = -1;
    s = s.slice(1);
  }
  if (s === '') return undefined;
  const re = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/y;
  let total = 0;
  let pos = 0;
  while (pos < s.length) {
    re.lastIndex = pos;
    const m = re.exec(s);
    if (!m) return undefined;
    total += Number(m[1]) * UNIT_MS[m[2]];
    pos = re.lastIndex;
  }
  return sign * total;
}
