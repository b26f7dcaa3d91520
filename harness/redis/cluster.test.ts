import t from 'tap';
import { waitUntil } from '../net.js';
import { respCommand, slotOf, startRedisCluster } from './index.js';

t.test('cluster: set/get across slots, kill a master, failover, writes work again', async (t) => {
  const t0 = Date.now();
  const cluster = await startRedisCluster({ masters: 3, replicasPerMaster: 1 });
  t.comment(`cluster 3+3 started in ${Date.now() - t0} ms`);
  t.teardown(() => cluster.stop());

  t.equal(cluster.urls.split(',').length, 6);
  t.equal(cluster.nodes.filter((n) => n.role === 'master').length, 3);
  t.equal(cluster.nodes.filter((n) => n.role === 'replica').length, 3);
  t.notOk(cluster.nodes.some((n) => n.port === 6379));

  const masters = await cluster.masters();
  const ownerOf = (key: string) =>
    masters.find((m) => m.slots.some(([a, b]) => slotOf(key) >= a && slotOf(key) <= b))!.port;
  for (const key of ['foo', '{user1000}.following', 'a{}b']) {
    t.equal(
      slotOf(key),
      await respCommand({ port: masters[0].port }, 'CLUSTER', 'KEYSLOT', key),
      `slotOf(${key})`,
    );
  }

  const client = cluster.client();
  const keys = Array.from({ length: 30 }, (_, i) => `key:${i}`);
  for (const k of keys) await client.set(k, k);
  for (const k of keys) t.equal(await client.get(k), k);
  t.equal(new Set(keys.map(ownerOf)).size, 3, 'keys spread over all three masters');

  const victimKey = 'key:0';
  const killed = await cluster.killMaster({ key: victimKey });
  t.equal(killed.port, ownerOf(victimKey));
  t.ok(killed.slots.length > 0);

  const failover = await cluster.waitForFailover(15_000);
  t.comment(
    `cluster failover (SIGKILL -> slots served by promoted replica everywhere) took ${failover.elapsedMs} ms`,
  );
  t.not(failover.newMaster.port, killed.port);
  const promoted = cluster.nodes.find((n) => n.port === failover.newMaster.port);
  t.equal(promoted?.role, 'replica', 'the new master was a replica');

  // the ioredis Cluster client follows the new topology
  await waitUntil(async () => (await client.set(victimKey, 'after')) === 'OK', {
    deadlineMs: 10_000,
    intervalMs: 100,
    what: 'writes to the failed-over slots',
  });
  t.comment(`ioredis Cluster writes again ${Date.now() - killed.killedAt} ms after the SIGKILL`);
  t.equal(await client.get(victimKey), 'after');
  for (const k of keys.slice(1)) await client.set(k, 'again');
  t.equal((await cluster.masters()).length, 3);
});
