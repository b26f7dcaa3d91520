// ratelimit-config diff: what changes between two config sets (rules added, removed, limits changed),
// as Markdown or JSON; exit 1 when something changed.
import { parseArgs } from 'node:util';
import { diffSets, formatDiffMarkdown } from '../diff.js';
import { COMMON, loadSet, requireValid, UsageError, type Io } from './common.js';

export const options = COMMON;

export function run(args: string[], io: Io): number {
  const { values, positionals } = parseArgs({ args, options, allowPositionals: true });
  const format = values.format ?? 'markdown';
  if (!['markdown', 'json'].includes(format)) throw new UsageError(`unknown --format ${format}`);
  if (positionals.length !== 2) throw new UsageError('diff takes two paths: <old> <new>');
  const before = loadSet([positionals[0]!], values, io);
  const after = loadSet([positionals[1]!], values, io);
  if (
    !requireValid(before, `diff: ${positionals[0]}`, io) ||
    !requireValid(after, `diff: ${positionals[1]}`, io)
  ) {
    return 2;
  }
  const changes = diffSets(before, after);
  if (format === 'json') io.out(JSON.stringify({ changed: changes.length > 0, changes }, null, 2) + '\n');
  else io.out(formatDiffMarkdown(changes));
  return changes.length > 0 ? 1 : 0;
}
