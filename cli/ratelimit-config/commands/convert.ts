// ratelimit-config convert: YAML config files to RateLimitConfig custom resources, one per domain,
// written to stdout or one file each under --out; nothing is written when the input is invalid.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { convertSources } from '../convert.js';
import { readSources } from '../../../control-plane/config-set/index.js';
import { COMMON, problemLine, UsageError, type Io } from './common.js';

export const options = { ...COMMON, out: { type: 'string' } } as const;

export function run(args: string[], io: Io): number {
  const { values, positionals } = parseArgs({ args, options, allowPositionals: true });
  const format = values.format ?? 'text';
  if (!['text', 'annotations', 'github'].includes(format))
    throw new UsageError(
      `unknown --format ${format} (text, annotations or github: how refused input is reported)`,
    );
  if (positionals.length === 0) throw new UsageError('no files or folders given');
  const sources = readSources(positionals);
  const result = convertSources(sources, {
    mergeDomainConfig: values['merge-domain-config'] ?? io.env.MERGE_DOMAIN_CONFIG === 'true',
    ...(values.namespace === undefined ? {} : { namespace: values.namespace }),
  });
  if (!result.ok) {
    if (result.message !== undefined) {
      io.err(`ratelimit-config convert: ${result.message}\n`);
      return 2;
    }
    const problems = result.set!.problems;
    for (const p of problems) io.err(problemLine(p, format) + '\n');
    const errors = problems.filter((p) => p.severity === 'error').length;
    io.err(`convert: the config is invalid: ${errors} error(s); nothing written\n`);
    return 1;
  }
  const { resources, check } = result;
  if (resources.length === 0) {
    io.err(`ratelimit-config convert: no ratelimit config document in ${positionals.join(', ')}\n`);
    return 1;
  }
  for (const p of check.problems) {
    const r = resources[p.document - 1];
    io.err(
      `convert: ${p.severity}: resource ${r?.name ?? '?'} (domain ${r?.domain ?? '?'}): ${p.field}: ${p.message}\n`,
    );
  }
  if (values.out === undefined) {
    io.out(resources.map((r) => r.yaml).join('---\n'));
    return 0;
  }
  mkdirSync(values.out, { recursive: true });
  for (const r of resources) {
    const file = join(values.out, `${r.name}.yaml`);
    writeFileSync(file, r.yaml);
    io.err(`${file}: domain ${r.domain} from ${r.files.join(', ')}\n`);
  }
  return 0;
}
