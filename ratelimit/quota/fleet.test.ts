// Fleet demand exchange between pods through one counter store (the in-memory one, a fake clock): what a
// pod concludes about the others' demand from the last complete window.
import t from 'tap';
import { MemoryCounterStore } from '../memory/index.js';
import { podFraction } from './allocator.js';
import { FleetDemand, newFleetState, type FleetBucket } from './fleet.js';

function bucket(demand: number): FleetBucket & { demand: number } {
  const b = { fleetKey: 'k', fleet: newFleetState(), demand, localDemand: () => b.demand };
  return b;
}

t.test('a window nobody added demand to says nothing of the others: unknown, not zero', async (t) => {
  let now = 10_000;
  const store = new MemoryCounterStore(() => now);
  const a = new FleetDemand(store, 1000);
  const b = new FleetDemand(store, 1000);
  const ba = bucket(0);
  const bb = bucket(0);
  // Window 10: neither pod has a demand sample yet (its Envoys only subscribed).
  await a.exchange([ba], now);
  await b.exchange([bb], now);
  // Window 11: both have demand now; window 10 holds nothing.
  now = 11_000;
  ba.demand = 300;
  bb.demand = 200;
  await a.exchange([ba], now);
  await b.exchange([bb], now);
  t.equal(ba.fleet.othersDemand, undefined, 'pod a: the others unknown');
  t.equal(bb.fleet.othersDemand, undefined, 'pod b: the others unknown');
  // Were they read as 0, each pod would take the whole budget: 2 × the budget for the fleet.
  t.equal(
    podFraction(ba.demand, ba.fleet.othersDemand, 2) + podFraction(bb.demand, bb.fleet.othersDemand, 2),
    1,
  );
  // Window 12: window 11 holds both pods' demand.
  now = 12_000;
  await a.exchange([ba], now);
  await b.exchange([bb], now);
  t.equal(ba.fleet.othersDemand, 200);
  t.equal(bb.fleet.othersDemand, 300);
  t.equal(podFraction(300, 200, 2) + podFraction(200, 300, 2), 1, 'the parts add up to the budget');
  await store.close();
});

t.test("while demand moves, the pods' parts still add up: both read from the same window", async (t) => {
  let now = 20_000;
  const store = new MemoryCounterStore(() => now);
  const a = new FleetDemand(store, 1000);
  const b = new FleetDemand(store, 1000);
  const ba = bucket(300);
  const bb = bucket(300);
  await a.exchange([ba], now);
  await b.exchange([bb], now);
  // The demand grows on both pods (Envoys arriving): 300 each in window 20, 600 each now.
  now = 21_000;
  ba.demand = 600;
  bb.demand = 600;
  await a.exchange([ba], now);
  await b.exchange([bb], now);
  const fa = podFraction(ba.demand, ba.fleet.othersDemand, 2, ba.fleet.ownDemand);
  const fb = podFraction(bb.demand, bb.fleet.othersDemand, 2, bb.fleet.ownDemand);
  // This pod's demand now against the others' of the last window would give 600 / 900 each: 4/3 in all.
  t.equal(fa + fb, 1, `the parts add up to the budget (${fa.toFixed(3)} + ${fb.toFixed(3)})`);
  t.equal(fa, 0.5);
  await store.close();
});
