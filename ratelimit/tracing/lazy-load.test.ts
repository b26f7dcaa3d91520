// The OpenTelemetry SDK is loaded only when tracing is on: importing the app and asking for the tracing
// with TRACING_ENABLED=false loads no @opentelemetry module but the small API package (which prom-client
// loads for its exemplars); the SDK, exporters and their gRPC and protobuf code were ~4 MB of heap that
// every major GC marks while the service decides. With TRACING_ENABLED=true, loadTracing loads them. Run in a fresh
// worker thread (its own module cache) with tsx registered, as the parse worker test does.
import t from 'tap';
import { fileURLToPath } from 'node:url';
import { moduleUrlLiteral, probeInWorker } from '../../harness/module-probe.js';

interface Probe {
  off: string[];
  offTracing: unknown;
  on: string[];
  onTracing: boolean;
}

function probe(): Promise<Probe> {
  const at = (p: string) => moduleUrlLiteral(import.meta.url, p);
  const code = `
    await import(${at('../app.ts')});
    const { loadTracing } = await import(${at('./index.ts')});
    const { loadSettings } = await import(${at('../settings/index.ts')});
    const otel = () =>
      Object.keys(createRequire(workerData.base).cache).filter(
        (p) => p.includes('/node_modules/@opentelemetry/') && !p.includes('/node_modules/@opentelemetry/api/'),
      );
    const offTracing = await loadTracing(loadSettings({}).tracing);
    const off = otel();
    const tracing = await loadTracing(loadSettings({ TRACING_ENABLED: 'true', TRACING_SAMPLING_RATE: '0' }).tracing);
    const on = otel();
    await tracing?.close();
    parentPort.postMessage({ off, offTracing: offTracing ?? null, on, onTracing: tracing !== undefined });
  `;
  return probeInWorker<Probe>(code, { base: fileURLToPath(import.meta.url) });
}

t.test('the app loads OpenTelemetry only when tracing is enabled', async (t) => {
  const p = await probe();
  t.equal(p.offTracing, null, 'no tracing when TRACING_ENABLED is false');
  t.same(p.off, [], 'no OpenTelemetry SDK module loaded');
  t.ok(p.onTracing, 'a tracing when TRACING_ENABLED is true');
  t.ok(p.on.length > 0, `TRACING_ENABLED=true loads OpenTelemetry (${p.on.length} modules)`);
});
