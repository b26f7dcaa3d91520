// The OpenTelemetry SDK is loaded only when tracing is on: importing the app and asking for the tracing
// with TRACING_ENABLED=false loads no @opentelemetry module but the small API package (which prom-client
// loads for its exemplars); the SDK, exporters and their gRPC and protobuf code were ~4 MB of heap that
// every major GC marks while the service decides. With TRACING_ENABLED=true, loadTracing loads them. Run in a fresh
// worker thread (its own module cache) with tsx registered, as the parse worker test does.
import t from 'tap';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';

interface Probe {
  off: string[];
  offTracing: unknown;
  on: string[];
  onTracing: boolean;
}

function probe(): Promise<Probe> {
  const here = fileURLToPath(import.meta.url);
  const tsxRoot = dirname(createRequire(import.meta.url).resolve('tsx/package.json'));
  const api = pathToFileURL(join(tsxRoot, 'dist', 'esm', 'api', 'index.mjs')).href;
  const at = (p: string) => JSON.stringify(pathToFileURL(join(dirname(here), p)).href);
  const code = `
    import { parentPort, workerData } from 'node:worker_threads';
    import { createRequire } from 'node:module';
    const { register } = await import(${JSON.stringify(api)});
    register();
    await import(${at('../app.ts')});
    const { loadTracing } = await import(${at('index.ts')});
    const { loadSettings } = await import(${at('../settings/index.ts')});
    const otel = () => Object.keys(createRequire(workerData.base).cache).filter((p) => p.includes('/node_modules/@opentelemetry/') && !p.includes('/node_modules/@opentelemetry/api/'));
    const offTracing = await loadTracing(loadSettings({}).tracing);
    const off = otel();
    const tracing = await loadTracing(loadSettings({ TRACING_ENABLED: 'true', TRACING_SAMPLING_RATE: '0' }).tracing);
    const on = otel();
    await tracing?.close();
    parentPort.postMessage({ off, offTracing: offTracing ?? null, on, onTracing: tracing !== undefined });
  `;
  const worker = new Worker(new URL(`data:text/javascript,${encodeURIComponent(code)}`), {
    workerData: { base: here },
  });
  return new Promise<Probe>((resolve, reject) => {
    worker.once('message', (m: Probe) => {
      resolve(m);
      void worker.terminate();
    });
    worker.once('error', reject);
    worker.once('exit', (c) => reject(new Error(`worker exited (${c}) before replying`)));
  });
}

t.test('the app loads OpenTelemetry only when tracing is enabled', async (t) => {
  const p = await probe();
  t.equal(p.offTracing, null, 'no tracing when TRACING_ENABLED is false');
  t.same(p.off, [], 'no OpenTelemetry SDK module loaded');
  t.ok(p.onTracing, 'a tracing when TRACING_ENABLED is true');
  t.ok(p.on.length > 0, `TRACING_ENABLED=true loads OpenTelemetry (${p.on.length} modules)`);
});
