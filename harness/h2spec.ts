// h2spec (github.com/summerwind/h2spec, built by scripts/build-go-tools.sh) as a test tool: it runs the
// HTTP/2 conformance cases against a listener and this module reads its JUnit report back into a result a
// tap test can assert on (which cases passed, which failed and why). The gRPC listener's conformance test
// and harness/h2spec.test.ts use it.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { stripVTControlCharacters } from 'node:util';
import { resolveGoTool } from './kube.js';
import { makeTempDir, removeTempDir, runCommand } from './proc.js';

/** The h2spec binary in the tools cache; throws a message saying how to build it when it is missing. */
export const h2specBinary = (env: NodeJS.ProcessEnv = process.env): string => resolveGoTool('h2spec', env);

export interface H2specCase {
  /** h2spec's own id of the case, as its command line takes it: `http2/5.1/8`, `generic/2/2`, `hpack/2.3.3/1`. */
  id: string;
  /** Its description, e.g. "closed: Sends a DATA frame after sending RST_STREAM frame". */
  name: string;
  /** For a failure: what h2spec expected and what it got instead. Empty for a skipped case. */
  message: string;
}

export interface H2specResult {
  passed: number;
  failed: H2specCase[];
  skipped: H2specCase[];
  /** Wall time of the h2spec run, ms. */
  elapsedMs: number;
  /** h2spec's console output (colours stripped), for a failure message. */
  output: string;
}

export interface RunH2specOptions {
  host?: string;
  port: number;
  /** Connect over TLS (h2 by ALPN) without verifying the certificate (`-t -k`). */
  tls?: boolean;
  /**
   * Groups to run, as h2spec names them: `generic`, `http2`, `hpack`, `http2/5.1`, `http2/6.9.1`, ...
   * Default: all of them. Single cases (`http2/5.1/8`) are refused: the report does not say which case of a
   * group it is, so ids are counted per group and need the whole group.
   */
  sections?: readonly string[];
  /** The :path h2spec's requests ask for (`-P`; default "/"). */
  path?: string;
  /**
   * How long h2spec waits for each expected frame (`-o`, whole seconds; default 5). A case whose answer takes
   * longer fails, so on a busy machine this must stay well above h2spec's own default of 2 s.
   */
  caseTimeoutSeconds?: number;
  /** Deadline for the whole run (default 300 s): h2spec is killed and runH2spec rejects after it. */
  timeoutMs?: number;
  env?: NodeJS.ProcessEnv;
}

/** Runs h2spec against host:port and returns its per-case results. Rejects if h2spec cannot run at all. */
export async function runH2spec(opts: RunH2specOptions): Promise<H2specResult> {
  for (const s of opts.sections ?? []) {
    if (!/^(generic|http2|hpack)(\/[0-9]+(\.[0-9]+)*)?$/.test(s)) {
      throw new Error(
        `runH2spec: section ${s} is not a group of h2spec (generic, http2, hpack, http2/5.1, ...)`,
      );
    }
  }
  const binary = h2specBinary(opts.env);
  const dir = makeTempDir('rl-h2spec');
  try {
    const report = join(dir, 'junit.xml');
    const args = [
      '-h',
      opts.host ?? '127.0.0.1',
      '-p',
      String(opts.port),
      '-o',
      String(Math.max(1, Math.ceil(opts.caseTimeoutSeconds ?? 5))), // whole seconds
      '-P',
      opts.path ?? '/',
      '-j',
      report,
      ...(opts.tls ? ['-t', '-k'] : []),
      ...(opts.sections ?? []),
    ];
    const timeoutMs = opts.timeoutMs ?? 300_000;
    const started = Date.now();
    const r = await runCommand(binary, args, { timeoutMs, env: opts.env });
    const elapsedMs = Date.now() - started;
    const output = stripVTControlCharacters(r.stdout + r.stderr);
    if (r.signal) {
      throw new Error(
        `h2spec killed (${r.signal}) after ${elapsedMs} ms (deadline ${timeoutMs} ms):\n${tail(output)}`,
      );
    }
    let xml: string;
    try {
      xml = readFileSync(report, 'utf8');
    } catch {
      // h2spec exits before writing its report when it cannot connect at all.
      throw new Error(`h2spec wrote no report (exit ${r.code}):\n${tail(output)}`);
    }
    const result = { ...parseJUnitReport(xml), elapsedMs, output };
    // Exit 1 means "some case failed"; anything else, or 1 without a failure, is h2spec itself going wrong.
    if (r.code !== (result.failed.length ? 1 : 0)) {
      throw new Error(`h2spec exited ${r.code} with ${result.failed.length} failures:\n${tail(output)}`);
    }
    return result;
  } finally {
    removeTempDir(dir);
  }
}

/**
 * Reads h2spec's JUnit report: one <testsuite package="http2/5.1"> per group, one <testcase classname="...">
 * per case that ran, in order, with a <failure>, <error> or <skipped> child unless it passed. h2spec writes the
 * failure text unescaped (innerxml), so a child is taken up to its closing tag.
 */
export function parseJUnitReport(xml: string): Omit<H2specResult, 'elapsedMs' | 'output'> {
  const out: Omit<H2specResult, 'elapsedMs' | 'output'> = { passed: 0, failed: [], skipped: [] };
  const suiteRe = /<testsuite\b([^>]*?)(\/>|>([\s\S]*?)<\/testsuite>)/g;
  for (const suite of xml.matchAll(suiteRe)) {
    const group = attr(suite[1], 'package');
    const body = suite[3] ?? '';
    const caseRe = /<testcase\b([^>]*?)(\/>|>([\s\S]*?)<\/testcase>)/g;
    let seq = 0;
    for (const tc of body.matchAll(caseRe)) {
      seq++;
      const c: H2specCase = { id: `${group}/${seq}`, name: attr(tc[1], 'classname'), message: '' };
      const inner = tc[3] ?? '';
      const bad = /<(failure|error)\b[^>]*>([\s\S]*?)<\/\1>/.exec(inner);
      if (bad) {
        c.message = failureMessage(unescapeXml(bad[2]));
        out.failed.push(c);
      } else if (/<skipped\b/.test(inner)) {
        out.skipped.push(c);
      } else {
        out.passed++;
      }
    }
  }
  return out;
}

// h2spec's failure text is the expected events, one a line, then the actual one (or "Expect:\n...\nActual:\n...").
function failureMessage(text: string): string {
  const lines = text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && l !== 'Expect:' && l !== 'Actual:');
  if (lines.length < 2) return lines.join('');
  return `expected ${lines.slice(0, -1).join(' or ')}; got ${lines[lines.length - 1]}`;
}

function attr(attrs: string, name: string): string {
  const m = new RegExp(`\\b${name}="([^"]*)"`).exec(attrs);
  return m ? unescapeXml(m[1]) : '';
}

function unescapeXml(s: string): string {
  return s.replace(/&(#x[0-9a-fA-F]+|#[0-9]+|lt|gt|amp|quot|apos);/g, (_, e: string) => {
    if (e[0] === '#')
      return String.fromCodePoint(e[1] === 'x' ? parseInt(e.slice(2), 16) : parseInt(e.slice(1), 10));
    return { lt: '<', gt: '>', amp: '&', quot: '"', apos: "'" }[e]!;
  });
}

const tail = (s: string): string => s.split('\n').slice(-40).join('\n');
