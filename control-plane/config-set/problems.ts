// The one way a config problem is printed, by `ratelimit-config validate`, `diff`, `explain`, `envoy`,
// `counters` and `ratelimit-control-plane --check` alike: where (file:line:col), the field's path in the
// document, and the message of the validator in ratelimit/config.
import type { Problem } from './config-set.js';

/** Output formats for a list of problems: `text` (the default) and `annotations` print the same line. */
export const PROBLEM_FORMATS = ['text', 'annotations', 'github'] as const;

/**
 * One problem as one line: `<file>:<line>:<col>: [warning: ]<field>: <message>` (a compiler's form, which
 * editors and CI problem matchers read), or a GitHub Actions workflow command for `github`.
 */
export function problemLine(p: Problem, format: string = 'text'): string {
  const field = p.field === '' ? '' : `${p.field}: `;
  if (format === 'github') {
    const esc = (s: string) => s.replace(/%/g, '%25').replace(/\r/g, '%0D').replace(/\n/g, '%0A');
    const prop = (s: string) => esc(s).replace(/:/g, '%3A').replace(/,/g, '%2C');
    return `::${p.severity} file=${prop(p.file)},line=${p.line},col=${p.col},title=${prop(`ratelimit-config: document ${p.document}`)}::${esc(field + p.message)}`;
  }
  return `${p.file}:${p.line}:${p.col}: ${p.severity === 'warning' ? 'warning: ' : ''}${field}${p.message}`;
}
