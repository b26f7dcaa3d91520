// `ratelimit --help` and `ratelimit --version` (bin/ratelimit.js loads this instead of starting the
// service). The settings summary is taken from the settings parser itself, so it cannot drift from it:
// loadSettings runs over a few synthetic environments (never the process's own, so no secret is
// printed) while the reader's typed methods are wrapped to note each variable's name and default in
// the order the parser reads them. The wrapping lasts for those calls only, in a process that prints
// and exits; the service never runs with it.
import { EnvReader, loadSettings, type Env } from '../ratelimit/settings/index.js';
import { packageVersion, parseProgramArgs, runProgram } from '../common/index.js';

/** Environments that reach the parser's conditional parts (backends, sentinel, TLS, stats, xDS). */
const ENVIRONMENTS: readonly Record<string, string>[] = [
  {},
  { BACKEND_TYPE: 'memcache', MEMCACHE_HOST_PORT: 'localhost:11211' },
  { REDIS_TYPE: 'sentinel', REDIS_URL: 'm,localhost:26379', REDIS_PERSECOND: 'true' },
  { REDIS_TLS: 'true', REDIS_PERSECOND: 'true', REDIS_PERSECOND_TLS: 'true' },
  { USE_PROMETHEUS: 'true', USE_DOG_STATSD: 'true', TRACING_ENABLED: 'true' },
  {
    CONFIG_TYPE: 'GRPC_XDS_SOTW',
    GRPC_SERVER_USE_TLS: 'true',
    GRPC_SERVER_TLS_CERT: '/tls/tls.crt',
    GRPC_SERVER_TLS_KEY: '/tls/tls.key',
    CACHE_WRITE_BEHIND_ENABLED: 'true',
  },
];

/** A duration in Go's form, as the settings take it. */
function goDuration(ms: number): string {
  if (ms === 0) return '0';
  const units: [number, string][] = [
    [3_600_000, 'h'],
    [60_000, 'm'],
    [1000, 's'],
  ];
  let rest = ms;
  let out = '';
  for (const [size, unit] of units) {
    if (rest >= size && (rest % size === 0 || unit !== 's' || out !== '')) {
      const n = Math.floor(rest / size);
      if (n > 0) {
        out += `${n}${unit}`;
        rest -= n * size;
      }
    }
  }
  if (rest > 0) out += `${rest}ms`;
  return out;
}

function shown(v: unknown): string {
  if (v === undefined) return '-';
  if (v === '') return '""';
  return String(v);
}

/** Every variable the parser reads, with its default ('-': none, or derived from other settings). */
export function settingsDefaults(): [string, string][] {
  const seen = new Map<string, string>();
  const note = (name: string, def: string) => {
    if (!seen.has(name)) seen.set(name, def);
  };
  type Method = (this: EnvReader, name: string, ...rest: unknown[]) => unknown;
  const proto = EnvReader.prototype as unknown as Record<string, Method>;
  const saved = new Map<string, Method>();
  const wrap = (method: string, def: (args: unknown[]) => string) => {
    const original = proto[method];
    if (typeof original !== 'function') return;
    saved.set(method, original);
    proto[method] = function (this: EnvReader, name: string, ...rest: unknown[]) {
      note(name, def(rest));
      return original.call(this, name, ...rest);
    };
  };
  wrap('durationMs', (a) => goDuration(a[0] as number));
  for (const m of ['string', 'bool', 'int', 'float', 'oneOf']) wrap(m, (a) => shown(a[0]));
  for (const m of ['map', 'list', 'raw']) wrap(m, () => '-');
  try {
    for (const base of ENVIRONMENTS) {
      // Names read straight from the environment, without the reader, are noted too.
      const env = new Proxy(base, {
        get(target, name) {
          if (typeof name === 'string' && /^[A-Za-z][A-Za-z0-9_]*$/.test(name)) note(name, '-');
          return target[name as string];
        },
      }) as Env;
      try {
        loadSettings(env);
      } catch {
        // An environment the parser refuses still showed what it reads up to there.
      }
    }
  } finally {
    for (const [method, original] of saved) proto[method] = original;
  }
  return [...seen.entries()];
}

export function serviceUsage(): string {
  const rows = settingsDefaults();
  const width = Math.max(...rows.map(([n]) => n.length)) + 2;
  return `usage: ratelimit [--help | --version]

Runs the rate limit service: Envoy's envoy.service.ratelimit.v3 over gRPC, /json over HTTP, and the
debug listener. Every setting is an environment variable, read once at start; an invalid one stops
the start with exit status 2, naming the variable. What each does: docs/settings.md.

settings and their defaults ('-': none, or derived from other settings):
${rows.map(([name, def]) => `  ${name.padEnd(width)}${def}`).join('\n')}
`;
}

/**
 * `ratelimit` with arguments (bin/ratelimit.js loads this instead of starting the service): `--help`
 * and `--version` print and exit 0; anything else is bad usage, as in every program (common/program.ts),
 * since the service takes its settings from the environment only.
 */
export function serviceCommand(argv: string[]): void {
  runProgram('ratelimit', async () => {
    const { values } = parseProgramArgs({
      args: argv,
      options: {
        help: { type: 'boolean', short: 'h', default: false },
        version: { type: 'boolean', default: false },
      },
      strict: true,
      allowPositionals: false,
    });
    process.stdout.write(values.version && !values.help ? `ratelimit ${packageVersion()}\n` : serviceUsage());
    return 0;
  });
}
