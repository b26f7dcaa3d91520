// The reflector against a real API server: a watch from a resourceVersion the server no longer has
// gets 410 and the reflector relists; the API server going away (a TCP proxy in front of it is closed,
// every connection cut) makes it back off, and once the server is back it catches up with what changed
// meanwhile.
import { createServer, connect, type Server, type Socket } from 'node:net';
import { CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import t from 'tap';
import { Reflector } from '../operator/kube/index.js';
import { GROUP, PLURAL, VERSION, type RateLimitConfigObject } from '../operator/resource.js';
import { applyRlc, deleteRlc, installCrd, rlcFromYaml, waitFor } from '../operator/testing.js';
import { startKube, type KubeHarness } from '../harness/kube.js';

let kube: KubeHarness;

t.before(async () => {
  kube = await startKube();
  await installCrd(kube.kubeConfig);
});
t.teardown(async () => kube?.stop());

const spec = (domain: string, rpu = 1) =>
  `domain: ${domain}\ndescriptors:\n  - key: k\n    rate_limit: { unit: second, requests_per_unit: ${rpu} }`;

function reflectorFor(kc: KubeConfig, namespace: string, opts: { listRv?: (rv: string) => string } = {}) {
  const api = kc.makeApiClient(CustomObjectsApi);
  let lists = 0;
  const r = new Reflector<RateLimitConfigObject>({
    kubeConfig: kc,
    watchPath: `/apis/${GROUP}/${VERSION}/namespaces/${namespace}/${PLURAL}`,
    backoffInitialMs: 100,
    backoffMaxMs: 800,
    list: async (token) => {
      const page = await api.listNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace,
        plural: PLURAL,
        limit: 500,
        _continue: token,
      });
      lists++;
      // The first list can be made to report a resourceVersion long gone, as if the reflector had
      // been disconnected for longer than the server keeps history.
      if (lists === 1 && opts.listRv && page.metadata?.resourceVersion) {
        page.metadata.resourceVersion = opts.listRv(page.metadata.resourceVersion);
      }
      return page;
    },
  });
  const relists: string[] = [];
  const errors: { delayMs: number; phase: string }[] = [];
  r.on('relist', ({ reason }) => relists.push(reason));
  r.on('error', ({ delayMs, phase }) => errors.push({ delayMs, phase }));
  return { r, relists, errors, lists: () => lists };
}

const specOf = (r: Reflector<RateLimitConfigObject>) =>
  Object.fromEntries(
    r
      .list()
      .map((o) => [o.metadata.name, (o.spec?.descriptors as any)?.[0]?.rate_limit?.requests_per_unit])
      .sort(),
  );

t.test(
  'a watch from a resourceVersion the server no longer has: 410, relist, and nothing is missed',
  async (t) => {
    const ns = 'default';
    for (let i = 0; i < 5; i++)
      await applyRlc(kube.kubeConfig, rlcFromYaml(`gone-${i}`, spec(`gone-${i}`, i + 1)));
    await deleteRlc(kube.kubeConfig, 'gone-0');
    const { r, relists, lists } = reflectorFor(kube.kubeConfig, ns, { listRv: () => '1' });
    r.start();
    t.teardown(() => r.close());
    await waitFor('a relist after 410', async () => relists.length >= 1 && lists() >= 2, 20_000);
    t.match(relists[0], /410|too old|Expired|Gone/i, `relist reason: ${relists[0]}`);
    await waitFor('the store after the relist', async () => r.synced && r.list().length === 4);
    t.same(specOf(r), { 'gone-1': 2, 'gone-2': 3, 'gone-3': 4, 'gone-4': 5 });

    // The watch that follows the relist works: changes arrive without another list.
    const listsBefore = lists();
    await applyRlc(kube.kubeConfig, rlcFromYaml('gone-5', spec('gone-5', 6)));
    await deleteRlc(kube.kubeConfig, 'gone-1');
    await waitFor(
      'watch events',
      async () => r.get('default/gone-5') !== undefined && !r.get('default/gone-1'),
    );
    t.equal(lists(), listsBefore, 'no further list');
    t.equal(relists.length, 1);
  },
);

/** A TCP proxy to the API server that can be cut (every connection destroyed) and restored on the same port. */
async function startProxy(
  target: URL,
): Promise<{ port: number; cut(): Promise<void>; restore(): Promise<void> }> {
  const sockets = new Set<Socket>();
  let server: Server | undefined;
  let port = 0;
  const listen = () =>
    new Promise<void>((resolve, reject) => {
      const s = createServer((client) => {
        const upstream = connect(Number(target.port), target.hostname);
        sockets.add(client).add(upstream);
        client.pipe(upstream).pipe(client);
        const end = () => {
          client.destroy();
          upstream.destroy();
          sockets.delete(client);
          sockets.delete(upstream);
        };
        client.on('error', end).on('close', end);
        upstream.on('error', end).on('close', end);
      });
      s.once('error', reject);
      s.listen(port, '127.0.0.1', () => {
        port = (s.address() as { port: number }).port;
        server = s;
        resolve();
      });
    });
  await listen();
  return {
    get port() {
      return port;
    },
    async cut() {
      const s = server!;
      server = undefined;
      const closed = new Promise<void>((r) => s.close(() => r()));
      for (const so of sockets) so.destroy();
      sockets.clear();
      await closed;
    },
    restore: listen,
  };
}

t.test('the API server goes away: the reflector backs off, then catches up once it is back', async (t) => {
  const core = (await import('@kubernetes/client-node')).CoreV1Api;
  await kube.kubeConfig.makeApiClient(core).createNamespace({ body: { metadata: { name: 'outage' } } });
  const ns = 'outage';
  const apply = (name: string, rpu: number) =>
    applyRlc(kube.kubeConfig, rlcFromYaml(name, spec(`${ns}-${name}`, rpu)), { namespace: ns });
  await apply('stays', 1);
  await apply('changes', 1);
  await apply('goes', 1);

  const proxy = await startProxy(new URL(kube.server));
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: kube.kubeConfig.clusters.map((c) => ({ ...c, server: `https://127.0.0.1:${proxy.port}` })),
    contexts: kube.kubeConfig.contexts,
    currentContext: kube.kubeConfig.currentContext,
    users: kube.kubeConfig.users,
  });
  const { r, errors, relists } = reflectorFor(kc, ns);
  r.start();
  t.teardown(async () => {
    await r.close();
    await proxy.cut().catch(() => {});
  });
  await waitFor('synced', async () => r.synced && r.list().length === 3);

  await proxy.cut();
  // Changes while the reflector cannot see the server.
  await apply('changes', 2);
  await deleteRlc(kube.kubeConfig, 'goes', ns);
  await apply('new', 3);
  await waitFor('at least four failed attempts', async () => errors.length >= 4, 20_000);
  const delays = errors.map((e) => e.delayMs);
  t.same(delays.slice(0, 4), [100, 200, 400, 800], `exponential backoff (${delays.join(', ')} ms)`);
  t.ok(
    delays.every((d) => d <= 800),
    'capped',
  );
  t.same(specOf(r), { changes: 1, goes: 1, stays: 1 }, 'the store keeps the last known state meanwhile');

  await proxy.restore();
  await waitFor(
    'caught up',
    async () => JSON.stringify(specOf(r)) === JSON.stringify({ changes: 2, new: 3, stays: 1 }),
    20_000,
  );
  t.pass(`recovered after ${errors.length} failed attempts (${relists.length} relists)`);
  await apply('after', 4);
  await waitFor('watching again', async () => r.get(`${ns}/after`) !== undefined);
});
