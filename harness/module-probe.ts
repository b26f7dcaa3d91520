// Runs a few lines of ESM in a fresh worker thread with tsx registered (as the config parser's source
// bootstrap does), so a test can import TypeScript modules into an empty module cache and report what
// they loaded. The code reads `workerData` and answers with one `parentPort.postMessage(...)`; both are
// imported for it. Tests only.
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';

/** The reply of `code`, run in a fresh worker with tsx registered and `workerData` passed to it. */
export function probeInWorker<T>(code: string, workerData: unknown): Promise<T> {
  const tsxRoot = dirname(createRequire(import.meta.url).resolve('tsx/package.json'));
  const api = pathToFileURL(join(tsxRoot, 'dist', 'esm', 'api', 'index.mjs')).href;
  const module = `
    import { parentPort, workerData } from 'node:worker_threads';
    import { createRequire } from 'node:module';
    const { register } = await import(${JSON.stringify(api)});
    register();
    ${code}
  `;
  const worker = new Worker(new URL(`data:text/javascript,${encodeURIComponent(module)}`), { workerData });
  return new Promise<T>((resolve, reject) => {
    worker.once('message', (m: T) => {
      resolve(m);
      void worker.terminate();
    });
    worker.once('error', reject);
    worker.once('exit', (c) => reject(new Error(`worker exited (${c}) before replying`)));
  });
}

/** The file URL of `path` relative to the directory of the module at `moduleUrl`, as a JS string literal. */
export function moduleUrlLiteral(moduleUrl: string, path: string): string {
  return JSON.stringify(new URL(path, moduleUrl).href);
}
