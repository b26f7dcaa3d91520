// What the config parse worker loads. It starts on every reload and at start, before the first config
// can be applied, so it must stay small: a file parse loads the YAML readers and the generated schema
// validator, neither Ajv's compiler, the logger (pino), the compiled model nor protobufjs or any gRPC
// code, and an xDS push loads the RateLimitConfig codec (protobufjs) through proto/'s light entry,
// still without @grpc/grpc-js or @grpc/proto-loader.
// The worker is a real worker thread running parse-worker.ts, as the parse pool starts it.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { moduleUrlLiteral, probeInWorker } from '../../harness/module-probe.js';
import { encodeRateLimitConfig } from '../../proto/index.js';
import { checkedEntry, type CheckedDocument } from '../config/index.js';

interface Probe {
  documents: CheckedDocument[];
  /** CommonJS modules (the packages) loaded after the file parse. */
  afterFile: string[];
  /** Our modules (ES modules, file URLs) loaded after the file parse. */
  oursAfterFile: string[];
  afterXds: string[];
}

// Loads the worker's module in a fresh worker thread, runs a file parse then an xDS decode the way the
// worker answers them, and reports the CommonJS modules loaded after each (packages imported from ESM
// load through the CommonJS loader and land in its cache too), and our ES modules after the file parse
// (seen by a module hook).
function probeWorker(message: Uint8Array): Promise<Probe> {
  const code = `
    const ours = [];
    const { registerHooks } = await import('node:module');
    registerHooks({ load(url, context, next) { if (!url.includes('/node_modules/')) ours.push(url); return next(url, context); } });
    const w = await import(${moduleUrlLiteral(import.meta.url, './parse-worker.ts')});
    const loaded = () => Object.keys(createRequire(workerData.base).cache);
    w.parseAndCheck([{ name: 'a.yaml', yaml: 'domain: f\\ndescriptors:\\n  - key: k\\n' }]);
    const afterFile = loaded();
    const oursAfterFile = ours.filter((u) => u.startsWith('file:'));
    const documents = await w.decodeAndCheck([workerData.message]);
    parentPort.postMessage({ documents, afterFile, oursAfterFile, afterXds: loaded() });
  `;
  return probeInWorker<Probe>(code, { base: fileURLToPath(import.meta.url), message });
}

const DEPENDENCIES = Object.keys(
  (
    JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
      dependencies: object;
    }
  ).dependencies,
);

const inPackage = (name: string) => (path: string) => path.includes(`/node_modules/${name}/`);

t.test('the parse worker decodes an xDS push without loading gRPC code', async (t) => {
  const message = encodeRateLimitConfig({
    name: 'r1',
    domain: 'edge',
    descriptors: [{ key: 'k', rateLimit: { unit: 'SECOND', requestsPerUnit: 3 } }],
  });
  const probe = await probeWorker(message);
  t.same(
    probe.documents.map((d) => ({ name: d.name, domain: d.domain, keys: d.keys, first: checkedEntry(d, 0) })),
    [
      {
        name: 'r1',
        domain: 'edge',
        keys: ['k'],
        first: { key: 'k', rate_limit: { requests_per_unit: 3, unit: 'second' } },
      },
    ],
  );
  for (const pkg of ['@grpc/grpc-js', '@grpc/proto-loader']) {
    t.same(probe.afterXds.filter(inPackage(pkg)), [], `no ${pkg} module after the push`);
  }
  t.ok(probe.afterXds.some(inPackage('protobufjs')), 'the push loaded the codec');
  t.same(probe.afterFile.filter(inPackage('protobufjs')), [], 'a file parse loads no protobufjs');
  t.same(probe.afterFile.filter(inPackage('@grpc/grpc-js')), [], 'nor any gRPC code');
});

t.test('a file parse loads the readers and the generated validator only', async (t) => {
  const probe = await probeWorker(encodeRateLimitConfig({ name: 'r', domain: 'd', descriptors: [] }));
  // The service's dependencies only (the test runner's own packages load here too).
  const packages = probe.afterFile.filter((p) => DEPENDENCIES.some((d) => inPackage(d)(p)));
  for (const pkg of ['pino', 'thread-stream', 'sonic-boom', 'protobufjs', '@grpc/grpc-js']) {
    t.same(packages.filter(inPackage(pkg)), [], `no ${pkg} module`);
  }
  t.same(
    packages.filter(inPackage('ajv')).filter((p) => !p.includes('/node_modules/ajv/dist/runtime/')),
    [],
    'of Ajv, only the runtime helpers the generated validator calls (no schema compiler)',
  );
  const ours = probe.oursAfterFile.map((u) => u.slice(u.lastIndexOf('/', u.lastIndexOf('/') - 1) + 1));
  t.notOk(ours.includes('common/index.ts'), "not common/'s face (its logger loads pino)");
  t.notOk(ours.includes('config/index.ts'), "not config/'s face (the compiled model, the builds)");
  t.notOk(ours.includes('config/matcher.ts'), 'not the matcher');
  // What a parse needs: about 25 of our files, the YAML packages (the `yaml` package alone is about 70
  // files, js-yaml one ES module) and one helper of Ajv. The bounds leave room for a few more files, not
  // for another package or face.
  t.ok(ours.length <= 32, `our modules: ${ours.length} (${ours.join(', ')})`);
  t.ok(packages.length <= 80, `modules of our dependencies: ${packages.length}`);
});
