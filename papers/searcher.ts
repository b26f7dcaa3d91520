// Searches off the HTTP server's event loop: one worker thread holds the indexes (the float32 rows are shared,
// not copied; the worker builds the int8 first pass for the nD ones) and answers queries one at a time, so a
// burst of similarity queries never stalls /health or other requests. If the worker cannot start or dies, the
// searches run in the server thread (the full scan: same answers, slower), the failure is logged, and the worker
// is started again after RESTART_MIN_MS, doubling up to RESTART_MAX_MS while it keeps failing.
import { Worker } from 'node:worker_threads';
import { fileURLToPath } from 'node:url';
import type { ExactIndex, Hit, Metric } from './knn.js';

/** One index as sent to the worker: the shared rows and what is needed to scan them. */
export interface IndexSpec {
  name: string;
  data: Float32Array;
  dim: number;
  metric: Metric;
  extent: number;
}

export interface SearchRequest {
  id: number;
  name: string;
  query: Float64Array;
  k: number;
  exclude: number[];
}

/** Hits as two arrays (transferred, not cloned), or the error message. */
export interface SearchReply {
  id: number;
  index?: Int32Array;
  distance?: Float64Array;
  error?: string;
}

interface Log {
  info(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export class SearchQueueFull extends Error {}

// Under tsx (tests, `npx tsx papers/main.ts`) this file is .ts and so is the worker's entry.
const WORKER_URL = new URL(
  fileURLToPath(import.meta.url).endsWith('.ts') ? './search-worker.ts' : './search-worker.js',
  import.meta.url,
);

/** Delay before starting a failed or dead worker again; doubles per failure up to the maximum. */
export const RESTART_MIN_MS = 1000;
export const RESTART_MAX_MS = 30_000;

export class Searcher {
  private worker?: Worker;
  private log?: Log;
  private closed = false;
  private restartTimer?: NodeJS.Timeout;
  private restartDelayMs = RESTART_MIN_MS;
  private onMessage = (_m: SearchReply) => {};
  private onError = (_e: Error) => {};
  private onExit = (_code: number) => {};
  private nextId = 1;
  private readonly pending = new Map<
    number,
    { resolve: (h: Hit[]) => void; reject: (e: Error) => void; request: SearchRequest }
  >();
  /** Queries answered by the worker and in this thread (for tests and the benchmark). */
  readonly counts = { worker: 0, thread: 0, restarts: 0 };

  constructor(
    private readonly indexes: Map<string, ExactIndex>,
    /** Queries waiting for the worker, at most; more are refused (SearchQueueFull). */
    public maxPending = 256,
  ) {}

  /** Starts the worker and waits until it has built its indexes; without it, searches run in this thread. */
  async start(log?: Log): Promise<void> {
    this.log = log;
    await this.launch();
  }

  private async launch(): Promise<void> {
    const log = this.log;
    const specs: IndexSpec[] = [...this.indexes].map(([name, x]) => ({
      name,
      data: x.data,
      dim: x.dim,
      metric: x.metric,
      extent: x.extent,
    }));
    const t0 = performance.now();
    try {
      const worker = new Worker(WORKER_URL, { workerData: specs });
      worker.unref();
      // Listeners removed one by one: removeAllListeners would also drop the Worker's own, which keep the
      // message port referenced.
      await new Promise<void>((resolve, reject) => {
        const onMessage = (m: { ready?: boolean }) =>
          done(m.ready ? undefined : new Error('unexpected message'));
        const onExit = (code: number) => done(new Error(`search worker exited with code ${code}`));
        const done = (e?: Error) => {
          worker.off('message', onMessage).off('error', done).off('exit', onExit);
          if (e) {
            void worker.terminate();
            reject(e);
          } else resolve();
        };
        worker.on('message', onMessage).on('error', done).on('exit', onExit);
      });
      if (this.closed) {
        await worker.terminate();
        return;
      }
      this.restartDelayMs = RESTART_MIN_MS;
      this.onMessage = (m: SearchReply) => this.answer(m);
      this.onError = (e: Error) => this.fail(e, log);
      this.onExit = (code: number) => this.fail(new Error(`search worker exited with code ${code}`), log);
      worker.on('message', this.onMessage).on('error', this.onError).on('exit', this.onExit);
      this.worker = worker;
      log?.info({ ms: Math.round(performance.now() - t0) }, 'search worker ready');
    } catch (e) {
      log?.error({ err: e }, 'search worker failed to start; searching in the server thread');
      this.scheduleRestart();
    }
  }

  private scheduleRestart(): void {
    if (this.closed || this.restartTimer) return;
    const delay = this.restartDelayMs;
    this.restartDelayMs = Math.min(delay * 2, RESTART_MAX_MS);
    this.restartTimer = setTimeout(() => {
      this.restartTimer = undefined;
      this.counts.restarts++;
      void this.launch();
    }, delay);
    this.restartTimer.unref();
  }

  get inWorker(): boolean {
    return this.worker !== undefined;
  }

  /** The k nearest rows of index `name` to `query` without `exclude`: ExactIndex.search's answer. */
  search(name: string, query: ArrayLike<number>, k: number, exclude: number[] = []): Promise<Hit[]> {
    const index = this.indexes.get(name);
    if (!index) return Promise.reject(new Error(`no index ${name}`));
    if (!this.worker) {
      this.counts.thread++;
      return Promise.resolve(index.search(query, k, exclude.length ? new Set(exclude) : undefined));
    }
    if (this.pending.size >= this.maxPending)
      return Promise.reject(new SearchQueueFull(`${this.pending.size} searches are already waiting`));
    const request: SearchRequest = { id: this.nextId++, name, query: Float64Array.from(query), k, exclude };
    return new Promise<Hit[]>((resolve, reject) => {
      // The worker keeps the process alive only while it has work (an idle one never holds up exit).
      if (this.pending.size === 0) this.worker!.ref();
      this.pending.set(request.id, { resolve, reject, request });
      this.worker!.postMessage(request);
    });
  }

  private answer(m: SearchReply): void {
    const p = this.pending.get(m.id);
    if (!p) return;
    this.pending.delete(m.id);
    if (this.pending.size === 0) this.worker?.unref();
    if (m.error !== undefined) return p.reject(new Error(m.error));
    this.counts.worker++;
    const hits: Hit[] = new Array<Hit>(m.index!.length);
    for (let i = 0; i < hits.length; i++) hits[i] = { index: m.index![i], distance: m.distance![i] };
    p.resolve(hits);
  }

  /** The worker is gone: its waiting queries are answered here, and so are later ones. */
  private fail(e: Error, log?: Log): void {
    if (!this.worker) return;
    this.detach(this.worker);
    void this.worker.terminate();
    this.worker = undefined;
    log?.error({ err: e }, 'search worker failed; searching in the server thread');
    const waiting = [...this.pending.values()];
    this.pending.clear();
    for (const { resolve, reject, request } of waiting) {
      this.search(request.name, request.query, request.k, request.exclude).then(resolve, reject);
    }
    this.scheduleRestart();
  }

  private detach(w: Worker): void {
    w.off('message', this.onMessage).off('error', this.onError).off('exit', this.onExit);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.restartTimer);
    this.restartTimer = undefined;
    const w = this.worker;
    this.worker = undefined;
    if (w) {
      this.detach(w);
      await w.terminate();
    }
    for (const { reject } of this.pending.values()) reject(new Error('searcher closed'));
    this.pending.clear();
  }
}
