// Incremental (delta) ADS on our server, driven step by step over real gRPC on loopback: a change to
// one domain sends that one resource, removals arrive in removed_resources, a reconnect with
// initial_resource_versions is sent only what differs, explicit subscriptions and unsubscriptions, NACKs,
// the ACK record the operator reads, and the bounds on what a stream sends.
import t from 'tap';
import * as grpc from '@grpc/grpc-js';
import { decodeRateLimitConfig, RATELIMIT_CONFIG_TYPE_URL } from '../proto/index.js';
import { InMemorySnapshotCache } from './cache.js';
import { rateLimitConfigResource } from './resources.js';
import { Registry } from 'prom-client';
import { registerAdsMetrics } from './metrics.js';
import { AdsServer, type AdsServerOptions } from './server.js';
import type { NackEvent } from './stream-state.js';
import { openRawAdsStream, openRawDeltaStream } from './testing.js';

const cfg = (name: string, rpu: number) =>
  rateLimitConfigResource({
    name,
    domain: name,
    descriptors: [{ key: 'k', rateLimit: { unit: 'SECOND', requestsPerUnit: rpu } }],
  });
const many = (n: number, rpuOf: (i: number) => number) =>
  Array.from({ length: n }, (_, i) => cfg(`d${String(i).padStart(3, '0')}`, rpuOf(i)));
const rpu = (value: Uint8Array | undefined) =>
  decodeRateLimitConfig(value!).descriptors[0].rateLimit?.requestsPerUnit;

async function startServer(t: { teardown(fn: () => unknown): void }, opts: Partial<AdsServerOptions> = {}) {
  const cache = new InMemorySnapshotCache();
  const server = new AdsServer({ cache, listen: '127.0.0.1:0', ...opts });
  await server.start();
  t.teardown(() => server.close());
  return { server, cache, address: `127.0.0.1:${server.port}` };
}

const acked = (server: AdsServer, node: string) =>
  server
    .streams()
    .find((s) => s.nodeId === node)
    ?.types.get(RATELIMIT_CONFIG_TYPE_URL)?.versionAcked;

async function until(cond: () => boolean, what: string, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timeout waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

t.test('a change to one of many domains sends a delta stream exactly that resource', async (t) => {
  const { server, cache, address } = await startServer(t, { identifier: 'delta-test' });
  const v1 = cache.setDefaultSnapshot(many(100, (i) => i + 1)).resourceSet(RATELIMIT_CONFIG_TYPE_URL);
  const s = openRawDeltaStream(address, 'pod-1');
  t.teardown(() => s.close());
  s.send({});
  const r1 = await s.next();
  t.equal(r1.resources?.length, 100, 'a new wildcard stream is sent every resource');
  t.equal(r1.systemVersionInfo, v1.version, 'system_version_info is the snapshot version');
  t.equal(r1.controlPlane?.identifier, 'delta-test');
  t.same(r1.removedResources ?? [], []);
  const first = r1.resources![7];
  t.equal(first.name, 'd007');
  t.equal(first.resource?.type_url, RATELIMIT_CONFIG_TYPE_URL);
  t.equal(rpu(first.resource?.value), 8);
  t.match(first.version, /^[0-9a-f]{16}$/, 'each resource has its own version');
  s.send({ responseNonce: r1.nonce });
  await until(() => acked(server, 'pod-1') === v1.version, 'the ACK');
  t.equal(server.streams()[0].protocol, 'delta');

  const encodedBefore = server.deltaResourcesEncoded;
  const v2 = cache
    .setDefaultSnapshot(many(100, (i) => (i === 42 ? 1000 : i + 1)))
    .resourceSet(RATELIMIT_CONFIG_TYPE_URL);
  const r2 = await s.next();
  t.equal(r2.resources?.length, 1, 'one changed domain, one resource');
  t.equal(r2.resources![0].name, 'd042');
  t.equal(rpu(r2.resources![0].resource?.value), 1000);
  t.not(r2.resources![0].version, r1.resources![42].version, 'its version changed');
  t.equal(r2.systemVersionInfo, v2.version);
  t.not(r2.nonce, r1.nonce, 'a nonce per response');
  t.equal(server.deltaResourcesEncoded - encodedBefore, 100, 'the new snapshot is encoded once');
  s.send({ responseNonce: r2.nonce });
  await until(() => acked(server, 'pod-1') === v2.version, 'the ACK of v2');
  t.ok(await s.quiet(200), 'nothing more to send');

  // Versions are content hashes: another cache (a restarted control plane) gives the same ones.
  const other = await startServer(t);
  other.cache.setDefaultSnapshot(many(100, (i) => (i === 42 ? 1000 : i + 1)));
  const s2 = openRawDeltaStream(other.address, 'pod-2');
  t.teardown(() => s2.close());
  s2.send({});
  const fresh = await s2.next();
  t.equal(fresh.resources![42].version, r2.resources![0].version, 'stable across restarts');
  t.equal(fresh.resources![0].version, r1.resources![0].version);
});

t.test('a removed domain arrives in removed_resources', async (t) => {
  const { server, cache, address } = await startServer(t);
  cache.setDefaultSnapshot([cfg('a', 1), cfg('b', 2), cfg('c', 3)]);
  const s = openRawDeltaStream(address, 'pod-1');
  t.teardown(() => s.close());
  s.send({ resourceNamesSubscribe: ['*'] });
  const r1 = await s.next();
  t.same(
    r1.resources?.map((r) => r.name),
    ['a', 'b', 'c'],
  );
  s.send({ responseNonce: r1.nonce });
  const v2 = cache.setDefaultSnapshot([cfg('a', 1), cfg('c', 3)]).resourceSet(RATELIMIT_CONFIG_TYPE_URL);
  const r2 = await s.next();
  t.same(r2.resources ?? [], [], 'nothing added or changed');
  t.same(r2.removedResources, ['b']);
  t.equal(r2.systemVersionInfo, v2.version);
  s.send({ responseNonce: r2.nonce });
  await until(() => acked(server, 'pod-1') === v2.version, 'the ACK');
});

t.test('a NACK keeps the stream; the pod stays at the version it ACKed', async (t) => {
  const { server, cache, address } = await startServer(t);
  const nacks: NackEvent[] = [];
  server.on('nack', (e) => nacks.push(e));
  const v1 = cache.setDefaultSnapshot([cfg('a', 1), cfg('b', 2)]).resourceSet(RATELIMIT_CONFIG_TYPE_URL);
  const s = openRawDeltaStream(address, 'pod-1');
  t.teardown(() => s.close());
  s.send({});
  const r1 = await s.next();
  s.send({ responseNonce: r1.nonce });
  const v2 = cache.setDefaultSnapshot([cfg('a', 1), cfg('b', 3)]).resourceSet(RATELIMIT_CONFIG_TYPE_URL);
  const r2 = await s.next();
  s.send({ responseNonce: r2.nonce, errorDetail: { code: 3, message: 'b is bad' } });
  await until(() => nacks.length === 1, 'the NACK');
  t.equal(nacks[0].version, v2.version);
  t.equal(nacks[0].message, 'b is bad');
  const ts = server.streams()[0].types.get(RATELIMIT_CONFIG_TYPE_URL)!;
  t.equal(ts.versionAcked, v1.version, 'still at the version it ACKed');
  t.equal(ts.lastNack?.version, v2.version);
  t.ok(await s.quiet(200), 'a NACKed version is not sent again');
  // The next snapshot is diffed against what the pod kept (v1), not against what it refused.
  const v3 = cache.setDefaultSnapshot([cfg('a', 5), cfg('b', 2)]).resourceSet(RATELIMIT_CONFIG_TYPE_URL);
  const r3 = await s.next();
  t.same(
    r3.resources?.map((r) => [r.name, rpu(r.resource?.value)]),
    [['a', 5]],
    'only a: b is as the pod has it',
  );
  s.send({ responseNonce: r3.nonce });
  await until(() => acked(server, 'pod-1') === v3.version, 'the ACK of v3');
  t.equal(server.streams().length, 1, 'the same stream throughout');
});

t.test('a reconnect with initial_resource_versions is sent only what differs', async (t) => {
  const { server, cache, address } = await startServer(t);
  cache.setDefaultSnapshot([cfg('a', 1), cfg('b', 2), cfg('c', 3)]);
  const s = openRawDeltaStream(address, 'pod-1');
  s.send({});
  const r1 = await s.next();
  s.send({ responseNonce: r1.nonce });
  const had = Object.fromEntries(r1.resources!.map((r) => [r.name!, r.version!]));
  s.close();
  await until(() => server.streams().length === 0, 'the first stream to close');

  // Unchanged: the pod resumes silently and is recorded at the snapshot version it runs.
  const acks: { version: string; resumed: boolean }[] = [];
  server.on('ack', (e) => acks.push(e));
  const same = openRawDeltaStream(address, 'pod-1');
  t.teardown(() => same.close());
  same.send({ initialResourceVersions: had });
  t.ok(await same.quiet(300), 'nothing sent to a pod that has everything');
  await until(() => acks.length > 0, 'the resumed ACK');
  t.same(
    acks.map((a) => [a.version, a.resumed]),
    [[r1.systemVersionInfo, true]],
  );
  t.equal(acked(server, 'pod-1'), r1.systemVersionInfo);
  same.close();
  await until(() => server.streams().length === 0, 'the second stream to close');

  // Changed while away: b changed, c removed, d added; a is not sent again.
  const v2 = cache
    .setDefaultSnapshot([cfg('a', 1), cfg('b', 20), cfg('d', 4)])
    .resourceSet(RATELIMIT_CONFIG_TYPE_URL);
  const back = openRawDeltaStream(address, 'pod-1');
  t.teardown(() => back.close());
  back.send({ initialResourceVersions: had });
  const r2 = await back.next();
  t.same(
    r2.resources?.map((r) => [r.name, rpu(r.resource?.value)]),
    [
      ['b', 20],
      ['d', 4],
    ],
  );
  t.same(r2.removedResources, ['c']);
  t.equal(r2.systemVersionInfo, v2.version);
});

t.test('explicit subscriptions: only the names subscribed, unsubscribe stops updates', async (t) => {
  const { cache, address } = await startServer(t);
  cache.setDefaultSnapshot([cfg('a', 1), cfg('b', 2), cfg('c', 3)]);
  const s = openRawDeltaStream(address, 'pod-1');
  t.teardown(() => s.close());
  s.send({ resourceNamesSubscribe: ['a', 'b'] });
  const r1 = await s.next();
  t.same(
    r1.resources?.map((r) => r.name),
    ['a', 'b'],
  );
  s.send({ responseNonce: r1.nonce });
  s.send({ resourceNamesUnsubscribe: ['b'] });
  t.ok(await s.quiet(200), 'an unsubscription alone sends nothing');
  cache.setDefaultSnapshot([cfg('a', 1), cfg('b', 9), cfg('c', 9)]);
  const r2 = await s.next();
  t.same(r2.resources ?? [], [], 'b and c changed; neither is subscribed');
  t.same(r2.removedResources ?? [], []);
  s.send({ responseNonce: r2.nonce });
  cache.setDefaultSnapshot([cfg('a', 7), cfg('b', 9), cfg('c', 9)]);
  const r3 = await s.next();
  t.same(
    r3.resources?.map((r) => [r.name, rpu(r.resource?.value)]),
    [['a', 7]],
  );
  s.send({ responseNonce: r3.nonce });
  // Subscribing to c later sends it at once.
  s.send({ resourceNamesSubscribe: ['c'] });
  const r4 = await s.next();
  t.same(
    r4.resources?.map((r) => r.name),
    ['c'],
  );
});

t.test('delta and state-of-the-world streams side by side on one server', async (t) => {
  const { server, cache, address } = await startServer(t);
  cache.setDefaultSnapshot([cfg('a', 1), cfg('b', 2)]);
  const sotw = openRawAdsStream(address, 'sotw-pod');
  const delta = openRawDeltaStream(address, 'delta-pod');
  t.teardown(() => sotw.close());
  t.teardown(() => delta.close());
  sotw.send({ versionInfo: '' });
  delta.send({});
  const [rs, rd] = await Promise.all([sotw.next(), delta.next()]);
  sotw.send({ versionInfo: rs.versionInfo, responseNonce: rs.nonce });
  delta.send({ responseNonce: rd.nonce });
  t.equal(rs.versionInfo, rd.systemVersionInfo, 'the same snapshot version');
  const v2 = cache.setDefaultSnapshot([cfg('a', 1), cfg('b', 3)]).resourceSet(RATELIMIT_CONFIG_TYPE_URL);
  const [s2, d2] = await Promise.all([sotw.next(), delta.next()]);
  t.equal(s2.resources?.length, 2, 'SotW: the whole set');
  t.equal(d2.resources?.length, 1, 'delta: the change');
  sotw.send({ versionInfo: s2.versionInfo, responseNonce: s2.nonce });
  delta.send({ responseNonce: d2.nonce });
  await until(
    () => acked(server, 'sotw-pod') === v2.version && acked(server, 'delta-pod') === v2.version,
    'both ACKs',
  );
  t.same(
    server
      .streams()
      .map((s) => s.protocol)
      .sort(),
    ['delta', 'sotw'],
  );
  const registry = new Registry();
  registerAdsMetrics(server, { registry });
  const text = await registry.metrics();
  t.match(
    text,
    /xds_stream_info\{[^}]*node_id="delta-pod"[^}]*protocol="delta"/,
    'the metric says which protocol',
  );
  t.match(text, /xds_stream_info\{[^}]*node_id="sotw-pod"[^}]*protocol="sotw"/);
});

t.test('bounds: too many or too long names end that stream only, naming the bound', async (t) => {
  const { server, cache, address } = await startServer(t, { delta: { maxNames: 3, maxNameBytes: 8 } });
  cache.setDefaultSnapshot([cfg('a', 1)]);
  const good = openRawDeltaStream(address, 'good');
  t.teardown(() => good.close());
  good.send({});
  await good.next();

  const many = openRawDeltaStream(address, 'many');
  t.teardown(() => many.close());
  many.send({ resourceNamesSubscribe: ['a', 'b'] });
  await many.next();
  many.send({ resourceNamesSubscribe: ['c', 'd'] });
  const e1 = await many.ended;
  t.equal(e1.code, grpc.status.INVALID_ARGUMENT);
  t.match(e1.details, /more than 3 resource names subscribed on one stream \(--max-delta-names\)/);

  const long = openRawDeltaStream(address, 'long');
  t.teardown(() => long.close());
  long.send({ initialResourceVersions: { 'much-too-long-name': 'v' } });
  const e2 = await long.ended;
  t.equal(e2.code, grpc.status.INVALID_ARGUMENT);
  t.match(e2.details, /a resource name of 18 bytes, more than 8 \(--max-delta-name-bytes\)/);

  await until(() => server.streams().length === 1, 'the refused streams to close');
  t.equal(server.streams()[0].nodeId, 'good', 'the other stream is untouched');
});

t.test(
  'a push to many delta streams encodes the changed resource once and assembles one response',
  async (t) => {
    const { server, cache, address } = await startServer(t);
    const resources = many(50, (i) => i + 1);
    cache.setDefaultSnapshot(resources);
    const streams = Array.from({ length: 10 }, (_, i) => openRawDeltaStream(address, `pod-${i}`));
    for (const s of streams) t.teardown(() => s.close());
    for (const s of streams) s.send({});
    const first = await Promise.all(streams.map((s) => s.next(30_000)));
    t.equal(new Set(first.map((r) => r.nonce)).size, 1, 'the same first response to every new stream');
    for (const [i, r] of first.entries()) streams[i].send({ responseNonce: r.nonce });
    const v1 = first[0].systemVersionInfo;
    await until(() => streams.every((_, i) => acked(server, `pod-${i}`) === v1), 'every ACK', 30_000);

    const before = server.deltaResourcesEncoded;
    resources[7] = cfg('d007', 700);
    cache.setDefaultSnapshot(resources);
    const second = await Promise.all(streams.map((s) => s.next(30_000)));
    t.equal(server.deltaResourcesEncoded - before, 1, 'only the changed resource is encoded');
    for (const r of second) {
      t.same(
        r.resources?.map((x) => [x.name, rpu(x.resource?.value)]),
        [['d007', 700]],
      );
    }
    t.equal(new Set(second.map((r) => r.nonce)).size, 1, 'one assembled response, the same bytes to all');
    t.not(second[0].nonce, first[0].nonce, 'a new nonce for the new response');
  },
);
