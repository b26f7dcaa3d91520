// xDS sizes agree: a resource set larger than the maximum message size (one number on both sides,
// XDS_MAX_MESSAGE_BYTES by default) is not sent; the control plane says so (log, metric, event) and
// the pod keeps its config instead of reconnecting in a loop.
import t from 'tap';
import { Registry } from 'prom-client';
import { XDS_MAX_MESSAGE_BYTES } from '../proto/index.js';
import { loadSettings } from '../ratelimit/settings/index.js';
import { InMemorySnapshotCache } from './cache.js';
import { registerAdsMetrics } from './metrics.js';
import { rateLimitConfigResource } from './resources.js';
import { AdsServer } from './server.js';
import type { OversizeEvent } from './stream-state.js';
import { openRawAdsStream } from './testing.js';

const big = (name: string, n: number) =>
  rateLimitConfigResource({
    name,
    domain: name,
    descriptors: Array.from({ length: n }, (_, i) => ({
      key: `key-${i}`,
      value: `value-${i}-${'v'.repeat(40)}`,
      rateLimit: { unit: 'SECOND' as const, requestsPerUnit: 10 },
    })),
  });

t.test('both sides default to the same maximum', async (t) => {
  t.equal(loadSettings({}).xds.maxMsgSizeBytes, XDS_MAX_MESSAGE_BYTES);
  t.equal(XDS_MAX_MESSAGE_BYTES, 4 * 1024 * 1024);
});

t.test(
  'an oversize snapshot is refused with a log, a metric and an event; a smaller one is sent',
  async (t) => {
    const cache = new InMemorySnapshotCache();
    const logged: string[] = [];
    const logger = {
      error: (_o: unknown, msg?: string) => logged.push(String(msg)),
      warn: () => undefined,
      info: () => undefined,
      debug: () => undefined,
    };
    const server = new AdsServer({
      cache,
      listen: '127.0.0.1:0',
      maxSendMessageBytes: 64 * 1024,
      logger: logger as never,
    });
    const registry = new Registry();
    registerAdsMetrics(server, { registry });
    await server.start();
    t.teardown(() => server.close());
    const events: OversizeEvent[] = [];
    server.on('oversize', (e) => events.push(e));
    cache.setDefaultSnapshot([big('huge', 2000), big('small', 1)]);
    const s = openRawAdsStream(`127.0.0.1:${server.port}`, 'pod-1');
    t.teardown(() => s.close());
    s.send({ versionInfo: '' });
    t.ok(await s.quiet(500), 'nothing sent');
    t.equal(events.length, 1, 'one oversize event');
    t.equal(events[0]!.stream.nodeId, 'pod-1');
    t.ok(events[0]!.bytes > 64 * 1024, `${events[0]!.bytes} bytes`);
    t.same(events[0]!.resources, ['huge', 'small'], 'names the domains');
    t.match(logged.join('\n'), /exceeds the 65536-byte maximum .*node pod-1 keeps its config/);
    t.match(
      await registry.metrics(),
      /ratelimit_control_plane_xds_response_too_large_total\{node_id="pod-1",[^}]*\} 1/,
    );
    t.equal(server.streams().length, 1, 'the stream stays open (no reconnect loop)');
    const nack = server.streams()[0]!.types.get(events[0]!.typeUrl)!.lastNack;
    t.match(
      nack?.message,
      /not sent by the control plane: .*over the 65536-byte maximum/,
      'reported as the pod state the operator reads',
    );

    cache.setDefaultSnapshot([big('small', 1)]);
    const r = await s.next();
    t.equal(r.resources?.length, 1, 'a snapshot within the limit is sent');
    t.equal(events.length, 1);
  },
);
