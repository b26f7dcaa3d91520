// The layer rule as eslint.config.js configures it: each case lints a line of source as if it were a
// file at the given path (the file need not exist) and checks whether layers/imports complains.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { ESLint } from 'eslint';

const eslint = new ESLint({ cwd: process.cwd() });

async function complaints(filePath: string, code: string): Promise<string[]> {
  const [r] = await eslint.lintText(`${code}\nexport const used = 1;\n`, { filePath });
  return r.messages.filter((m) => m.ruleId === 'layers/imports').map((m) => m.message);
}

const refused: [string, string, RegExp][] = [
  ['common/x.ts', "import { a } from '../proto/index.js';", /common\/ may import only nothing of ours/],
  ['common/x.ts', "export * from '../ratelimit/config/index.js';", /common\/ may import only/],
  [
    'proto/x.ts',
    "import type { A } from '../ratelimit/config/index.js';",
    /proto\/ may import only common\//,
  ],
  [
    'ratelimit/service/x.ts',
    "import type { A } from '../../control-plane/index.js';",
    /ratelimit\/service\/ may import only/,
  ],
  [
    'control-plane/x.ts',
    "import { a } from '../ratelimit/redis/index.js';",
    /may import only ratelimit\/config\//,
  ],
  ['control-plane/x.ts', "import { a } from '../operator/operator.js';", /control-plane\/ may import only/],
  [
    'operator/x.ts',
    "import { a } from '../control-plane/server.js';",
    /reach control-plane\/ through its index.ts/,
  ],
  [
    'ratelimit/service/x.ts',
    "import { a } from '../config/matcher.js';",
    /reach ratelimit\/config\/ through/,
  ],
  [
    'ratelimit/config/x.ts',
    "import { a } from '../../proto/units.js';",
    /reach proto\/ through its index.ts, not proto\/units.ts/,
  ],
  [
    'common/x.ts',
    "import { a } from '../proto/ratelimit-config.js';",
    /common\/ may import only nothing of ours/,
  ],
  [
    'ratelimit/memory/x.ts',
    "import { a } from '../limiter/index.js';",
    /ratelimit\/memory\/ may import only ratelimit\/counting\/, ratelimit\/settings\/, proto\//,
  ],
  [
    'ratelimit/counting/x.ts',
    "import { a } from '../redis/index.js';",
    /ratelimit\/counting\/ may import only/,
  ],
  ['ratelimit/config/x.ts', "import { a } from '../app.js';", /ratelimit\/config\/ may import only proto\//],
  ['ratelimit/x.ts', "import { a } from '../e2e/harness/tls.js';", /e2e\/ is test infrastructure/],
  ['control-plane/x.ts', "const m = await import('../harness/tls.js');", /harness\/ is test infrastructure/],
  ['operator/x.ts', "import { a } from '../bench/run.js';", /bench\/ is test infrastructure/],
  ['papers/src/x.ts', "import { a } from '../../common/index.js';", /papers\/ and common\/ are separate/],
  ['ratelimit/x.ts', "import { a } from '../papers/src/y.js';", /ratelimit\/ and papers\/ are separate/],
];

for (const [path, code, why] of refused) {
  t.test(`refused in ${path}: ${code}`, async (t) => {
    const m = await complaints(path, code);
    t.equal(m.length, 1, m.join('; '));
    t.match(m[0], why);
  });
}

const allowed: [string, string][] = [
  ['proto/x.ts', "import { a } from '../common/index.js';"],
  ['ratelimit/service/x.ts', "import { a } from '../../proto/index.js';"],
  ['ratelimit/service/x.ts', "import { a } from './errors.js';"],
  ['ratelimit/config/x.ts', "import { a } from '../../proto/ratelimit-config.js';"],
  ['control-plane/x.ts', "import { a } from '../ratelimit/config/index.js';"],
  ['operator/x.ts', "import { a } from './kube/index.js';"],
  ['operator/kube/x.ts', "import { a } from './reflector.js';"],
  ['control-plane/x.test.ts', "import { a } from '../ratelimit/sources/index.js';"],
  ['ratelimit/x.test.ts', "import { a } from '../harness/tls.js';"],
  ['e2e/x.test.ts', "import { a } from '../control-plane/testing.js';"],
  ['crds/generate.ts', "import { a } from '../ratelimit/config/index.js';"],
  ['ratelimit/x.ts', "import { a } from 'node:fs';"],
  ['ratelimit/counting/x.ts', "import { a } from '../../proto/index.js';"],
  ['ratelimit/counting/x.ts', "import { a } from '../config/index.js';"],
  ['ratelimit/app.ts', "import { a } from './redis/index.js';"],
];

for (const [path, code] of allowed) {
  t.test(`allowed in ${path}: ${code}`, async (t) => {
    t.same(await complaints(path, code), []);
  });
}

t.test("docs/development.md's table of ratelimit/'s folders is the rule's", async (t) => {
  const inside = (path: string) => path.replace(/^ratelimit\//, '') + '/';
  const config = await eslint.calculateConfigForFile('ratelimit/app.ts');
  const layers: Record<string, string[]> = config.rules['layers/imports'][1].layers;
  const fromRule = Object.entries(layers)
    .filter(([folder]) => folder.startsWith('ratelimit/'))
    .map(([folder, may]) => [inside(folder), may.map(inside)]);
  const page = readFileSync('docs/development.md', 'utf8');
  const section = page.slice(page.indexOf('| Folder of `ratelimit/` | May import |'));
  const fromDocs = [...section.matchAll(/^\| `([a-z-]+\/)` \| (.*) \|$/gm)].map(([, folder, may]) => [
    folder,
    may === 'nothing of `ratelimit/`' ? [] : may.split(', ').map((m) => m.replace(/`/g, '')),
  ]);
  t.ok(fromRule.length > 0);
  t.same(fromDocs, fromRule);
});
