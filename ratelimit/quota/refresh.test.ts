// An Envoy that keeps reporting always holds an unexpired assignment for each of its buckets, however its
// reports' time_elapsed (the basis of the time to live) changes: a short first report, then longer
// intervals, then shorter ones again. The QuotaServer runs in-process on the memory store with a fake
// clock; its pass is run every quarter of RLQS_REPORTING_INTERVAL as its timer would.
import t from 'tap';
import pino from 'pino';
import { loadConfig } from '../config/index.js';
import { MemoryCounterStore } from '../memory/index.js';
import { loadSettings } from '../settings/index.js';
import { StatsStore } from '../stats/index.js';
import { QuotaServer } from './server.js';

const CONFIG = `domain: rlqs
descriptors:
  - key: tenant
    rate_limit: { unit: second, requests_per_unit: 100 }
`;

t.test('assignments never lapse while the stream reports, as its interval changes', async (t) => {
  let now = 1_000_000;
  const store = new MemoryCounterStore(() => now);
  t.teardown(() => store.close());
  const s = loadSettings({ RLQS_ENABLED: 'true', RLQS_REPORTING_INTERVAL: '1s' });
  const server = new QuotaServer({
    settings: s.quota,
    bounds: s.requestBounds,
    store,
    keyPrefix: '',
    stats: new StatsStore(),
    logger: pino({ level: 'silent' }),
    now: () => now,
  });
  server.apply(server.prepare(loadConfig([{ name: 'q.yaml', yaml: CONFIG }])));
  t.teardown(() => server.shutdown());
  const pass = () => (server as unknown as { pass(): void }).pass();
  // When each assignment of the bucket arrived and until when it holds (its time to live).
  const held: { at: number; until: number }[] = [];
  const stream = server.open({
    send: (m) => {
      for (const a of m.bucketAction) {
        const ttl = a.quotaAssignmentAction?.assignmentTimeToLive;
        if (!ttl) continue;
        held.push({ at: now, until: now + Number(ttl.seconds ?? 0) * 1000 + Number(ttl.nanos ?? 0) / 1e6 });
      }
    },
    end: () => undefined,
    closed: false,
    queuedBytes: 0,
  });
  const report = (seconds: number) =>
    server.report(stream, {
      domain: 'rlqs',
      bucketQuotaUsages: [
        {
          bucketId: { bucket: { tenant: 'a' } },
          timeElapsed: { seconds: Math.floor(seconds), nanos: Math.round((seconds % 1) * 1e9) },
          numRequestsAllowed: Math.round(20 * seconds),
        },
      ],
    });
  // Envoy's schedule: a first periodic report covering 0.3 s of a new bucket (time to live 1 s), then
  // 2 s reports (6 s), 4 s reports (12 s), and back to 1 s reports (3 s).
  const reports: number[] = [0.3];
  for (let i = 0; i < 3; i++) reports.push(2);
  for (let i = 0; i < 2; i++) reports.push(4);
  for (let i = 0; i < 6; i++) reports.push(1);
  const tick = 250;
  const start = now;
  let next = now;
  for (const interval of reports) {
    while (now < next) {
      now += tick;
      pass();
    }
    report(interval);
    next = now + interval * 1000;
  }
  const end = now;
  t.ok(held.length > 0, 'assignments were sent');
  // Walk the timeline: the client holds the latest assignment it received, until its time to live ends.
  const lapses: string[] = [];
  for (let i = 0; i < held.length; i++) {
    const nextAt = i + 1 < held.length ? held[i + 1]!.at : end;
    if (nextAt > held[i]!.until) {
      lapses.push(`${(held[i]!.until - start) / 1000}s..${(nextAt - start) / 1000}s`);
    }
    // The refresh comes with half the held time to live left at least: margin for a busy event loop.
    const left = held[i]!.until - nextAt;
    if (i + 1 < held.length && left < (held[i]!.until - held[i]!.at) / 2 - tick) {
      lapses.push(`refresh at ${(nextAt - start) / 1000}s with only ${left} ms left`);
    }
  }
  t.same(lapses, [], 'no moment without an unexpired assignment, and every refresh with margin');
});
