// A config parse is bounded in time and never holds up a reload or a shutdown: past
// CONFIG_PARSE_TIMEOUT the worker is terminated and the file reported as rejected; the last good
// config keeps serving; closing abandons a parse in progress.
import t from 'tap';
import { DEFAULT_YAML_LIMITS } from '../config/index.js';
import { descriptor, eventually, startTestApp } from '../test-support.js';
import { ConfigParsePool } from './parse-pool.js';

/** A "billion laughs" document (also in config/yaml/limits.test.ts). */
function billionLaughs(): string {
  let y = 'a0: &a0 ["lol"]\n';
  for (let i = 1; i <= 9; i++)
    y += `a${i}: &a${i} [${Array(10)
      .fill(`*a${i - 1}`)
      .join(', ')}]\n`;
  return `${y}domain: bomb\ndescriptors:\n  - key: k\n`;
}

/**
 * Within raised limits but slow: a tagged double-quoted scalar of `mb` MiB. The tag sends the file to the
 * full YAML path (config/yaml/read.ts), which costs ~0.15 s of CPU per MiB, so 40 MiB take seconds: far past
 * the deadlines below on any machine. (Untagged, the fast path reads 40 MiB in ~0.3 s, too near them.)
 */
const slowYaml = (mb: number) => `domain: !!str "${'a'.repeat(mb * 1024 * 1024)}"\n`;
const raised = { ...DEFAULT_YAML_LIMITS, maxBytes: 200 * 1024 * 1024, maxScalarLength: 200 * 1024 * 1024 };

const limitYaml = (n: number) =>
  `domain: reload\ndescriptors:\n  - key: k\n    rate_limit: { unit: minute, requests_per_unit: ${n} }\n`;

t.test(
  'a parse past its deadline is stopped and rejected naming the file; the next parse works',
  async (t) => {
    const p = new ConfigParsePool({ limits: raised, timeoutMs: 300 });
    t.teardown(() => p.close());
    const started = performance.now();
    await t.rejects(
      p.parse([
        { name: 'ok.yaml', yaml: 'domain: first\n' },
        { name: 'slow.yaml', yaml: slowYaml(160) },
      ]),
      {
        name: 'ConfigError',
        message: /^slow\.yaml: .*did not finish within 300 ms \(CONFIG_PARSE_TIMEOUT\)/,
      },
    );
    // The whole parse costs ~24 s of CPU on an idle machine, and more on a busy one: half of it tells
    // "stopped at the deadline" from "waited for the parse" however loaded the machine is.
    t.ok(performance.now() - started < 12_000, 'rejected near the deadline, not when the parse would end');
    t.equal(p.counts.timedOut, 1);
    const docs = await p.parse([{ name: 'good.yaml', yaml: 'domain: d\n' }]);
    t.equal(docs[0]!.domain, 'd', 'a new worker parses the next file');
    t.equal(p.counts.inline, 0, 'never parsed on the main thread');
  },
);

t.test('close() does not wait for a parse in progress', async (t) => {
  const p = new ConfigParsePool({ limits: raised, timeoutMs: 600_000 });
  const pending = p.parse([{ name: 'slow.yaml', yaml: slowYaml(60) }]);
  pending.catch(() => undefined);
  await new Promise((r) => setTimeout(r, 300));
  const started = performance.now();
  await p.close();
  t.ok(performance.now() - started < 5000, 'closed at once');
  await t.rejects(pending, /config parser/);
});

t.test(
  'a billion-laughs file in the runtime directory is rejected (config_load_error moves), the good config keeps serving, and a good edit is applied',
  async (t) => {
    const svc = await startTestApp({ files: { 'a.yaml': limitYaml(5) } });
    t.teardown(() => svc.close());
    const logged: string[] = [];
    const orig = svc.app.logger.error.bind(svc.app.logger);
    svc.app.logger.error = ((msg: string) => {
      logged.push(String(msg));
      return orig(msg);
    }) as typeof svc.app.logger.error;
    svc.writeConfig('bomb.yaml', billionLaughs());
    await eventually(
      () => svc.app.stats.snapshot()['ratelimit.service.config_load_error'] === 1,
      20_000,
      'config_load_error',
    );
    t.match(logged.join('\n'), /bomb\.yaml: .*CONFIG_YAML_MAX_NODES/);
    const r = await svc.call({ domain: 'reload', descriptors: [descriptor(['k', '1'])] });
    t.equal(r.statuses[0]!.currentLimit!.requestsPerUnit, 5, 'the last good config serves');
    svc.writeConfig('bomb.yaml', 'domain: other\n');
    svc.writeConfig('a.yaml', limitYaml(9));
    await eventually(
      async () => {
        const x = await svc.call({ domain: 'reload', descriptors: [descriptor(['k', '2'])] });
        return x.statuses[0]!.currentLimit?.requestsPerUnit === 9;
      },
      20_000,
      'the good edit',
    );
    t.pass('the good edit is applied');
  },
);

t.test('a slow file is rejected at CONFIG_PARSE_TIMEOUT through the app and counted', async (t) => {
  const svc = await startTestApp({
    files: { 'a.yaml': limitYaml(5) },
    env: {
      CONFIG_PARSE_TIMEOUT: '300ms',
      CONFIG_YAML_MAX_BYTES: String(200 * 1024 * 1024),
      CONFIG_YAML_MAX_SCALAR_BYTES: String(200 * 1024 * 1024),
    },
  });
  t.teardown(() => svc.close());
  svc.writeConfig('slow.yaml', slowYaml(40));
  await eventually(
    () => svc.app.stats.snapshot()['ratelimit.service.config_load_error'] === 1,
    20_000,
    'config_load_error',
  );
  const r = await svc.call({ domain: 'reload', descriptors: [descriptor(['k', '1'])] });
  t.equal(r.statuses[0]!.currentLimit!.requestsPerUnit, 5, 'the last good config serves');
});

t.test('a file over CONFIG_YAML_MAX_BYTES is rejected by its size, before it is read', async (t) => {
  const svc = await startTestApp({
    files: { 'a.yaml': limitYaml(5) },
    env: { CONFIG_YAML_MAX_BYTES: '1000' },
  });
  t.teardown(() => svc.close());
  const logged: string[] = [];
  const orig = svc.app.logger.error.bind(svc.app.logger);
  svc.app.logger.error = ((msg: string) => {
    logged.push(String(msg));
    return orig(msg);
  }) as typeof svc.app.logger.error;
  svc.writeConfig('big.yaml', `domain: big\n# ${'x'.repeat(5000)}\n`);
  await eventually(
    () => svc.app.stats.snapshot()['ratelimit.service.config_load_error'] === 1,
    20_000,
    'config_load_error',
  );
  t.match(
    logged.join('\n'),
    /big\.yaml: .*size \(\d+ bytes\) exceeds the limit of 1000 \(CONFIG_YAML_MAX_BYTES\)/,
  );
});
