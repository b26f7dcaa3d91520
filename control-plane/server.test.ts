import t from 'tap';
import { Registry } from 'prom-client';
import { decodeRateLimitConfig, RATELIMIT_CONFIG_TYPE_URL } from '../proto/index.js';
import { InMemorySnapshotCache } from './cache.js';
import { registerAdsMetrics } from './metrics.js';
import { rateLimitConfigResource } from './resources.js';
import { AdsServer } from './server.js';
import type { NackEvent } from './stream-state.js';
import { openRawAdsStream } from './testing.js';

const cfg = (name: string, rpu: number) =>
  rateLimitConfigResource({
    name,
    domain: name,
    descriptors: [{ key: 'k', rateLimit: { unit: 'SECOND', requestsPerUnit: rpu } }],
  });

async function startServer(t: { teardown(fn: () => unknown): void }, cache = new InMemorySnapshotCache()) {
  const server = new AdsServer({ cache, listen: '127.0.0.1:0' });
  await server.start();
  t.teardown(() => server.close());
  return { server, cache, address: `127.0.0.1:${server.port}` };
}

t.test(
  'versions are content hashes: equal content, equal version, in any order, in another cache',
  async (t) => {
    const a = new InMemorySnapshotCache().setDefaultSnapshot([cfg('a', 1), cfg('b', 2)]);
    const b = new InMemorySnapshotCache().setDefaultSnapshot([cfg('b', 2), cfg('a', 1)]);
    const c = new InMemorySnapshotCache().setDefaultSnapshot([cfg('a', 1), cfg('b', 3)]);
    const v = (s: typeof a) => s.resourceSet(RATELIMIT_CONFIG_TYPE_URL).version;
    t.equal(v(a), v(b));
    t.not(v(a), v(c));
    t.match(v(a), /^[0-9a-f]{16}$/);
    t.throws(() => new InMemorySnapshotCache().setDefaultSnapshot([cfg('a', 1), cfg('a', 2)]), /duplicate/);
  },
);

t.test('initial response carries the whole set; an ACK gets no response; an update is pushed', async (t) => {
  const { cache, address, server } = await startServer(t);
  cache.setDefaultSnapshot([cfg('a', 1), cfg('b', 2)]);
  const s = openRawAdsStream(address, 'pod-1');
  t.teardown(() => s.close());
  s.send({ versionInfo: '' });
  const r1 = await s.next();
  t.equal(r1.typeUrl, RATELIMIT_CONFIG_TYPE_URL);
  t.ok(
    r1.resources?.every((r) => r.type_url === RATELIMIT_CONFIG_TYPE_URL),
    'Any carries the type URL',
  );
  t.same(
    r1.resources?.map((r) => decodeRateLimitConfig(r.value!).name),
    ['a', 'b'],
  );
  s.send({ versionInfo: r1.versionInfo, responseNonce: r1.nonce });
  t.ok(await s.quiet(200), 'no response to an ACK of the current version');
  const [st] = server.streams();
  t.equal(st.nodeId, 'pod-1');
  t.equal(st.types.get(RATELIMIT_CONFIG_TYPE_URL)?.versionAcked, r1.versionInfo);

  cache.setDefaultSnapshot([cfg('a', 1), cfg('b', 5)]);
  const r2 = await s.next();
  t.not(r2.versionInfo, r1.versionInfo);
  t.not(r2.nonce, r1.nonce);
  t.equal(r2.resources?.length, 2, 'whole set again');
});

t.test('a stale nonce is ignored', async (t) => {
  const { cache, address } = await startServer(t);
  cache.setDefaultSnapshot([cfg('a', 1)]);
  const s = openRawAdsStream(address, 'pod-1');
  t.teardown(() => s.close());
  s.send({});
  const r1 = await s.next();
  s.send({ versionInfo: r1.versionInfo, responseNonce: r1.nonce });
  cache.setDefaultSnapshot([cfg('a', 2)]);
  const r2 = await s.next();
  // A late request carrying the first nonce must not be taken as the answer to r2.
  s.send({ versionInfo: r1.versionInfo, responseNonce: r1.nonce });
  t.ok(await s.quiet(200));
  cache.setDefaultSnapshot([cfg('a', 3)]);
  t.ok(await s.quiet(200), 'r2 is still awaiting its ACK, so nothing new goes out');
  s.send({ versionInfo: r2.versionInfo, responseNonce: r2.nonce });
  const r3 = await s.next();
  t.equal(decodeRateLimitConfig(r3.resources![0].value!).descriptors[0].rateLimit?.requestsPerUnit, 3);
});

t.test('a NACK is recorded and that version is never resent to the stream', async (t) => {
  const { cache, address, server } = await startServer(t);
  const nacks: NackEvent[] = [];
  server.on('nack', (e) => nacks.push(e));
  cache.setDefaultSnapshot([cfg('a', 1)]);
  const s = openRawAdsStream(address, 'pod-1');
  t.teardown(() => s.close());
  s.send({});
  const good = await s.next();
  s.send({ versionInfo: good.versionInfo, responseNonce: good.nonce });
  cache.setDefaultSnapshot([cfg('a', 2)]);
  const bad = await s.next();
  s.send({
    versionInfo: good.versionInfo,
    responseNonce: bad.nonce,
    errorDetail: { code: 3, message: 'nope' },
  });
  t.ok(await s.quiet(300), 'the NACKed version is not resent');
  t.equal(nacks.length, 1);
  t.equal(nacks[0].version, bad.versionInfo);
  t.equal(nacks[0].message, 'nope');
  const ts = server.streams()[0].types.get(RATELIMIT_CONFIG_TYPE_URL)!;
  t.equal(ts.lastNack?.version, bad.versionInfo);
  t.equal(ts.versionAcked, good.versionInfo);
  // Re-setting the same content does not resend it either.
  cache.setDefaultSnapshot([cfg('a', 2)]);
  t.ok(await s.quiet(200));
  // A fixed config is a new version and goes out.
  cache.setDefaultSnapshot([cfg('a', 4)]);
  const fixed = await s.next();
  t.not(fixed.versionInfo, bad.versionInfo);
});

t.test('a client reconnecting with an old version and a foreign nonce', async (t) => {
  const { cache, address } = await startServer(t);
  cache.setDefaultSnapshot([cfg('a', 1)]);
  const s1 = openRawAdsStream(address, 'pod-1');
  s1.send({});
  const r1 = await s1.next();
  s1.send({ versionInfo: r1.versionInfo, responseNonce: r1.nonce });
  s1.close();

  // Same version: nothing to send (no spurious push after a reconnect).
  const s2 = openRawAdsStream(address, 'pod-1');
  t.teardown(() => s2.close());
  s2.send({ versionInfo: r1.versionInfo, responseNonce: r1.nonce });
  t.ok(await s2.quiet(300));

  // Old version: the current one is sent (no missed update).
  cache.setDefaultSnapshot([cfg('a', 9)]);
  const s3 = openRawAdsStream(address, 'pod-2');
  t.teardown(() => s3.close());
  s3.send({ versionInfo: r1.versionInfo, responseNonce: 'nonce-from-another-replica' });
  const r3 = await s3.next();
  t.not(r3.versionInfo, r1.versionInfo);
  // s2 got the update too (it had no response in flight).
  const r2 = await s2.next();
  t.equal(r2.versionInfo, r3.versionInfo);
});

t.test('per-node snapshots override the default; clearing falls back', async (t) => {
  const { cache, address } = await startServer(t);
  cache.setDefaultSnapshot([cfg('default', 1)]);
  cache.setSnapshot('special', [cfg('special', 1)]);
  const a = openRawAdsStream(address, 'ordinary');
  const b = openRawAdsStream(address, 'special');
  t.teardown(() => (a.close(), b.close()));
  a.send({});
  b.send({});
  const ra = await a.next();
  const rb = await b.next();
  t.equal(decodeRateLimitConfig(ra.resources![0].value!).name, 'default');
  t.equal(decodeRateLimitConfig(rb.resources![0].value!).name, 'special');
  b.send({ versionInfo: rb.versionInfo, responseNonce: rb.nonce });
  cache.clearSnapshot('special');
  const rb2 = await b.next();
  t.equal(rb2.versionInfo, ra.versionInfo);
});

t.test('a node without any snapshot waits, and gets the first one set', async (t) => {
  const { cache, address } = await startServer(t);
  const s = openRawAdsStream(address, 'early');
  t.teardown(() => s.close());
  s.send({});
  t.ok(await s.quiet(200));
  cache.setSnapshot('early', [cfg('x', 1)]);
  const r = await s.next();
  t.equal(r.resources?.length, 1);
});

t.test('stream state is exposed as metrics on the registry passed in', async (t) => {
  const { cache, address, server } = await startServer(t);
  const registry = new Registry();
  registerAdsMetrics(server, { registry });
  cache.setDefaultSnapshot([cfg('a', 1)]);
  const s = openRawAdsStream(address, 'pod-m');
  t.teardown(() => s.close());
  s.send({});
  const r = await s.next();
  s.send({ versionInfo: r.versionInfo, responseNonce: r.nonce });
  await s.quiet(100);
  cache.setDefaultSnapshot([cfg('a', 2)]);
  const r2 = await s.next();
  s.send({ versionInfo: r.versionInfo, responseNonce: r2.nonce, errorDetail: { message: 'bad "unit"' } });
  await s.quiet(100);
  const text = await registry.metrics();
  t.match(text, /ratelimit_control_plane_xds_streams 1/);
  t.match(
    text,
    new RegExp(
      `xds_stream_info\\{[^}]*node_id="pod-m"[^}]*version_sent="${r2.versionInfo}",version_acked="${r.versionInfo}"\\} 1`,
    ),
  );
  t.match(text, /xds_stream_last_nack_info\{[^}]*message="bad \\"unit\\""\}/);
  t.match(text, /xds_acks_total\{node_id="pod-m"\} 1/);
  t.match(text, /xds_nacks_total\{node_id="pod-m"\} 1/);
  t.match(text, /xds_stream_connected_since_seconds\{stream="\d+",node_id="pod-m",peer="[^"]+"\} \d+/);
});

t.test('a first request without node id is refused', async (t) => {
  const { address, server } = await startServer(t);
  const s = openRawAdsStream(address, '');
  t.teardown(() => s.close());
  s.send({ node: {} });
  t.ok(await s.quiet(200));
  t.equal(server.streams().length, 0);
});
