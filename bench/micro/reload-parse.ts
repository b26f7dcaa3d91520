// CPU of one 10k-descriptor file reload, by stage: parse (fast door vs the `yaml` package alone),
// validate, compile. Interleaved rounds in one process, so both paths see the same machine.
// It stays because both doors it compares are live code (every file with an error takes the `yaml`
// package's), it is the source of the parse figures docs/configuration.md quotes, and the benchmark's
// reload phase only sees the whole reload (worker start, parse, compile slices) as one time.
// Run: taskset -c 1 node --import tsx bench/micro/reload-parse.ts [rounds]
import { buildConfigInSlices, checkDocument, toCheckedDocument } from '../../ratelimit/config/index.js';
import { parseYamlSource, parseYamlSourceFully } from '../../ratelimit/config/index.js';
import { cfg10kYaml } from '../../harness/fixtures.js';

const rounds = Number(process.argv[2] ?? 5);
const src = { name: 'bench_cfg10k.yaml', yaml: cfg10kYaml(1) };
const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

async function once(
  parse: typeof parseYamlSource,
): Promise<{ parse: number; validate: number; compile: number }> {
  let at = cpuMs();
  const doc = parse(src);
  const parsed = cpuMs() - at;
  at = cpuMs();
  const { document } = checkDocument(src.name, doc);
  const checked = toCheckedDocument(src.name, document!);
  const validated = cpuMs() - at;
  at = cpuMs();
  await buildConfigInSlices([checked], false);
  return { parse: parsed, validate: validated, compile: cpuMs() - at };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const results = { full: [] as number[][], fast: [] as number[][] };
await once(parseYamlSource); // warm both
await once(parseYamlSourceFully);
for (let r = 0; r < rounds; r++) {
  for (const [name, fn] of [
    ['full', parseYamlSourceFully],
    ['fast', parseYamlSource],
  ] as const) {
    const x = await once(fn);
    results[name].push([x.parse, x.validate, x.compile]);
  }
}
for (const [name, rows] of Object.entries(results)) {
  const col = (i: number) => median(rows.map((r) => r[i]!)).toFixed(0);
  const total = median(rows.map((r) => r[0]! + r[1]! + r[2]!)).toFixed(0);
  console.log(
    `${name === 'full' ? 'yaml package door' : 'fast door        '}: parse ${col(0)} ms, validate ${col(1)} ms, compile ${col(2)} ms, total ${total} ms CPU (median of ${rounds}; parse range ${Math.min(...rows.map((r) => r[0]!)).toFixed(0)}-${Math.max(...rows.map((r) => r[0]!)).toFixed(0)})`,
  );
}
