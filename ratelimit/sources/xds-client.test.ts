// Our xDS client against our ADS server over real gRPC on loopback. (The server is test
// infrastructure here; control-plane/server.test.ts drives the protocol step by step.)
import t from 'tap';
import { once } from 'node:events';
import {
  AdsServer,
  InMemorySnapshotCache,
  resourceFromDocument,
  type AckEvent,
} from '../../control-plane/index.js';
import { makeCerts } from '../../harness/tls.js';
import { RATELIMIT_CONFIG_TYPE_URL } from '../../proto/index.js';
import { compileConfig, type ParsedConfigSource, type RateLimitConfig } from '../config/index.js';
import { ExponentialBackoff } from './backoff.js';
import { XdsConfigClient, type XdsConfigClientOptions } from './xds-client.js';

const doc = (domain: string, rpu: number, unit = 'second') => ({
  domain,
  descriptors: [{ key: 'k', rate_limit: { unit, requests_per_unit: rpu } }],
});
const res = (name: string, d: unknown) => resourceFromDocument(name, d);

/** What the service does with a config: compile it (throws ConfigError) and swap it in. */
function fakeService() {
  const s = {
    current: undefined as RateLimitConfig | undefined,
    applied: [] as string[],
    onConfig(documents: ParsedConfigSource[], version: string): string | undefined {
      try {
        s.current = compileConfig(documents);
        s.applied.push(version);
        return undefined;
      } catch (err) {
        return (err as Error).message;
      }
    },
  };
  return s;
}

function limitOf(cfg: RateLimitConfig | undefined, domain: string): number | undefined {
  return cfg?.getLimit(domain, { entries: [{ key: 'k', value: 'v' }] })?.rule.requestsPerUnit;
}

async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timeout waiting for ${what}`)), ms);
  });
  try {
    return await Promise.race([p, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

const fastBackoff = { initialMs: 100, maxMs: 400, randomFactor: 2, jitter: true };

function newClient(t: { teardown(fn: () => unknown): void }, opts: Omit<XdsConfigClientOptions, 'onConfig'>) {
  const svc = fakeService();
  const client = new XdsConfigClient({
    connectRetryInterval: 100,
    backoff: fastBackoff,
    ...opts,
    onConfig: svc.onConfig,
  });
  t.teardown(() => client.close());
  return { client, svc };
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

t.test('initial load, update, and an invalid config NACKed while the old one serves', async (t) => {
  const cache = new InMemorySnapshotCache();
  cache.setDefaultSnapshot([res('a', doc('a', 5))]);
  const server = await startServer(t, cache);
  const nacks: string[] = [];
  server.on('nack', (e) => nacks.push(e.version));
  const { client, svc } = newClient(t, { nodeId: 'pod-1', serverUrl: `127.0.0.1:${server.port}` });
  t.notOk(client.hasReceivedConfig);
  const first = once(client, 'config');
  client.start();
  await within(first, 5000, 'initial config');
  t.ok(client.hasReceivedConfig);
  t.equal(limitOf(svc.current, 'a'), 5);

  const v2docs = [res('a', doc('a', 7)), res('b', doc('b', 1, 'week'))];
  const v2version = new InMemorySnapshotCache()
    .setDefaultSnapshot(v2docs)
    .resourceSet(RATELIMIT_CONFIG_TYPE_URL).version;
  const serverAcked = new Promise<AckEvent>((resolve) =>
    server.on('ack', (e) => {
      if (e.version === v2version) resolve(e);
    }),
  );
  const update = once(client, 'config');
  cache.setDefaultSnapshot(v2docs);
  await within(update, 5000, 'update');
  t.equal(limitOf(svc.current, 'a'), 7);
  t.equal(limitOf(svc.current, 'b'), 1);
  const ack = await within(serverAcked, 2000, 'server ACK');
  t.equal(ack.resumed, false);
  t.equal(client.version, ack.version);

  // Two documents with the same domain: compileConfig rejects it (MERGE_DOMAIN_CONFIG is off).
  const nacked = once(client, 'nack');
  const bad = cache.setDefaultSnapshot([res('a', doc('a', 7)), res('a2', doc('a', 9))]);
  const [n] = (await within(nacked, 5000, 'NACK')) as [{ message: string; version: string }];
  t.match(n.message, /a2|domain/);
  t.equal(limitOf(svc.current, 'a'), 7, 'the previous config keeps serving');
  t.equal(client.version, ack.version);
  await new Promise((r) => setTimeout(r, 100));
  const badVersion = bad.resourceSet(RATELIMIT_CONFIG_TYPE_URL).version;
  t.same(nacks, [badVersion], 'the server recorded the NACK');
  const st = server.streams()[0].types.get(RATELIMIT_CONFIG_TYPE_URL)!;
  t.equal(st.lastNack?.version, badVersion);
  t.match(st.lastNack?.message, /domain/);

  // Setting the same bad content again is not resent; a fix goes through.
  let configs = 0;
  client.on('config', () => configs++);
  client.on('nack', () => t.fail('bad version resent'));
  cache.setDefaultSnapshot([res('a2', doc('a', 9)), res('a', doc('a', 7))]);
  await new Promise((r) => setTimeout(r, 200));
  t.equal(configs, 0);
  const fixed = once(client, 'config');
  cache.setDefaultSnapshot([res('a', doc('a', 9))]);
  await within(fixed, 5000, 'fixed config');
  t.equal(limitOf(svc.current, 'a'), 9);
});

t.test(
  'server restart: the client keeps serving, reconnects, resumes without a push, then gets updates',
  async (t) => {
    const cache = new InMemorySnapshotCache();
    cache.setDefaultSnapshot([res('a', doc('a', 1))]);
    let server = await startServer(t, cache);
    const port = server.port;
    const { client, svc } = newClient(t, { nodeId: 'pod-r', serverUrl: `127.0.0.1:${port}` });
    const first = once(client, 'config');
    client.start();
    await within(first, 5000, 'initial config');

    const disconnected = once(client, 'disconnected');
    await server.close();
    const [d] = (await within(disconnected, 5000, 'disconnect')) as [{ delayMs: number }];
    t.ok(d.delayMs >= 100 && d.delayMs <= 400, `backoff delay ${d.delayMs} ms`);
    t.ok(client.hasReceivedConfig);
    t.equal(limitOf(svc.current, 'a'), 1, 'last good config serves while disconnected');
    await new Promise((r) => setTimeout(r, 300));

    // A new server process with the same content: same version, so the resumed stream gets nothing.
    server = await startServer(t, cache, `127.0.0.1:${port}`);
    const resumed = await within(once(server, 'ack'), 5000, 'resumed stream');
    t.equal((resumed[0] as AckEvent).resumed, true);
    t.equal((resumed[0] as AckEvent).version, client.version);
    t.same(svc.applied.length, 1, 'no spurious re-apply');

    const update = once(client, 'config');
    cache.setDefaultSnapshot([res('a', doc('a', 2))]);
    await within(update, 5000, 'update after reconnect');
    t.equal(limitOf(svc.current, 'a'), 2);
  },
);

t.test('the client starts before the server and connects when it comes up', async (t) => {
  const cache = new InMemorySnapshotCache();
  cache.setDefaultSnapshot([res('a', doc('a', 3))]);
  const probe = await startServer(t, new InMemorySnapshotCache());
  const port = probe.port;
  await probe.close();
  const { client } = newClient(t, { nodeId: 'early', serverUrl: `127.0.0.1:${port}` });
  const got = once(client, 'config');
  client.start();
  await new Promise((r) => setTimeout(r, 300));
  t.notOk(client.hasReceivedConfig);
  await startServer(t, cache, `127.0.0.1:${port}`);
  await within(got, 5000, 'config once the server is up');
  t.ok(client.hasReceivedConfig);
});

t.test('two clients with different node ids get different snapshots', async (t) => {
  const cache = new InMemorySnapshotCache();
  cache.setDefaultSnapshot([res('shared', doc('shared', 1))]);
  cache.setSnapshot('canary', [res('canary', doc('canary', 2))]);
  const server = await startServer(t, cache);
  const a = newClient(t, { nodeId: 'stable', serverUrl: `127.0.0.1:${server.port}` });
  const b = newClient(t, { nodeId: 'canary', serverUrl: `127.0.0.1:${server.port}` });
  const ga = once(a.client, 'config');
  const gb = once(b.client, 'config');
  a.client.start();
  b.client.start();
  await within(Promise.all([ga, gb]), 5000, 'both configs');
  t.same(a.svc.current?.domains, ['shared']);
  t.same(b.svc.current?.domains, ['canary']);
  t.same(
    server
      .streams()
      .map((s) => s.nodeId)
      .sort(),
    ['canary', 'stable'],
  );
});

t.test('additional headers reach the server', async (t) => {
  const cache = new InMemorySnapshotCache();
  cache.setDefaultSnapshot([res('a', doc('a', 1))]);
  const server = await startServer(t, cache);
  // Observe the metadata through grpc-js' peer/metadata on the stream handler.
  const seen: string[] = [];
  const orig = (server as any).handleStream.bind(server);
  (server as any).handleStream = (call: any) => {
    seen.push(String(call.metadata.get('authorization')[0]));
    orig(call);
  };
  await server.close();
  await server.start();
  const { client } = newClient(t, {
    nodeId: 'h',
    serverUrl: `127.0.0.1:${server.port}`,
    additionalHeaders: { authorization: 'Bearer x' },
  });
  const got = once(client, 'config');
  client.start();
  await within(got, 5000, 'config');
  t.same(seen, ['Bearer x']);
});

t.test('mutual TLS: a client with a certificate gets config, one without does not', async (t) => {
  const certs = await makeCerts(undefined, { serverNames: ['xds.test', '127.0.0.1'] });
  t.teardown(() => certs.remove());
  const cache = new InMemorySnapshotCache();
  cache.setDefaultSnapshot([res('a', doc('a', 4))]);
  const server = new AdsServer({
    cache,
    listen: '127.0.0.1:0',
    tls: { certFile: certs.certPath, keyFile: certs.keyPath, caFile: certs.caPath },
  });
  await server.start();
  t.teardown(() => server.close());
  const url = `127.0.0.1:${server.port}`;
  const good = newClient(t, {
    nodeId: 'mtls',
    serverUrl: url,
    useTls: true,
    clientCert: certs.clientCertPath,
    clientKey: certs.clientKeyPath,
    serverCaCert: certs.caPath,
    serverSan: 'xds.test',
  });
  const got = once(good.client, 'config');
  good.client.start();
  await within(got, 5000, 'config over mTLS');
  t.equal(limitOf(good.svc.current, 'a'), 4);

  const anon = newClient(t, {
    nodeId: 'anon',
    serverUrl: url,
    useTls: true,
    serverCaCert: certs.caPath,
    serverSan: 'xds.test',
  });
  anon.client.start();
  const plain = newClient(t, { nodeId: 'plain', serverUrl: url });
  plain.client.start();
  await new Promise((r) => setTimeout(r, 600));
  t.notOk(anon.client.hasReceivedConfig, 'no client certificate: refused');
  t.notOk(plain.client.hasReceivedConfig, 'plaintext: refused');
  t.same(
    server.streams().map((s) => s.nodeId),
    ['mtls'],
  );
});

t.test(
  'fan-out: one snapshot change reaches 50 connected clients, all ACK within the deadline',
  async (t) => {
    const N = 50;
    const cache = new InMemorySnapshotCache();
    cache.setDefaultSnapshot([res('a', doc('a', 1))]);
    const server = await startServer(t, cache);
    const clients = Array.from({ length: N }, (_, i) =>
      newClient(t, { nodeId: `pod-${i}`, serverUrl: `127.0.0.1:${server.port}` }),
    );
    await within(
      Promise.all(
        clients.map(({ client }) => {
          const p = once(client, 'config');
          client.start();
          return p;
        }),
      ),
      20_000,
      'initial configs',
    );
    const docs = [res('a', doc('a', 2)), res('b', doc('b', 3, 'hour'))];
    const target = new InMemorySnapshotCache()
      .setDefaultSnapshot(docs)
      .resourceSet(RATELIMIT_CONFIG_TYPE_URL).version;
    const acked = new Set<string>();
    const allAcked = new Promise<void>((resolve) => {
      server.on('ack', (e) => {
        if (e.version === target && !e.resumed) acked.add(e.stream.nodeId);
        if (acked.size === N) resolve();
      });
    });
    const start = process.hrtime.bigint();
    cache.setDefaultSnapshot(docs);
    await within(allAcked, 5000, `all ${N} ACKs`);
    const ms = Number(process.hrtime.bigint() - start) / 1e6;
    console.log(`fan-out: ${N} clients ACKed version ${target} in ${ms.toFixed(1)} ms`);
    t.equal(acked.size, N);
    t.ok(clients.every(({ svc }) => limitOf(svc.current, 'b') === 3));
  },
);

t.test('backoff: exponential with a cap, jitter within [initial, interval], reset', async (t) => {
  const b = new ExponentialBackoff({ initialMs: 100, maxMs: 1000, randomFactor: 2, jitter: false });
  t.same([b.next(), b.next(), b.next(), b.next(), b.next(), b.next()], [100, 200, 400, 800, 1000, 1000]);
  b.reset();
  t.equal(b.next(), 100);
  // The reference's default factor 0.5 does not grow: every wait is the initial interval.
  const d = new ExponentialBackoff({ initialMs: 10_000, maxMs: 60_000, randomFactor: 0.5, jitter: true });
  t.same([d.next(), d.next(), d.next()], [10_000, 10_000, 10_000]);
  const j = new ExponentialBackoff({ initialMs: 100, maxMs: 1000, randomFactor: 2, jitter: true }, () => 0.5);
  t.same([j.next(), j.next(), j.next()], [100, 150, 250]);
});
