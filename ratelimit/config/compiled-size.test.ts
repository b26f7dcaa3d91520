// What a compiled config keeps on the heap: every reload builds it, and every major GC of the service
// marks it while decisions wait. Built from checked documents (as a reload or an xDS push builds it),
// the 10k-descriptor benchmark config holds its top-level keys only, each descriptor compiled on its
// first lookup (6.2 MiB when every descriptor was compiled up front); with every descriptor looked up,
// it stays under the bound that the compiled form with its /rlconfig lines stored per rule (9.3 MiB)
// exceeded.
import t from 'tap';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { cfg10kYaml } from '../../harness/fixtures.js';
import { buildConfigInSlices, checkDocument, parseYamlSource, toCheckedDocument } from './index.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const heapUsed = () => {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
};
const mib = (n: number) => `${(n / 1048576).toFixed(2)} MiB`;

t.test('a 10k-descriptor config compiles its descriptors on first use, within its heap bounds', async (t) => {
  const src = { name: 'cfg10k.yaml', yaml: cfg10kYaml(1) };
  const { document } = checkDocument(src.name, parseYamlSource(src));
  const domain = document!.domain;
  const requests = (document!.descriptors ?? []).map((d) => ({
    entries: [{ key: d.key, value: d.value ?? '' }],
  }));
  const checked = toCheckedDocument(src.name, document!);
  const before = heapUsed();
  const config = await buildConfigInSlices([checked], false);
  const built = heapUsed() - before;
  t.ok(config.hasDomain(domain), 'the config serves its domain');
  t.ok(built < 1.5 * 1024 * 1024, `built: retained ${mib(built)}`);

  let matched = 0;
  for (const r of requests) if (config.getLimit(domain, r) !== undefined) matched++;
  const used = heapUsed() - before;
  t.equal(matched, requests.length, 'every descriptor matches its rule');
  t.ok(used < 7.5 * 1024 * 1024, `every descriptor looked up: retained ${mib(used)}`);
  t.ok(used > built, 'the lookups compiled the descriptors');
});
