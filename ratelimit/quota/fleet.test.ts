// Fleet demand exchange between pods through one counter store (the in-memory one, a fake clock): what a
// pod concludes about the fleet from a window, and the parts of the budget the pods take from it.
import t from 'tap';
import { MemoryCounterStore } from '../memory/index.js';
import { podFraction } from './allocator.js';
import { FleetDemand, newFleetState, type FleetBucket } from './fleet.js';

function bucket(demand: number, sampled = demand > 0): FleetBucket & { demand: number; isSampled: boolean } {
  const b = {
    fleetKey: 'k',
    fleet: newFleetState(),
    demand,
    isSampled: sampled,
    subscribers: 1,
    localDemand: () => b.demand,
    guaranteed: () => 0,
    sampled: () => b.isSampled,
  };
  return b;
}

/** Window 1000 ms: pods add in [250, 750) and read the window in its last quarter. */
const W = 1000;
const add = (w: number) => w * W + 300;
const read = (w: number) => w * W + 800;
const part = (b: FleetBucket, expectedPods = 1) => podFraction(b.fleet.view, expectedPods);

t.test('a window nobody added to says nothing of the others: unknown, not zero', async (t) => {
  let now = add(10);
  const store = new MemoryCounterStore(() => now);
  const [a, b] = [new FleetDemand(store, W), new FleetDemand(store, W)];
  const [ba, bb] = [bucket(300), bucket(200)];
  // Both read window 9 (nobody served the bucket then) and add to window 10.
  await a.exchange([ba], now);
  await b.exchange([bb], now);
  t.equal(ba.fleet.view, undefined, 'pod a: the fleet unknown');
  t.equal(part(ba, 2) + part(bb, 2), 1, 'unknown: budget / RLQS_EXPECTED_PODS each');
  now = read(10);
  await a.exchange([ba], now);
  await b.exchange([bb], now);
  t.match(ba.fleet.view, { demand: 500, pods: 2, unsampled: 0, mine: 300 });
  t.equal(part(ba) + part(bb), 1, 'the parts add up to the budget');
  t.equal(part(ba), 0.6);
  await store.close();
});

t.test('pods starting together: the parts add up, whichever pod had a sample first', async (t) => {
  let now = add(20);
  const store = new MemoryCounterStore(() => now);
  const pods = [new FleetDemand(store, W), new FleetDemand(store, W), new FleetDemand(store, W)];
  // Pod 0's Envoys reported a demand sample before its pass; pods 1 and 2 had only subscriptions.
  const bs = [bucket(300), bucket(0, false), bucket(0, false)];
  for (let i = 0; i < 3; i++) await pods[i]!.exchange([bs[i]!], now);
  // By the time they read the window, pods 1 and 2 have samples too (their demand now: 250 each).
  bs[1]!.demand = bs[2]!.demand = 250;
  bs[1]!.isSampled = bs[2]!.isSampled = true;
  now = read(20);
  for (let i = 0; i < 3; i++) await pods[i]!.exchange([bs[i]!], now);
  const parts = bs.map((b) => part(b, 3));
  const sum = parts.reduce((x, y) => x + y, 0);
  // Taking "no sample" as "no demand", pod 0 took the whole budget and pods 1 and 2 their demand now
  // against pod 0's: 1 + 0.45 + 0.45.
  t.ok(sum <= 1 + 1e-9, `parts ${parts.map((p) => p.toFixed(3)).join(' + ')} <= 1`);
  t.same(
    parts.map((p) => Math.round(p * 1000) / 1000),
    [0.333, 0.333, 0.333],
    'newcomers an equal part',
  );
  await store.close();
});

t.test('a pod new to a bucket the others already share gets nothing until it is counted', async (t) => {
  let now = add(30);
  const store = new MemoryCounterStore(() => now);
  const [a, b] = [new FleetDemand(store, W), new FleetDemand(store, W)];
  const [ba, bb] = [bucket(300), bucket(0, false)];
  await a.exchange([ba], now);
  now = read(30);
  await a.exchange([ba], now);
  t.equal(part(ba), 1, 'pod a alone in window 30: the whole budget');
  // Pod b's first Envoy arrives at the start of window 31 and reads at once: window 30, without it.
  now = 31 * W + 50;
  await b.exchange([bb], now);
  t.equal(part(bb), 0, 'pod b: nothing yet (a holds the whole budget for this window)');
  now = add(31);
  await a.exchange([ba], now);
  await b.exchange([bb], now);
  now = read(31);
  await a.exchange([ba], now);
  await b.exchange([bb], now);
  t.equal(part(ba) + part(bb), 1, 'counted in window 31: the parts add up');
  t.equal(part(bb), 0.5, 'the newcomer an equal part');
  await store.close();
});

t.test("while demand moves, the pods' parts still add up: both read from the same window", async (t) => {
  let now = add(40);
  const store = new MemoryCounterStore(() => now);
  const [a, b] = [new FleetDemand(store, W), new FleetDemand(store, W)];
  const [ba, bb] = [bucket(300), bucket(300)];
  await a.exchange([ba], now);
  await b.exchange([bb], now);
  // The demand grows on both pods (Envoys arriving) after they added: 600 each when they read.
  ba.demand = bb.demand = 600;
  now = read(40);
  await a.exchange([ba], now);
  await b.exchange([bb], now);
  t.equal(part(ba) + part(bb), 1, `the parts add up to the budget`);
  t.equal(part(ba), 0.5);
  await store.close();
});

t.test('the store failing: unknown (budget / RLQS_EXPECTED_PODS) until a read succeeds', async (t) => {
  let now = add(50);
  const store = new MemoryCounterStore(() => now);
  const a = new FleetDemand(store, W);
  const ba = bucket(300);
  await a.exchange([ba], now);
  now = read(50);
  await a.exchange([ba], now);
  t.equal(part(ba, 3), 1);
  const failing = new FleetDemand(
    {
      ...store,
      increment: () => Promise.reject(new Error('down')),
      get: () => Promise.reject(new Error('down')),
    } as never,
    W,
  );
  now = read(51);
  const r = await failing.exchange([ba], now);
  t.equal(r.ok, false);
  t.equal(part(ba, 3), 1 / 3, 'unknown while the store fails');
  t.equal(ba.fleet.busy, false, 'not left busy');
  await store.close();
});
