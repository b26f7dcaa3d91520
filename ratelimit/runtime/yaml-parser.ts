// Parses and validates config YAML on a worker thread, so a large reload does not stall the decision
// path; the main thread only compiles the validated documents, in time slices (buildConfigInSlices). The worker is started on first use
// and reused; if it cannot start, parsing falls back to the main thread.
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { ConfigError, type CheckedDocument, type ConfigSource } from '../config/index.js';
import { parseAndCheck, type ParseReply } from './parse-worker.js';

// The build loads parse-worker.js; source runs (tests, through tsx) load parse-worker.ts with tsx's loader.
const FROM_SOURCE = import.meta.url.endsWith('.ts');
const WORKER_URL = new URL(`./parse-worker${FROM_SOURCE ? '.ts' : '.js'}`, import.meta.url);

/** From source, the worker registers tsx's loader first (Node 20 workers do not take `--import` hooks). */
function sourceBootstrap(): URL {
  const tsxRoot = dirname(createRequire(import.meta.url).resolve('tsx/package.json'));
  const api = pathToFileURL(join(tsxRoot, 'dist', 'esm', 'api', 'index.mjs')).href;
  const code = `const { register } = await import(${JSON.stringify(api)}); register(); await import(${JSON.stringify(WORKER_URL.href)});`;
  return new URL(`data:text/javascript,${encodeURIComponent(code)}`);
}

/**
 * The process' node flags minus module hooks and profilers: a worker cannot load `--import`ed TypeScript
 * (the bootstrap registers tsx itself) and should not write profiles of its own.
 */
export function workerExecArgv(argv: readonly string[] = process.execArgv): string[] {
  const out: string[] = [];
  const withValue = new Set(['--import', '--require', '-r', '--loader', '--experimental-loader']);
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (withValue.has(a)) {
      i++;
      continue;
    }
    if ([...withValue].some((f) => a.startsWith(`${f}=`)) || /^--(cpu|heap)-prof/.test(a)) continue;
    out.push(a);
  }
  return out;
}

export class YamlParser {
  private worker?: Worker;
  private seq = 0;
  /** How many parses ran on the worker and how many fell back to this thread. */
  readonly counts = { worker: 0, inline: 0 };
  private readonly waiting = new Map<
    number,
    { resolve: (r: ParseReply) => void; reject: (e: Error) => void }
  >();

  /** Parsed and validated documents (see parse-worker.ts); throws the first ConfigError. */
  async parse(sources: ConfigSource[]): Promise<CheckedDocument[]> {
    let reply: ParseReply;
    try {
      reply = await this.roundTrip(sources);
    } catch (err) {
      // No worker (e.g. a restricted runtime): parse here, and say once why a reload may stall.
      if (this.counts.inline === 0) {
        process.emitWarning(
          `config parser worker unavailable, parsing on the main thread: ${(err as Error).message}`,
        );
      }
      this.counts.inline++;
      return parseAndCheck(sources);
    }
    this.counts.worker++;
    if (reply.ok) return reply.documents;
    const e = reply.error;
    if ('detail' in e) throw new ConfigError(e.source, e.field, e.detail);
    throw new Error(e.message);
  }

  private roundTrip(sources: ConfigSource[]): Promise<ParseReply> {
    const w = this.ensureWorker();
    const id = ++this.seq;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      w.postMessage({ id, sources });
    });
  }

  private ensureWorker(): Worker {
    if (this.worker) return this.worker;
    const w = new Worker(FROM_SOURCE ? sourceBootstrap() : WORKER_URL, { execArgv: workerExecArgv() });
    w.unref();
    w.on('message', (r: ParseReply) => {
      const p = this.waiting.get(r.id);
      this.waiting.delete(r.id);
      p?.resolve(r);
    });
    const fail = (err: Error) => {
      for (const p of this.waiting.values()) p.reject(err);
      this.waiting.clear();
      this.worker = undefined;
    };
    w.on('error', fail);
    w.on('exit', (code) => fail(new Error(`config parser worker exited with code ${code}`)));
    this.worker = w;
    return w;
  }

  async close(): Promise<void> {
    const w = this.worker;
    this.worker = undefined;
    if (w) await w.terminate();
  }
}
