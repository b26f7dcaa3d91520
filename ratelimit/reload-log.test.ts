// A file reload's log line, at warning so the default level shows it, says what was loaded from where:
// the domains and the files read.
import t from 'tap';
import { descriptor, eventually, startTestApp } from './test-support.js';

const limitYaml = (n: number) =>
  `domain: reload\ndescriptors:\n  - key: k\n    rate_limit: { unit: minute, requests_per_unit: ${n} }\n`;

t.test('the reload line names the files read', async (t) => {
  const svc = await startTestApp({ files: { 'a.yaml': limitYaml(5) }, env: { LOG_LEVEL: 'warn' } });
  t.teardown(() => svc.close());
  const logged: string[] = [];
  const warn = svc.app.logger.warn.bind(svc.app.logger);
  svc.app.logger.warn = ((msg: string) => {
    logged.push(String(msg));
    return warn(msg);
  }) as typeof svc.app.logger.warn;
  svc.writeConfig('b.yaml', 'domain: other\ndescriptors:\n  - key: k\n');
  await eventually(
    async () => {
      const r = await svc.call({ domain: 'other', descriptors: [descriptor(['k', '1'])] });
      return r.overallCode === 'OK' && logged.some((l) => l.startsWith('configuration applied'));
    },
    20_000,
    'the reload',
  );
  t.match(
    logged.find((l) => l.startsWith('configuration applied')),
    /^configuration applied: 2 domains from .*a\.yaml, .*b\.yaml$/,
  );
});
