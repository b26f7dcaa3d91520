// CACHE_WRITE_BEHIND_*: defaults (off) and clear errors naming the variable.
import t from 'tap';
import { loadSettings, SettingsError } from './index.js';

t.test('write-behind is off by default, with a 1s interval, 100k keys and 64 MiB', async (t) => {
  t.same(loadSettings({}).writeBehind, {
    enabled: false,
    intervalMs: 1000,
    maxKeys: 100_000,
    maxBytes: 64 * 1024 * 1024,
  });
  t.same(
    loadSettings({
      CACHE_WRITE_BEHIND_ENABLED: 'true',
      CACHE_WRITE_BEHIND_INTERVAL: '250ms',
      CACHE_WRITE_BEHIND_MAX_KEYS: '5000',
      CACHE_WRITE_BEHIND_MAX_BYTES: '1048576',
    }).writeBehind,
    { enabled: true, intervalMs: 250, maxKeys: 5000, maxBytes: 1048576 },
  );
});

t.test('bad values stop startup with the variable named', async (t) => {
  const bad: [Record<string, string>, RegExp][] = [
    [{ CACHE_WRITE_BEHIND_ENABLED: 'yes please' }, /^CACHE_WRITE_BEHIND_ENABLED: invalid boolean/],
    [{ CACHE_WRITE_BEHIND_INTERVAL: '5 seconds' }, /^CACHE_WRITE_BEHIND_INTERVAL: invalid duration/],
    [
      { CACHE_WRITE_BEHIND_INTERVAL: '5ms' },
      /^CACHE_WRITE_BEHIND_INTERVAL: must be between 10ms and 1m, got 5ms/,
    ],
    [{ CACHE_WRITE_BEHIND_INTERVAL: '0' }, /^CACHE_WRITE_BEHIND_INTERVAL: must be between 10ms and 1m/],
    [{ CACHE_WRITE_BEHIND_INTERVAL: '-1s' }, /^CACHE_WRITE_BEHIND_INTERVAL: must be between/],
    [
      { CACHE_WRITE_BEHIND_INTERVAL: '2m' },
      /^CACHE_WRITE_BEHIND_INTERVAL: must be between 10ms and 1m, got 120000ms/,
    ],
    [{ CACHE_WRITE_BEHIND_MAX_KEYS: '0' }, /^CACHE_WRITE_BEHIND_MAX_KEYS: must be >= 1/],
    [{ CACHE_WRITE_BEHIND_MAX_KEYS: '1e6' }, /^CACHE_WRITE_BEHIND_MAX_KEYS: invalid integer/],
    [{ CACHE_WRITE_BEHIND_MAX_KEYS: '20000000' }, /^CACHE_WRITE_BEHIND_MAX_KEYS: must be <= 10000000/],
    [{ CACHE_WRITE_BEHIND_MAX_BYTES: '100' }, /^CACHE_WRITE_BEHIND_MAX_BYTES: must be >= 4096/],
  ];
  for (const [env, message] of bad) {
    t.throws(() => loadSettings(env), { constructor: SettingsError, message }, JSON.stringify(env));
  }
});
