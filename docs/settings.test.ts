// docs/settings.md is the table of every environment variable the service reads. This keeps it in sync
// with the parser: loadSettings runs on environments that switch on each optional part, every variable
// it reads is recorded, and each must appear in the page, by name or under a `PREFIX_*` row.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadSettings, type Env } from '../ratelimit/settings/index.js';

const page = readFileSync(join(dirname(fileURLToPath(import.meta.url)), 'settings.md'), 'utf8');
const documented = new Set<string>();
const prefixes: string[] = [];
for (const m of page.matchAll(/`([A-Za-z][A-Za-z0-9_]*)(\*?)`/g)) {
  if (m[2]) prefixes.push(m[1]!);
  else documented.add(m[1]!);
}

function namesRead(base: Record<string, string>): Set<string> {
  const read = new Set<string>();
  const env = new Proxy(base, {
    get(target, name) {
      if (typeof name !== 'string') return undefined;
      read.add(name);
      return target[name];
    },
  }) as Env;
  loadSettings(env);
  return read;
}

// Environments that reach the conditional parts of the parser.
const environments: Record<string, string>[] = [
  {},
  { BACKEND_TYPE: 'memcache', MEMCACHE_HOST_PORT: 'localhost:11211' },
  {
    REDIS_TYPE: 'sentinel',
    REDIS_URL: 'm,localhost:26379',
    REDIS_PERSECOND: 'true',
    REDIS_PERSECOND_TYPE: 'cluster',
  },
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

t.test('every environment variable the settings parser reads is in docs/settings.md', async (t) => {
  const all = new Set<string>();
  for (const env of environments) {
    let names: Set<string>;
    try {
      names = namesRead(env);
    } catch (err) {
      t.fail(`loadSettings(${JSON.stringify(env)}) threw: ${(err as Error).message}`);
      continue;
    }
    for (const n of names) all.add(n);
  }
  t.ok(all.size > 80, `the parser was seen reading its variables (${all.size})`);
  const missing = [...all].filter((n) => !documented.has(n) && !prefixes.some((p) => n.startsWith(p))).sort();
  t.same(missing, [], 'variables read by ratelimit/settings but absent from docs/settings.md');
});
