// docs/settings.md is the table of every environment variable the service reads. This keeps it in sync
// with the parser: every variable `ratelimit --help` lists (found by running the settings parser itself)
// must appear in the page by its full name; a `PREFIX_*` row is refused, because it would also cover
// names the service does not read.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { settingsDefaults } from '../cli/service-help.js';

const page = readFileSync(join(dirname(fileURLToPath(import.meta.url)), 'settings.md'), 'utf8');
const documented = new Set<string>();
const prefixes: string[] = [];
for (const m of page.matchAll(/`([A-Za-z][A-Za-z0-9_]*)(\*?)`/g)) {
  if (m[2]) prefixes.push(m[1]!);
  else documented.add(m[1]!);
}

t.test('every environment variable the settings parser reads is in docs/settings.md', async (t) => {
  const all = settingsDefaults().map(([name]) => name);
  t.ok(all.length > 80, `the parser was seen reading its variables (${all.length})`);
  const missing = all.filter((n) => !documented.has(n)).sort();
  t.same(missing, [], 'variables read by ratelimit/settings but absent from docs/settings.md');
  t.same(prefixes, [], 'every variable is named in full, none under a wildcard');
});

t.test('ratelimit --help shows each default the parser applies', async (t) => {
  const defaults = new Map(settingsDefaults());
  t.equal(defaults.get('BACKEND_TYPE'), 'redis', 'BACKEND_TYPE defaults to redis');
  t.equal(defaults.get('LOG_LEVEL'), 'WARN');
});
