// Direct counting on a real Redis Cluster (cluster-direct.ts): one connection of its own per master
// counts exactly what the ioredis path counts, with the same commands; a slot being migrated (ASK) and
// migrated (MOVED) is followed through ioredis with no error and no op counted twice; a killed master
// fails its slots until its replica takes over, then the new master is counted on directly.
import { readFileSync } from 'node:fs';
import t, { type Test } from 'tap';
import type { Cluster } from 'ioredis';
import {
  respCommand,
  respCommands,
  slotOf,
  startRedisCluster,
  type ClusterNodeInfo,
  type RedisCluster,
  type RespTarget,
} from '../../harness/redis/index.js';
import { CacheError, type CounterOp } from '../counting/index.js';
import { loadSettings } from '../settings/index.js';
import { eventually } from '../test-support.js';
import { RedisDeployment } from './index.js';

const PASSWORD = 'clüster';
const noTls = { caCert: '', clientCert: '', clientKey: '', skipHostnameVerification: false };

/** The test's own way to one node: its password, with TLS the cluster's CA. */
function target(cluster: RedisCluster, password: string | undefined, port: number): RespTarget {
  return { port, password, ...(cluster.certs ? { tls: { ca: readFileSync(cluster.certs.caPath) } } : {}) };
}
const op = (key: string, hits = 1, expireSeconds = 60): CounterOp => ({
  key,
  hits,
  expireSeconds,
  perSecond: false,
});

async function deployment(
  t: Test,
  cluster: RedisCluster,
  password: string | undefined,
  env: Record<string, string> = {},
): Promise<RedisDeployment> {
  const s = loadSettings({
    REDIS_TYPE: 'cluster',
    REDIS_SOCKET_TYPE: 'tcp',
    REDIS_URL: cluster.urls,
    ...(password === undefined ? {} : { REDIS_AUTH: password }),
    ...(cluster.certs ? { REDIS_TLS: 'true' } : {}),
    ...env,
  }).redis.main;
  const tls = cluster.certs ? { ...noTls, caCert: cluster.certs.caPath } : noTls;
  const d = new RedisDeployment('REDIS', s, tls);
  t.teardown(() => d.close());
  await d.connect(10_000);
  return d;
}

function ownerOf(masters: ClusterNodeInfo[], key: string): ClusterNodeInfo {
  const slot = slotOf(key);
  const m = masters.find((n) => n.slots.some(([a, b]) => slot >= a && slot <= b));
  if (!m) throw new Error(`no master serves ${key}`);
  return m;
}

/**
 * Per master (by port), which connection of `d` last ran EXPIRE while `act` ran: ioredis' own
 * connection to each master is marked by a CLIENT ID sent through it first (and so are those of
 * `others`, whose last command must not pass for d's), then CLIENT LIST names the connection whose last
 * command was EXPIRE.
 */
async function expireRanOn(
  d: RedisDeployment,
  cluster: RedisCluster,
  password: string | undefined,
  act: () => Promise<unknown>,
  others: RedisDeployment[] = [],
): Promise<Map<number, 'direct' | 'ioredis' | 'none'>> {
  const ids = new Map<number, string>();
  for (const x of [d, ...others]) {
    for (const node of (x.client as Cluster).nodes('all')) {
      // A node ioredis still lists after it died answers nothing: it is not marked.
      const id = await node.call('CLIENT', 'ID').catch(() => undefined);
      if (id !== undefined && x === d) ids.set(Number(node.options.port), String(id));
    }
  }
  await act();
  const out = new Map<number, 'direct' | 'ioredis' | 'none'>();
  for (const m of await cluster.masters()) {
    const list = String(await respCommand(target(cluster, password, m.port), 'CLIENT', 'LIST'));
    const conns = list
      .split('\n')
      .map((l) => ({ id: /^id=(\d+)/.exec(l)?.[1], cmd: / cmd=(\S+)/.exec(l)?.[1] }));
    const id = ids.get(m.port);
    out.set(
      m.port,
      conns.find((c) => c.id === id)?.cmd === 'expire'
        ? 'ioredis'
        : conns.some((c) => c.id !== id && c.cmd === 'expire')
          ? 'direct'
          : 'none',
    );
  }
  return out;
}

async function commandCalls(cluster: RedisCluster, password: string | undefined, name: string) {
  let calls = 0;
  for (const m of await cluster.masters()) {
    const info = String(await respCommand(target(cluster, password, m.port), 'INFO', 'commandstats'));
    const found = new RegExp(`cmdstat_${name}:calls=(\\d+)`).exec(info);
    calls += found ? Number(found[1]) : 0;
  }
  return calls;
}

/** One key per master (the first of `prefix`0, `prefix`1, ... each master serves). */
function keyPerMaster(masters: ClusterNodeInfo[], prefix: string): string[] {
  const keys = new Map<number, string>();
  for (let i = 0; keys.size < masters.length; i++) {
    const k = `${prefix}${i}`;
    const port = ownerOf(masters, k).port;
    if (!keys.has(port)) keys.set(port, k);
  }
  return [...keys.values()];
}

t.test('three masters, with a password', async (t) => {
  const cluster = await startRedisCluster({ replicasPerMaster: 0, password: PASSWORD });
  t.teardown(() => cluster.stop());
  const masters = await cluster.masters();
  t.equal(masters.length, 3);

  t.test('each master counted on a connection of its own, exactly as the ioredis path', async (t) => {
    const direct = await deployment(t, cluster, PASSWORD);
    const viaIoredis = await deployment(t, cluster, PASSWORD, { REDIS_DIRECT_COUNTING: 'false' });
    const keys = (p: string) => Array.from({ length: 24 }, (_, i) => `${p}:k${i}`);
    for (const p of ['d', 'i']) {
      const served = new Set(keys(p).map((k) => ownerOf(masters, k).port));
      t.equal(served.size, 3, `the ${p}: keys are spread over every master`);
    }
    const incrbyBefore = await commandCalls(cluster, PASSWORD, 'incrby');
    const expireBefore = await commandCalls(cluster, PASSWORD, 'expire');
    let sent = 0;
    // One call of 24 ops over the three masters at a time: the same counts on both paths.
    for (let r = 0; r < 5; r++) {
      const ops = (p: string) => keys(p).map((k, i) => op(k, 1 + ((i + r) % 3)));
      const [a, b] = await Promise.all([direct.incrementEach(ops('d')), viaIoredis.incrementEach(ops('i'))]);
      t.same(a, b, `call ${r + 1}: the same counts`);
      t.ok(
        a.every((x) => typeof x === 'number'),
        'every op counted',
      );
      sent += 48;
    }
    // 100 concurrent calls of 8 ops each, on each path: the same totals.
    const expected = new Map<string, number>();
    await Promise.all(
      ['d', 'i'].flatMap((p) =>
        Array.from({ length: 100 }, (_, i) => {
          const ops = Array.from({ length: 8 }, (_, j) => op(keys(p)[(i * 3 + j) % 24]!, 1 + (j % 2)));
          if (p === 'd') for (const o of ops) expected.set(o.key, (expected.get(o.key) ?? 0) + o.hits);
          sent += 8;
          return (p === 'd' ? direct : viaIoredis).increment(ops);
        }),
      ),
    );
    const reader = cluster.client();
    for (let i = 0; i < 24; i++) {
      const [a, b] = await Promise.all([reader.get(keys('d')[i]!), reader.get(keys('i')[i]!)]);
      t.equal(a, b, `${keys('d')[i]} and ${keys('i')[i]} hold the same count`);
    }
    t.equal(
      Number(await reader.get('d:k0')),
      [0, 1, 2, 3, 4].reduce((s, r) => s + 1 + (r % 3), 0) + expected.get('d:k0')!,
      'the count of the hits sent',
    );
    const ttl = await reader.ttl('d:k5');
    t.ok(ttl > 55 && ttl <= 60, `EXPIRE sent (ttl ${ttl})`);
    t.equal((await commandCalls(cluster, PASSWORD, 'incrby')) - incrbyBefore, sent, 'one INCRBY per op');
    t.equal((await commandCalls(cluster, PASSWORD, 'expire')) - expireBefore, sent, 'one EXPIRE per op');

    const one = (p: string) => keyPerMaster(masters, `${p}:one`).map((k) => op(k));
    const onDirect = await expireRanOn(direct, cluster, PASSWORD, () => direct.increment(one('d')), [
      viaIoredis,
    ]);
    t.same([...onDirect.values()], ['direct', 'direct', 'direct'], 'every master counted directly');
    const onIoredis = await expireRanOn(viaIoredis, cluster, PASSWORD, () => viaIoredis.increment(one('i')), [
      direct,
    ]);
    t.same(
      [...onIoredis.values()],
      ['ioredis', 'ioredis', 'ioredis'],
      'REDIS_DIRECT_COUNTING=false: ioredis',
    );
    t.equal(direct.directCounters, 3, 'one direct connection per master');
    t.equal(viaIoredis.directCounters, 0);
  });

  t.test('a slot migrated to another master: ASK while migrating, MOVED after; no error', async (t) => {
    const d = await deployment(t, cluster, PASSWORD);
    const a = '{mig}a';
    const b = '{mig}b';
    const slot = slotOf(a);
    const source = ownerOf(masters, a);
    const to = masters.find((m) => m.port !== source.port)!;
    const at = (m: ClusterNodeInfo, ...args: (string | number)[]) =>
      respCommand(target(cluster, PASSWORD, m.port), ...args);
    t.same(await d.increment([op(a)]), [1]);
    t.same(await d.increment([op(a)]), [2]);
    await eventually(
      async () =>
        (await expireRanOn(d, cluster, PASSWORD, () => d.increment([op('{mig}c')]))).get(source.port) ===
        'direct',
      10_000,
      'the source master counted directly',
    );

    await at(to, 'CLUSTER', 'SETSLOT', slot, 'IMPORTING', source.id);
    await at(source, 'CLUSTER', 'SETSLOT', slot, 'MIGRATING', to.id);
    // `a` is still on the source: counted there; `b` is not: the source answers ASK.
    t.same(await d.incrementEach([op(a), op(b, 5)]), [3, 5], 'counted while the slot migrates');
    const [, onTarget] = await respCommands(target(cluster, PASSWORD, to.port), [['ASKING'], ['GET', b]]);
    t.equal(onTarget, '5', 'b was counted on the target (the ASK followed through ioredis)');

    const inSlot = (await at(source, 'CLUSTER', 'GETKEYSINSLOT', slot, 100)) as string[];
    t.ok(inSlot.includes(a));
    t.equal(
      await at(source, 'MIGRATE', to.host, to.port, '', 0, 5000, 'AUTH', PASSWORD, 'KEYS', ...inSlot),
      'OK',
    );
    for (const m of masters) await at(m, 'CLUSTER', 'SETSLOT', slot, 'NODE', to.id);
    // ioredis' map still names the source: the direct connection there answers MOVED, the ops are
    // resent through ioredis, which follows it.
    t.same(await d.incrementEach([op(a), op(b)]), [4, 6], 'counted after the slot moved');
    let more = 0;
    await eventually(
      async () => {
        const on = await expireRanOn(d, cluster, PASSWORD, () => d.increment([op(a)]));
        more++;
        return on.get(to.port) === 'direct';
      },
      10_000,
      'the target master counted directly',
    );
    t.equal(Number(await at(to, 'GET', a)), 4 + more, 'every increment counted once');
    t.ok(d.directCounters <= 3, 'one direct connection per master at most');
  });
});

t.test(
  'a killed master: its slots fail until the replica takes over, then the new master is counted on directly',
  async (t) => {
    const cluster = await startRedisCluster();
    t.teardown(() => cluster.stop());
    const d = await deployment(t, cluster, undefined, { REDIS_TIMEOUT: '500ms' });
    const masters = await cluster.masters();
    const keys = keyPerMaster(masters, 'fo');
    const all = () => d.increment(keys.map((k) => op(k)));
    await eventually(
      async () => [...(await expireRanOn(d, cluster, undefined, all)).values()].every((v) => v === 'direct'),
      10_000,
      'every master counted directly',
    );
    t.equal(d.directCounters, 3);
    await cluster.killMaster({ key: keys[0]! });
    const failover = await cluster.waitForFailover();
    // Meanwhile and after, every call is answered: counts, or a cache error for the dead master's keys.
    await eventually(
      async () => {
        const r = await d.incrementEach(keys.map((k) => op(k)));
        const failed = r.filter((x) => x instanceof Error);
        if (!failed.every((x) => x instanceof CacheError)) t.fail(`not a cache error: ${String(failed[0])}`);
        return r.every((x) => typeof x === 'number');
      },
      15_000,
      'the failed-over key counted',
    );
    await eventually(
      async () =>
        (await expireRanOn(d, cluster, undefined, all).catch(() => undefined))?.get(
          failover.newMaster.port,
        ) === 'direct',
      15_000,
      'the new master counted directly',
    );
    t.pass('the new master counted on a direct connection');
    await eventually(() => d.directCounters === 3, 15_000, "the dead master's connection closed");
    t.equal(d.directCounters, 3, 'one direct connection per live master');
  },
);

t.test('TLS: each master counted on a TLS connection of its own', async (t) => {
  const cluster = await startRedisCluster({ replicasPerMaster: 0, tls: true });
  t.teardown(() => cluster.stop());
  const d = await deployment(t, cluster, undefined);
  const masters = await cluster.masters();
  const keys = keyPerMaster(masters, 'tls');
  t.same(await d.increment(keys.map((k) => op(k, 2))), [2, 2, 2]);
  await eventually(
    async () =>
      [
        ...(await expireRanOn(d, cluster, undefined, () => d.increment(keys.map((k) => op(k))))).values(),
      ].every((v) => v === 'direct'),
    10_000,
    'every master counted directly',
  );
  const reader = cluster.client();
  const counts = await Promise.all(keys.map((k) => reader.get(k)));
  t.ok(
    counts.every((c) => Number(c) >= 3),
    `counted (${counts.join(', ')})`,
  );
});
