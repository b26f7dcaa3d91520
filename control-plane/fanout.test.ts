// Fan-out cost: a new version pushed to many streams is encoded once, not once per stream, so the CPU
// of a push does not grow with pods × resources. Counted on the resources themselves: every encode of
// a response reads each resource's bytes, so the reads during a push tell how many encodes ran.
import t from 'tap';
import { decodeRateLimitConfig, encodeRateLimitConfig, RATELIMIT_CONFIG_TYPE_URL } from '../proto/index.js';
import { InMemorySnapshotCache, type Resource } from './cache.js';
import { AdsServer } from './server.js';
import { openRawAdsStream, type RawAdsStream } from './testing.js';

let reads = 0;

/** A RateLimitConfig resource whose `value` counts its reads. */
function counted(name: string, rpu: number): Resource {
  const value = encodeRateLimitConfig({
    name,
    domain: name,
    descriptors: [{ key: 'k', rateLimit: { unit: 'SECOND', requestsPerUnit: rpu } }],
  });
  return {
    name,
    typeUrl: RATELIMIT_CONFIG_TYPE_URL,
    get value() {
      reads++;
      return value;
    },
  };
}

const DOMAINS = 10;
const STREAMS = 20;
const snapshot = (rpu: number) => Array.from({ length: DOMAINS }, (_, i) => counted(`d${i}`, rpu + i));

t.test('a version pushed to many streams is encoded once and reaches each of them', async (t) => {
  const cache = new InMemorySnapshotCache();
  const server = new AdsServer({ cache, listen: '127.0.0.1:0', identifier: 'fanout-test' });
  await server.start();
  t.teardown(() => server.close());
  cache.setDefaultSnapshot(snapshot(100));

  const streams: RawAdsStream[] = [];
  for (let i = 0; i < STREAMS; i++) {
    const s = openRawAdsStream(`127.0.0.1:${server.port}`, `pod-${i}`);
    t.teardown(() => s.close());
    streams.push(s);
    s.send({ versionInfo: '' });
  }
  const first = await Promise.all(streams.map((s) => s.next(30_000)));
  for (const [i, r] of first.entries())
    streams[i].send({ versionInfo: r.versionInfo, responseNonce: r.nonce });
  // Every stream has ACKed (no response in flight), so the next version goes to all of them at once.
  const deadline = Date.now() + 30_000;
  while (
    server.streams().filter((s) => s.types.get(RATELIMIT_CONFIG_TYPE_URL)?.awaitingAck === false).length <
      STREAMS &&
    Date.now() < deadline
  )
    await new Promise((r) => setTimeout(r, 10));

  reads = 0;
  cache.setDefaultSnapshot(snapshot(200));
  // One read per resource hashes the version; one encode of the response reads each resource once more.
  // Encoding per stream would read each resource at least STREAMS times.
  t.ok(reads <= 3 * DOMAINS, `${reads} reads of ${DOMAINS} resources for a push to ${STREAMS} streams`);
  t.equal(server.responsesEncoded, 2, 'one encode per version');

  const second = await Promise.all(streams.map((s) => s.next(30_000)));
  for (const [i, r] of second.entries()) {
    t.not(r.versionInfo, first[i].versionInfo, `pod-${i} got the new version`);
    t.equal(r.typeUrl, RATELIMIT_CONFIG_TYPE_URL);
    t.equal(r.controlPlane?.identifier, 'fanout-test');
    t.same(
      r.resources?.map((a) => {
        const m = decodeRateLimitConfig(a.value!);
        return [a.type_url, m.name, m.descriptors[0].rateLimit?.requestsPerUnit];
      }),
      Array.from({ length: DOMAINS }, (_, d) => [RATELIMIT_CONFIG_TYPE_URL, `d${d}`, 200 + d]),
    );
    t.not(r.nonce, first[i].nonce, 'a new nonce for the new version');
  }
  t.equal(new Set(second.map((r) => r.nonce)).size, 1, 'the same bytes, nonce included, to every stream');
});

t.test('versions set while a fan-out is under way: every stream ends on the newest', async (t) => {
  const cache = new InMemorySnapshotCache();
  const server = new AdsServer({ cache, listen: '127.0.0.1:0' });
  await server.start();
  t.teardown(() => server.close());
  // Large responses, so writing them to every stream takes more than one slice of the fan-out.
  const big = (rpu: number) =>
    Array.from({ length: 40 }, (_, i) => ({
      name: `d${i}`,
      typeUrl: RATELIMIT_CONFIG_TYPE_URL,
      value: encodeRateLimitConfig({
        name: `d${i}`,
        domain: `d${i}`,
        descriptors: Array.from({ length: 100 }, (_, j) => ({
          key: 'k',
          value: `v${j}`,
          rateLimit: { unit: 'SECOND' as const, requestsPerUnit: rpu + j },
        })),
      }),
    }));
  cache.setDefaultSnapshot(big(1));
  const streams: RawAdsStream[] = [];
  for (let i = 0; i < STREAMS; i++) {
    const s = openRawAdsStream(`127.0.0.1:${server.port}`, `pod-${i}`);
    t.teardown(() => s.close());
    streams.push(s);
    s.send({ versionInfo: '' });
  }
  // Every pod ACKs whatever it is sent, until it runs the version it waits for.
  const runs = async (s: RawAdsStream, version: string) => {
    for (;;) {
      const r = await s.next(30_000);
      s.send({ versionInfo: r.versionInfo, responseNonce: r.nonce });
      if (r.versionInfo === version) return;
    }
  };
  const v1 = cache.getSnapshot('any')!.resourceSet(RATELIMIT_CONFIG_TYPE_URL).version;
  await Promise.all(streams.map((s) => runs(s, v1)));
  // One stream closes during the fan-out; the others must all reach the last version.
  cache.setDefaultSnapshot(big(2));
  streams[0].close();
  const v3 = cache.setDefaultSnapshot(big(3)).resourceSet(RATELIMIT_CONFIG_TYPE_URL).version;
  await Promise.all(streams.slice(1).map((s) => runs(s, v3)));
  const deadline = Date.now() + 30_000;
  let onV3 = 0;
  while (Date.now() < deadline) {
    onV3 = server.streams().filter((s) => s.types.get(RATELIMIT_CONFIG_TYPE_URL)?.versionAcked === v3).length;
    if (onV3 === STREAMS - 1) break;
    await new Promise((r) => setTimeout(r, 10));
  }
  t.equal(onV3, STREAMS - 1, 'every open stream ACKed the newest version');
});
