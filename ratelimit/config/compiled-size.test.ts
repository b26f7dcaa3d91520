// What a compiled config keeps on the heap: every reload builds it, and every major GC of the service
// marks it while decisions wait. The 10k-descriptor benchmark config is kept under a bound that the
// compiled form with its /rlconfig lines stored per rule (9.3 MiB) exceeded; it is 6.2 MiB without them.
import t from 'tap';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { cfg10kYaml } from '../../harness/fixtures.js';
import { buildConfigInSlices, checkDocument, parseYamlSource, type CheckedDocument } from './index.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const heapUsed = () => {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
};

t.test('a compiled 10k-descriptor config retains less than 7.5 MiB of heap', async (t) => {
  const src = { name: 'cfg10k.yaml', yaml: cfg10kYaml(1) };
  const { document } = checkDocument(src.name, parseYamlSource(src));
  const checked: CheckedDocument = {
    name: src.name,
    domain: document!.domain,
    descriptors: (document!.descriptors ?? []).map((d) => JSON.stringify(d)),
  };
  const before = heapUsed();
  const config = await buildConfigInSlices([checked], false);
  const retained = heapUsed() - before;
  t.ok(config.hasDomain(document!.domain), 'the config serves its domain');
  t.ok(retained < 7.5 * 1024 * 1024, `retained ${(retained / 1048576).toFixed(2)} MiB`);
});
