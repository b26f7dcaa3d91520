// The debug listener: the index of paths, the loaded config, the statistics, and the profiles
// under /debug/pprof/ in the V8 formats Chrome DevTools opens.
import t from 'tap';
import { descriptor, startTestApp, roomInWindow } from '../test-support.js';

// Counting tests must not straddle a minute boundary (see roomInWindow).
t.beforeEach(() => roomInWindow());

const CONFIG = `
domain: d
descriptors:
  - key: k
    rate_limit: { unit: minute, requests_per_unit: 1 }
`;

t.test('/, /rlconfig and /stats', async (t) => {
  const svc = await startTestApp({ files: { 'd.yaml': CONFIG } });
  t.teardown(() => svc.close());
  await svc.call({ domain: 'd', descriptors: [descriptor(['k', 'x'])] });
  await svc.call({ domain: 'd', descriptors: [descriptor(['k', 'x'])] });

  const index = await (await fetch(`${svc.debugUrl}/`)).text();
  for (const p of ['/rlconfig', '/stats', '/debug/pprof/']) t.match(index, new RegExp(`^${p}: `, 'm'), p);
  t.match(await (await fetch(`${svc.debugUrl}/rlconfig`)).text(), /^d\.k: unit=MINUTE requests_per_unit=1/m);
  const stats = await (await fetch(`${svc.debugUrl}/stats`)).text();
  t.match(stats, /^ratelimit\.service\.rate_limit\.d\.k\.total_hits: 2$/m);
  t.match(stats, /^ratelimit\.service\.rate_limit\.d\.k\.over_limit: 1$/m);
  t.match(stats, /^ratelimit\.service\.config_load_success: 1$/m);
  t.match(stats, /^ratelimit_server\.ShouldRateLimit\.total_requests: 2$/m);
  t.match(stats, /^ratelimit_server\.ShouldRateLimit\.response_time: count=2 mean_ms=[0-9.]+$/m);
});

t.test('profiles are off by default: no heap snapshot, no CPU profile, the index says how', async (t) => {
  const svc = await startTestApp({ files: { 'd.yaml': CONFIG } });
  t.teardown(() => svc.close());
  t.equal((await fetch(`${svc.debugUrl}/debug/pprof/heap`)).status, 404);
  t.equal((await fetch(`${svc.debugUrl}/debug/pprof/profile?seconds=1`)).status, 404);
  t.match(await (await fetch(`${svc.debugUrl}/debug/pprof/`)).text(), /DEBUG_PPROF_ENABLED=true/);
});

t.test(
  '/debug/pprof/ with DEBUG_PPROF_ENABLED: CPU profile for ?seconds=N and a heap snapshot',
  async (t) => {
    const svc = await startTestApp({ files: { 'd.yaml': CONFIG }, env: { DEBUG_PPROF_ENABLED: 'true' } });
    t.teardown(() => svc.close());
    const help = await (await fetch(`${svc.debugUrl}/debug/pprof/`)).text();
    t.match(help, /\/debug\/pprof\/profile\?seconds=N/);
    t.match(help, /\/debug\/pprof\/heap/);

    const started = Date.now();
    const pending = fetch(`${svc.debugUrl}/debug/pprof/profile?seconds=0.4`);
    await new Promise((r) => setTimeout(r, 100));
    const busy = await fetch(`${svc.debugUrl}/debug/pprof/profile?seconds=1`);
    t.equal(busy.status, 409, 'one CPU profile at a time');
    // Some work for the profiler to see.
    for (let i = 0; i < 20; i++) await svc.call({ domain: 'd', descriptors: [descriptor(['k', String(i)])] });
    const res = await pending;
    t.ok(Date.now() - started >= 400, 'sampled for the asked duration');
    t.equal(res.status, 200);
    t.match(res.headers.get('content-disposition'), /attachment; filename="cpu-.*\.cpuprofile"/);
    const profile = (await res.json()) as {
      nodes: unknown[];
      startTime: number;
      endTime: number;
      samples: number[];
    };
    t.ok(profile.nodes.length > 0, 'a .cpuprofile: nodes');
    t.ok(profile.endTime > profile.startTime, 'start and end times');
    t.ok(Array.isArray(profile.samples), 'samples');
    t.equal((await fetch(`${svc.debugUrl}/debug/pprof/profile?seconds=0`)).status, 400);
    t.equal((await fetch(`${svc.debugUrl}/debug/pprof/profile?seconds=abc`)).status, 400);

    const heap = await fetch(`${svc.debugUrl}/debug/pprof/heap`);
    t.equal(heap.status, 200);
    t.match(heap.headers.get('content-disposition'), /attachment; filename="heap-.*\.heapsnapshot"/);
    const text = await heap.text();
    // The header object before the big arrays says what DevTools needs to read the rest.
    const header = JSON.parse(text.slice(0, text.indexOf(',"nodes":')) + '}') as {
      snapshot: { meta: { node_fields: string[] }; node_count: number };
    };
    t.ok(
      header.snapshot.meta.node_fields.includes('name'),
      'a V8 heap snapshot (DevTools Memory tab format)',
    );
    t.ok(header.snapshot.node_count > 1000);
    t.match(text.slice(-3), /\]\}\s*$/, 'complete');
  },
);
