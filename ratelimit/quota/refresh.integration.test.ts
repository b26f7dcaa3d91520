// On a loaded pod (4,000 buckets of other streams reported and refreshed beside it), an Envoy whose
// reports' time_elapsed changes (a short first report, then longer, then shorter intervals) holds an
// unexpired assignment at every moment, as seen by the client. The real service in-process and real
// gRPC streams.
import t from 'tap';
import type { WireUsageReports } from '../../proto/index.js';
import { eventually, startTestApp } from '../test-support.js';
import { openQuotaStream, type TestQuotaStream } from './test-support.js';

const CONFIG = `domain: rlqs
descriptors:
  - key: tenant
    rate_limit: { unit: second, requests_per_unit: 100 }
`;

t.test('a reporting stream never holds an expired assignment on a loaded pod', async (t) => {
  const app = await startTestApp({
    env: { RLQS_ENABLED: 'true', RLQS_REPORTING_INTERVAL: '4s' },
    files: { 'rlqs.yaml': CONFIG },
  });
  t.teardown(() => app.close());

  // The load: 8 streams of 500 buckets with 1000-byte ids, each reported every 4 s (the reporting
  // interval): 4,000 buckets whose assignments the pod divides and refreshes beside the watched one.
  const load: TestQuotaStream[] = [];
  for (let i = 0; i < 8; i++) {
    const s = openQuotaStream(app.grpcAddress);
    const msg = (domain: string): WireUsageReports => ({
      domain,
      bucketQuotaUsages: Array.from({ length: 500 }, (_, j) => ({
        bucketId: { bucket: { tenant: `${i}-${j}:`.padEnd(1000, 'x') } },
        timeElapsed: { seconds: 4 },
        numRequestsAllowed: 4,
      })),
    });
    s.send(msg('rlqs'));
    const timer = setInterval(() => s.send(msg('')), 4000);
    t.teardown(() => {
      clearInterval(timer);
      s.close();
    });
    load.push(s);
  }
  await eventually(() => load.every((s) => s.responses.length > 0), 120_000, 'the load is served');

  const s = openQuotaStream(app.grpcAddress);
  t.teardown(() => s.close());
  const bucket = { tenant: 'watched' };
  // When each assignment arrived at the client and until when it holds.
  const held: { at: number; until: number }[] = [];
  let seen = 0;
  const poll = setInterval(() => {
    for (; seen < s.responses.length; seen++) {
      for (const a of s.responses[seen]!.bucketAction) {
        const ttl = a.quotaAssignmentAction?.assignmentTimeToLive;
        if (a.bucketId?.bucket?.tenant !== 'watched' || !ttl) continue;
        const now = Date.now();
        held.push({ at: now, until: now + Number(ttl.seconds ?? 0) * 1000 + Number(ttl.nanos ?? 0) / 1e6 });
      }
    }
  }, 5);
  t.teardown(() => clearInterval(poll));
  // A first periodic report over 1.2 s (time to live 4 s), then an 8 s report (24 s), then 4 s ones
  // (12 s). Before the client's copy runs out a refresh is due with half its time to live left (2 s at
  // least), far more than the event loop of this busy process stalls.
  const schedule = [1.2, 8, 4, 4];
  for (const [i, seconds] of schedule.entries()) {
    s.report(i === 0 ? 'rlqs' : '', bucket, 20, seconds);
    await new Promise((r) => setTimeout(r, seconds * 1000));
  }
  const end = Date.now();
  t.equal(s.status, undefined, 'the watched stream is open');
  t.ok(
    load.every((l) => l.status === undefined),
    'the load streams are open',
  );
  t.ok(held.length > 0, 'assignments arrived');
  const lapses: string[] = [];
  for (let i = 0; i < held.length; i++) {
    const next = i + 1 < held.length ? held[i + 1]!.at : end;
    if (next > held[i]!.until) lapses.push(`${held[i]!.until - held[0]!.at}..${next - held[0]!.at} ms`);
  }
  const timeline = held.map((h) => `${h.at - held[0]!.at}+${h.until - h.at}`).join(', ');
  t.same(
    lapses,
    [],
    `no lapse over ${((end - held[0]!.at) / 1000).toFixed(1)} s (assignments at ms+ttl: ${timeline})`,
  );
});
