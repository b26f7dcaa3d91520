// Bounded memory under hostile traffic: the gRPC listener announces and enforces a per-connection
// stream limit (GRPC_MAX_CONCURRENT_STREAMS), and unknown domains from callers do not create
// unbounded statistics series (STATS_MAX_UNKNOWN_DOMAINS).
import t from 'tap';
import * as http2 from 'node:http2';
import { descriptor, startTestApp } from '../test-support.js';

const CONFIG = 'domain: d\ndescriptors:\n  - key: k\n';

t.test('a connection may open at most GRPC_MAX_CONCURRENT_STREAMS streams at once', async (t) => {
  const svc = await startTestApp({ files: { 'd.yaml': CONFIG }, env: { GRPC_MAX_CONCURRENT_STREAMS: '5' } });
  t.teardown(() => svc.close());
  const session = http2.connect(`http://${svc.grpcAddress}`);
  t.teardown(() => session.destroy());
  session.on('error', () => undefined);
  await new Promise<void>((r) => session.once('remoteSettings', () => r()));
  t.equal(session.remoteSettings.maxConcurrentStreams, 5, 'announced in SETTINGS');
  // nghttp2 enforces what it announces (REFUSED_STREAM past it); a conforming client, like this one,
  // queues instead of sending, so the announcement is what the test can see.
});

t.test('default: 1000 streams per connection, not unbounded', async (t) => {
  const svc = await startTestApp({ files: { 'd.yaml': CONFIG } });
  t.teardown(() => svc.close());
  const session = http2.connect(`http://${svc.grpcAddress}`);
  t.teardown(() => session.destroy());
  await new Promise<void>((r) => session.once('remoteSettings', () => r()));
  t.equal(session.remoteSettings.maxConcurrentStreams, 1000);
});

t.test('unknown domains: at most STATS_MAX_UNKNOWN_DOMAINS series, the rest counted in one', async (t) => {
  const svc = await startTestApp({ files: { 'd.yaml': CONFIG }, env: { STATS_MAX_UNKNOWN_DOMAINS: '10' } });
  t.teardown(() => svc.close());
  for (let i = 0; i < 50; i++) await svc.call({ domain: `x${i}`, descriptors: [descriptor(['k', 'v'])] });
  const names = Object.keys(svc.app.stats.snapshot());
  const perDomain = names.filter((n) => n.endsWith('.domain_not_found'));
  t.equal(perDomain.length, 10, 'ten per-domain series');
  t.equal(
    svc.app.stats.snapshot()['ratelimit.service.domain_not_found_unlisted'],
    40,
    'the other 40 requests',
  );
});
