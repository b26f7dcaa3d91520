// What the config parse worker loads. It starts on every reload and must stay small: a file reload
// loads neither protobufjs nor any gRPC code, and an xDS push loads the RateLimitConfig codec
// (protobufjs) through proto/'s light entry, still without @grpc/grpc-js or @grpc/proto-loader.
// The worker is a real worker thread running parse-worker.ts, as the parse pool starts it.
import t from 'tap';
import { fileURLToPath } from 'node:url';
import { moduleUrlLiteral, probeInWorker } from '../../harness/module-probe.js';
import { encodeRateLimitConfig } from '../../proto/index.js';
import { checkedEntry, type CheckedDocument } from '../config/index.js';

interface Probe {
  documents: CheckedDocument[];
  afterFile: string[];
  afterXds: string[];
}

// Loads the worker's module in a fresh worker thread, runs a file parse then an xDS decode the way the
// worker answers them, and reports the CommonJS modules loaded after each (packages imported from ESM
// load through the CommonJS loader and land in its cache too).
function probeWorker(message: Uint8Array): Promise<Probe> {
  const code = `
    const w = await import(${moduleUrlLiteral(import.meta.url, './parse-worker.ts')});
    const loaded = () => Object.keys(createRequire(workerData.base).cache);
    w.parseAndCheck([{ name: 'a.yaml', yaml: 'domain: f\\ndescriptors:\\n  - key: k\\n' }]);
    const afterFile = loaded();
    const documents = await w.decodeAndCheck([workerData.message]);
    parentPort.postMessage({ documents, afterFile, afterXds: loaded() });
  `;
  return probeInWorker<Probe>(code, { base: fileURLToPath(import.meta.url), message });
}

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
