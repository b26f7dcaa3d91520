// When an Envoy's report shows it went idle, the quota server hands its share to the others: the idle
// Envoy's demand drops at once (it used less than its share), and the others' token buckets grow in the
// same division, into the room the shrinking ones left, instead of a reporting interval later. The
// QuotaServer runs in-process on the memory store with a fake clock and no pass timer, so every step is
// the synchronous answer to one report.
import t from 'tap';
import pino from 'pino';
import { loadConfig } from '../config/index.js';
import { MemoryCounterStore } from '../memory/index.js';
import { loadSettings } from '../settings/index.js';
import { StatsStore } from '../stats/index.js';
import type { WireQuotaResponse } from '../../proto/index.js';
import { QuotaServer } from './server.js';

const CONFIG = `domain: rlqs
descriptors:
  - key: tenant
    rate_limit: { unit: second, requests_per_unit: 100 }
`;

t.test('an Envoy reporting no use hands its share to the others within that one report', async (t) => {
  let now = 10_000;
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
  const sent = new Map<string, WireQuotaResponse[]>();
  const open = (name: string) => {
    const list: WireQuotaResponse[] = [];
    sent.set(name, list);
    return server.open({ send: (m) => list.push(m), end: () => undefined, closed: false, queuedBytes: 0 });
  };
  /** Tokens per second of the last token bucket a stream was sent (0 for DENY_ALL). */
  const tokens = (name: string): number => {
    const list = sent.get(name)!;
    const tb = list[list.length - 1]?.bucketAction[0]?.quotaAssignmentAction?.rateLimitStrategy?.tokenBucket;
    return tb ? Number(tb.tokensPerFill?.value ?? 1) / Number(tb.fillInterval.seconds ?? 1) : 0;
  };
  const bucket = { tenant: 'acme' };
  const report = (stream: ReturnType<typeof open>, rate: number) =>
    server.report(stream, {
      domain: 'rlqs',
      bucketQuotaUsages: [
        { bucketId: { bucket }, timeElapsed: { seconds: 1, nanos: 0 }, numRequestsAllowed: rate },
      ],
    });
  const busy = open('busy');
  const idle = open('idle');
  report(busy, 80);
  report(idle, 80);
  t.same([tokens('busy'), tokens('idle')], [50, 50], 'equal demand: 50 tokens/s each');
  // 100 ms later (well inside the reporting interval since the busy Envoy's bucket last changed) the
  // other Envoy reports that it used nothing.
  now += 100;
  report(idle, 0);
  t.ok(tokens('idle') <= 1, `the idle Envoy's share is gone at once (${tokens('idle').toFixed(2)} tokens/s)`);
  // Smoothed, the idle Envoy kept 0.3 × 80 of demand (the busy one 77 % of the budget); and a growing
  // share waited a reporting interval since its last change.
  t.ok(tokens('busy') >= 95, `the busy Envoy gets the budget in the same division (${tokens('busy')})`);
  server.shutdown();
});
