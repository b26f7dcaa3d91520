import t from 'tap';
import { ConfigError } from '../config/index.js';
import { YamlParser } from './yaml-parser.js';

t.test('config YAML is parsed on the worker thread, errors come back as ConfigError', async (t) => {
  const p = new YamlParser();
  t.teardown(() => p.close());
  const docs = await p.parse([{ name: 'a.yaml', yaml: 'domain: d\ndescriptors:\n  - key: k\n' }]);
  t.same(docs, [{ name: 'a.yaml', document: { domain: 'd', descriptors: [{ key: 'k' }] } }]);
  await t.rejects(p.parse([{ name: 'bad.yaml', yaml: 'domain: [unclosed\n' }]), ConfigError);
  await t.rejects(p.parse([{ name: 'bad.yaml', yaml: 'domain: [unclosed\n' }]), {
    message: /^bad\.yaml: error loading config file: yaml: /,
  });
  t.same(p.counts, { worker: 3, inline: 0 }, 'every parse ran on the worker');
});
