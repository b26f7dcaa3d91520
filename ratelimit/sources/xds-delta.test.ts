// Our xDS client in delta mode (CONFIG_TYPE=GRPC_XDS_DELTA) against our ADS server over real gRPC on
// loopback: it builds the config from every resource it holds while each push carries only changes,
// drops removed domains, NACKs a bad set and keeps the one it had (and the server records it at that
// version), and resumes after a reconnect with what it has, so only what changed is sent.
import t from 'tap';
import { once } from 'node:events';
import {
  AdsServer,
  InMemorySnapshotCache,
  resourceFromDocument,
  type AckEvent,
} from '../../control-plane/index.js';
import { RATELIMIT_CONFIG_TYPE_URL } from '../../proto/index.js';
import { compileConfig, type ParsedConfigSource, type RateLimitConfig } from '../config/index.js';
import { XdsConfigClient } from './xds-client.js';

const doc = (domain: string, rpu: number) => ({
  domain,
  descriptors: [{ key: 'k', rate_limit: { unit: 'second', requests_per_unit: rpu } }],
});
const res = (name: string, rpu: number) => resourceFromDocument(name, doc(name, rpu));
const domains = (n: number, rpuOf: (i: number) => number) =>
  Array.from({ length: n }, (_, i) => res(`d${i}`, rpuOf(i)));

function limitOf(cfg: RateLimitConfig | undefined, domain: string): number | undefined {
  return cfg?.getLimit(domain, { entries: [{ key: 'k', value: 'v' }] })?.rule.requestsPerUnit;
}

async function until(cond: () => boolean, what: string, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timeout waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

async function startServer(
  t: { teardown(fn: () => unknown): void },
  cache: InMemorySnapshotCache,
  listen = '127.0.0.1:0',
) {
  const server = new AdsServer({ cache, listen });
  await server.start();
  t.teardown(() => server.close());
  return server;
}

/** A delta client feeding a compiled config; `responses` counts the resources of each push. */
function deltaClient(t: { teardown(fn: () => unknown): void }, port: number, nodeId = 'pod-1') {
  const state = {
    current: undefined as RateLimitConfig | undefined,
    documents: [] as string[],
    responses: [] as number[],
  };
  const client = new XdsConfigClient({
    protocol: 'delta',
    nodeId,
    serverUrl: `127.0.0.1:${port}`,
    connectRetryInterval: 100,
    backoff: { initialMs: 100, maxMs: 400, randomFactor: 2, jitter: true },
    onConfig(documents: ParsedConfigSource[]) {
      try {
        state.current = compileConfig(documents);
        state.documents = documents.map((d) => d.name);
        return undefined;
      } catch (err) {
        return (err as Error).message;
      }
    },
  });
  client.on('response', (r) => state.responses.push(r.resources));
  t.teardown(() => client.close());
  return { client, state };
}

const version = (cache: InMemorySnapshotCache) =>
  cache.getSnapshot('*')!.resourceSet(RATELIMIT_CONFIG_TYPE_URL).version;

t.test(
  'one changed domain of many arrives alone; the config holds them all; removal drops one',
  async (t) => {
    const cache = new InMemorySnapshotCache();
    cache.setDefaultSnapshot(domains(50, (i) => i + 1));
    const server = await startServer(t, cache);
    const { client, state } = deltaClient(t, server.port);
    const first = once(client, 'config');
    client.start();
    await first;
    t.same(state.responses, [50]);
    t.equal(limitOf(state.current, 'd10'), 11);
    t.equal(client.version, version(cache), 'the version in use is the snapshot version');

    const second = once(client, 'config');
    cache.setDefaultSnapshot(domains(50, (i) => (i === 10 ? 500 : i + 1)));
    await second;
    t.same(state.responses, [50, 1], 'the push carried one resource');
    t.equal(limitOf(state.current, 'd10'), 500);
    t.equal(limitOf(state.current, 'd11'), 12, 'the others are kept from before');
    t.equal(state.documents.length, 50);

    const third = once(client, 'config');
    cache.setDefaultSnapshot(domains(50, (i) => (i === 10 ? 500 : i + 1)).filter((r) => r.name !== 'd20'));
    await third;
    t.same(state.responses, [50, 1, 0], 'a removal carries no resource');
    t.equal(limitOf(state.current, 'd20'), undefined, 'd20 is no longer served');
    t.equal(state.documents.length, 49);
    t.notOk(client.resourceVersions().has('d20'));
    await until(
      () => server.streams()[0]?.types.get(RATELIMIT_CONFIG_TYPE_URL)?.versionAcked === version(cache),
      'the server to record the ACK',
    );
  },
);

t.test(
  'a bad resource is NACKed: the last good config serves and the server keeps the pod at it',
  async (t) => {
    const cache = new InMemorySnapshotCache();
    cache.setDefaultSnapshot([res('a', 1), res('b', 2)]);
    const good = version(cache);
    const server = await startServer(t, cache);
    const { client, state } = deltaClient(t, server.port);
    const first = once(client, 'config');
    client.start();
    await first;

    // A second resource with domain a: compileConfig refuses the set (MERGE_DOMAIN_CONFIG is off).
    const nacked = once(client, 'nack');
    cache.setDefaultSnapshot([res('a', 1), res('b', 2), resourceFromDocument('a-again', doc('a', 9))]);
    const bad = version(cache);
    const [n] = (await nacked) as [{ message: string; version: string }];
    t.equal(n.version, bad);
    t.match(n.message, /domain/);
    t.equal(limitOf(state.current, 'a'), 1, 'the previous config keeps serving');
    t.equal(client.version, good);
    t.notOk(client.resourceVersions().has('a-again'), 'the refused resource is not kept');
    await until(
      () => server.streams()[0]?.types.get(RATELIMIT_CONFIG_TYPE_URL)?.lastNack?.version === bad,
      'the server to record the NACK',
    );
    const ts = server.streams()[0].types.get(RATELIMIT_CONFIG_TYPE_URL)!;
    t.equal(ts.versionAcked, good, 'the pod is recorded at the version it runs');
    t.match(ts.lastNack?.message, /domain/);

    // A fix: the server diffs against what the pod kept (a, b), so only the changed a is sent.
    const fixed = once(client, 'config');
    cache.setDefaultSnapshot([res('a', 3), res('b', 2)]);
    await fixed;
    t.equal(limitOf(state.current, 'a'), 3);
    t.equal(state.responses.at(-1), 1);
  },
);

t.test(
  'a reconnect resumes with initial_resource_versions: nothing when equal, then only changes',
  async (t) => {
    const cache = new InMemorySnapshotCache();
    cache.setDefaultSnapshot(domains(20, (i) => i + 1));
    let server = await startServer(t, cache);
    const port = server.port;
    const { client, state } = deltaClient(t, port);
    const first = once(client, 'config');
    client.start();
    await first;

    await server.close();
    // Same content on a new server: the client says what it has and is sent nothing.
    server = await startServer(t, cache, `127.0.0.1:${port}`);
    const [resumed] = (await once(server, 'ack')) as [AckEvent];
    t.equal(resumed.resumed, true);
    t.equal(resumed.version, version(cache));
    t.same(state.responses, [20], 'no push on resume');

    await server.close();
    // Changed while away: d3 changed, d19 removed, d20 added.
    const next = domains(21, (i) => (i === 3 ? 300 : i + 1)).filter((r) => r.name !== 'd19');
    cache.setDefaultSnapshot(next);
    const applied = once(client, 'config');
    const third = await startServer(t, cache, `127.0.0.1:${port}`);
    await applied;
    await until(
      () => third.streams()[0]?.types.get(RATELIMIT_CONFIG_TYPE_URL)?.versionAcked === version(cache),
      'the third server to record the ACK',
    );
    t.same(state.responses, [20, 2], 'only d3 and d20 sent after the reconnect');
    t.equal(limitOf(state.current, 'd3'), 300);
    t.equal(limitOf(state.current, 'd20'), 21);
    t.equal(limitOf(state.current, 'd19'), undefined, 'd19 arrived as removed');
    t.equal(limitOf(state.current, 'd0'), 1);
    t.equal(client.version, version(cache));
  },
);
