// REQUEST_MAX_*, GRPC_MAX_DECOMPRESSED_MSG_SIZE, HTTP_MAX_BODY_BYTES: their defaults, and clear errors
// naming the variable for values that would disable or overflow a bound.
import t from 'tap';
import { loadSettings, SettingsError } from './index.js';

t.test('defaults, and values read from the environment', async (t) => {
  const s = loadSettings({});
  t.same(s.requestBounds, {
    maxDescriptors: 64,
    maxEntries: 32,
    maxKeyBytes: 512,
    maxValueBytes: 8192,
    maxHitsAddend: 4294967295,
  });
  t.equal(s.grpc.maxDecompressedMsgSize, 65536);
  t.equal(s.httpMaxBodyBytes, 65536);
  const set = loadSettings({
    REQUEST_MAX_DESCRIPTORS: '8',
    REQUEST_MAX_DESCRIPTOR_ENTRIES: '4',
    REQUEST_MAX_KEY_BYTES: '100',
    REQUEST_MAX_VALUE_BYTES: '200',
    REQUEST_MAX_HITS_ADDEND: '1000',
    GRPC_MAX_DECOMPRESSED_MSG_SIZE: '2048',
    HTTP_MAX_BODY_BYTES: '4096',
  });
  t.same(set.requestBounds, {
    maxDescriptors: 8,
    maxEntries: 4,
    maxKeyBytes: 100,
    maxValueBytes: 200,
    maxHitsAddend: 1000,
  });
  t.equal(set.grpc.maxDecompressedMsgSize, 2048);
  t.equal(set.httpMaxBodyBytes, 4096);
});

t.test('bad values stop startup with the variable named', async (t) => {
  const bad: [Record<string, string>, RegExp][] = [
    [{ REQUEST_MAX_DESCRIPTORS: '0' }, /^REQUEST_MAX_DESCRIPTORS: must be >= 1/],
    [{ REQUEST_MAX_DESCRIPTOR_ENTRIES: 'many' }, /^REQUEST_MAX_DESCRIPTOR_ENTRIES: invalid integer/],
    [{ REQUEST_MAX_KEY_BYTES: '-1' }, /^REQUEST_MAX_KEY_BYTES: must be >= 1/],
    [{ REQUEST_MAX_VALUE_BYTES: '0' }, /^REQUEST_MAX_VALUE_BYTES: must be >= 1/],
    [{ REQUEST_MAX_HITS_ADDEND: '4294967296' }, /^REQUEST_MAX_HITS_ADDEND: must be <= 4294967295/],
    [{ GRPC_MAX_DECOMPRESSED_MSG_SIZE: '10' }, /^GRPC_MAX_DECOMPRESSED_MSG_SIZE: must be >= 1024/],
    [{ HTTP_MAX_BODY_BYTES: '1k' }, /^HTTP_MAX_BODY_BYTES: invalid integer/],
  ];
  for (const [env, message] of bad) {
    t.throws(() => loadSettings(env), SettingsError, Object.keys(env)[0]);
    t.throws(() => loadSettings(env), { message }, Object.keys(env)[0]);
  }
});
