// The control plane's directory source reads config YAML with the service's bounds (checked before
// anything expands), so a hostile file is rejected there too.
import t from 'tap';
import { parseConfigFile } from './file-source.js';

t.test('the directory source bounds its YAML as the service does (a billion-laughs file)', async (t) => {
  let y = 'a0: &a0 ["lol"]\n';
  for (let i = 1; i <= 9; i++)
    y += `a${i}: &a${i} [${Array(10)
      .fill(`*a${i - 1}`)
      .join(', ')}]\n`;
  t.throws(() => parseConfigFile('bomb.yaml', `${y}domain: bomb\n`), {
    message: /^bomb\.yaml: .*CONFIG_YAML_MAX_NODES/,
  });
  t.throws(() => parseConfigFile('long.yaml', `domain: "${'x'.repeat(100 * 1024)}"\n`), {
    message: /^long\.yaml: .*CONFIG_YAML_MAX_SCALAR_BYTES/,
  });
});
