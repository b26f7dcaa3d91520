import t from 'tap';
import { waitUntil } from '../net.js';
import { respCommand, startRedisSentinel } from './index.js';

t.test('sentinel: kill the master, sentinels promote the replica, the ioredis client follows', async (t) => {
  const t0 = Date.now();
  const group = await startRedisSentinel({ masterName: 'mymaster' });
  t.comment(`sentinel group (1 master, 1 replica, 3 sentinels) started in ${Date.now() - t0} ms`);
  t.teardown(() => group.stop());

  t.equal(group.masterName, 'mymaster');
  t.equal(group.sentinelUrls.split(',').length, 3);
  t.not(group.masterPort, group.replicaPort);
  t.same(await group.currentMaster(), { host: '127.0.0.1', port: group.masterPort });
  const addr = await respCommand(
    { port: group.sentinelPorts[2] },
    'SENTINEL',
    'get-master-addr-by-name',
    'mymaster',
  );
  t.same(addr, ['127.0.0.1', String(group.masterPort)]);

  const client = group.client();
  t.equal(await client.set('k', 'before'), 'OK');
  t.same(await client.config('GET', 'port'), ['port', String(group.masterPort)]);

  const killed = await group.killMaster();
  const killedAt = Date.now();
  t.equal(killed.port, group.masterPort);

  const failover = await group.waitForFailover(15_000);
  t.comment(
    `sentinel failover (SIGKILL -> all sentinels name the promoted replica) took ${failover.elapsedMs} ms`,
  );
  t.equal(failover.masterPort, group.replicaPort);

  await waitUntil(async () => (await client.set('k', 'after')) === 'OK', {
    deadlineMs: 10_000,
    intervalMs: 100,
    what: 'the sentinel client to write to the new master',
  });
  t.comment(`ioredis sentinel client writes again ${Date.now() - killedAt} ms after the SIGKILL`);
  t.same(
    await client.config('GET', 'port'),
    ['port', String(group.replicaPort)],
    'connected to the new master',
  );
  t.equal(await client.get('k'), 'after');
});
