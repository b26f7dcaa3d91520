// ratelimit-config validate: every problem of a config set (and of its quota buckets), as text, JSON or
// CI annotations; exit 1 when it has an error or holds no config.
import { parseArgs } from 'node:util';
import {
  expandPaths,
  hasErrors,
  PROBLEM_FORMATS,
  RLC_KIND,
} from '../../../control-plane/config-set/index.js';
import { bucketProblems } from '../explain-bucket.js';
import { COMMON, loadSet, problemLine, UsageError, type Io } from './common.js';

export const options = { ...COMMON, rlqs: { type: 'boolean' } } as const;

export function run(args: string[], io: Io): number {
  const { values, positionals } = parseArgs({ args, options, allowPositionals: true });
  const format = values.format ?? 'text';
  if (![...PROBLEM_FORMATS, 'json'].includes(format)) throw new UsageError(`unknown --format ${format}`);
  if (positionals.length > 0 && expandPaths(positionals).length === 0) {
    // Fails closed: a typo in a CI path must not pass as "nothing wrong".
    io.err(`ratelimit-config validate: no YAML file (*.yaml, *.yml) in ${positionals.join(', ')}\n`);
    return 1;
  }
  const loaded = loadSet(positionals, values, io);
  if (loaded.documents === loaded.skipped) {
    io.err(
      `ratelimit-config validate: no ratelimit config or ${RLC_KIND} in ${positionals.join(', ')}` +
        ` (${loaded.documents} document(s), all empty or of other kinds)\n`,
    );
    return 1;
  }
  // Rate limit quota buckets: a warning by default (only a service with RLQS on refuses it), an error with --rlqs.
  const set = hasErrors(loaded)
    ? loaded
    : {
        ...loaded,
        problems: [...loaded.problems, ...bucketProblems(loaded, values.rlqs ? 'error' : 'warning')],
      };
  const errors = set.problems.filter((p) => p.severity === 'error').length;
  const warnings = set.problems.length - errors;
  if (format === 'json') {
    io.out(
      JSON.stringify(
        {
          valid: errors === 0,
          errors,
          warnings,
          documents: set.documents,
          skipped: set.skipped,
          domains: [...set.domains.keys()],
          problems: set.problems,
        },
        null,
        2,
      ) + '\n',
    );
  } else {
    for (const p of set.problems) io.out(problemLine(p, format) + '\n');
    if (format === 'text') {
      io.out(
        `${errors === 0 ? 'valid' : 'invalid'}: ${errors} error(s), ${warnings} warning(s) in ${set.documents} document(s)` +
          `${set.skipped ? ` (${set.skipped} skipped: other kinds or empty)` : ''}; domains: ${[...set.domains.keys()].join(', ') || 'none'}\n`,
      );
    }
  }
  return errors === 0 ? 0 : 1;
}
