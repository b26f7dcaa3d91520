// A file reload's log line says what was loaded from where: the domains and the files read.
import t from 'tap';
import { descriptor, eventually, startTestApp } from './test-support.js';

const limitYaml = (n: number) =>
  `domain: reload\ndescriptors:\n  - key: k\n    rate_limit: { unit: minute, requests_per_unit: ${n} }\n`;

t.test('the reload line names the files read', async (t) => {
  const svc = await startTestApp({ files: { 'a.yaml': limitYaml(5) }, env: { LOG_LEVEL: 'info' } });
  t.teardown(() => svc.close());
  const logged: string[] = [];
  const info = svc.app.logger.info.bind(svc.app.logger);
  svc.app.logger.info = ((msg: string) => {
    logged.push(String(msg));
    return info(msg);
  }) as typeof svc.app.logger.info;
  svc.writeConfig('b.yaml', 'domain: other\ndescriptors:\n  - key: k\n');
  await eventually(
    async () => {
      const r = await svc.call({ domain: 'other', descriptors: [descriptor(['k', '1'])] });
      return r.overallCode === 'OK' && logged.some((l) => l.startsWith('configuration reloaded'));
    },
    20_000,
    'the reload',
  );
  t.match(
    logged.find((l) => l.startsWith('configuration reloaded')),
    /^configuration reloaded: 2 domains from .*a\.yaml, .*b\.yaml$/,
  );
});
