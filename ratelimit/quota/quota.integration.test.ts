// The rate limit quota server end to end: the real service (in-process, real gRPC port) and a real
// RLQS client stream; the fleet test runs two services on one real Redis.
import t, { type Test } from 'tap';
import { startRedis } from '../../harness/redis/index.js';
import { eventually, startTestApp, type TestApp } from '../test-support.js';
import { assignedRate, openQuotaStream, type TestQuotaStream } from './test-support.js';

const CONFIG = `domain: rlqs
descriptors:
  - key: tenant
    rate_limit: { unit: second, requests_per_unit: 100 }
    descriptors:
      - key: path
        rate_limit: { unit: second, requests_per_unit: 10 }
  - key: free
    rate_limit: { unlimited: true }
`;

/** Reporting interval of the tests (and the fleet window). */
const INTERVAL_MS = 200;

const ENV = {
  RLQS_ENABLED: 'true',
  RLQS_REPORTING_INTERVAL: `${INTERVAL_MS}ms`,
  RLQS_IDLE_TIMEOUT: '60s',
};

async function pod(
  t: Test,
  env: Record<string, string> = {},
  files = { 'rlqs.yaml': CONFIG },
): Promise<TestApp> {
  const app = await startTestApp({ env: { ...ENV, ...env }, files });
  t.teardown(() => app.close());
  return app;
}

function stream(t: Test, app: TestApp): TestQuotaStream {
  const s = openQuotaStream(app.grpcAddress);
  t.teardown(() => s.close());
  return s;
}

/** Keeps reporting `rate` for a bucket every interval until stopped (the Envoy's periodic report). */
function reportEvery(s: TestQuotaStream, bucket: Record<string, string>, rate: () => number): () => void {
  s.report('rlqs', bucket, rate(), INTERVAL_MS / 1000);
  const timer = setInterval(() => s.report('', bucket, rate(), INTERVAL_MS / 1000), INTERVAL_MS);
  return () => clearInterval(timer);
}

const near = (x: number | undefined, want: number, tolerance: number): boolean =>
  x !== undefined && Math.abs(x - want) <= want * tolerance;

t.test(
  'a stream gets a token bucket assignment of the whole budget; an unknown bucket is allowed',
  async (t) => {
    const app = await pod(t);
    const s = stream(t, app);
    s.send({
      domain: 'rlqs',
      bucketQuotaUsages: [
        { bucketId: { bucket: { tenant: 'a' } }, timeElapsed: { seconds: 1 }, numRequestsAllowed: 5 },
        // The map's order is not the tree's: matched as tenant -> path.
        {
          bucketId: { bucket: { path: '/x', tenant: 'a' } },
          timeElapsed: { seconds: 1 },
          numRequestsAllowed: 1,
        },
        { bucketId: { bucket: { nobody: 'x' } }, timeElapsed: { seconds: 1 }, numRequestsAllowed: 1 },
        { bucketId: { bucket: { free: 'x' } }, timeElapsed: { seconds: 1 }, numRequestsAllowed: 1 },
      ],
    });
    await eventually(() => s.latest({ free: 'x' }) !== undefined, 10_000, 'the first assignments');
    const a = s.latest({ tenant: 'a' })!;
    t.equal(a.bucketAction, 'quotaAssignmentAction');
    t.ok(near(assignedRate(a), 100, 0.001), `one subscriber: the whole 100/s (${assignedRate(a)})`);
    const ttl = a.quotaAssignmentAction!.assignmentTimeToLive;
    t.equal(
      Number(ttl.seconds ?? 0) * 1000 + Number(ttl.nanos ?? 0) / 1e6,
      3000,
      'TTL: 3 reporting intervals (1s seen)',
    );
    t.ok(near(assignedRate(s.latest({ path: '/x', tenant: 'a' })), 10, 0.001), 'the nested rule: 10/s');
    t.equal(s.latest({ nobody: 'x' })!.quotaAssignmentAction!.rateLimitStrategy.blanketRule, 'ALLOW_ALL');
    t.equal(s.latest({ free: 'x' })!.quotaAssignmentAction!.rateLimitStrategy.blanketRule, 'ALLOW_ALL');
    const rlqs = JSON.parse(await (await fetch(`${app.debugUrl}/rlqs`)).text());
    t.equal(rlqs.streams.length, 1, '/rlqs lists the stream');
    t.ok(
      rlqs.buckets.some((b: { rule: string | null }) => b.rule === 'rlqs.tenant'),
      '/rlqs lists the bucket with its rule',
    );
  },
);

t.test('two streams with demand 3:1 within the budget get shares 3:1 that sum to it', async (t) => {
  const app = await pod(t);
  const a = stream(t, app);
  const b = stream(t, app);
  const bucket = { tenant: 'shared' };
  // 60 + 20 fit in the budget: the room left is spread in proportion to demand.
  const stopA = reportEvery(a, bucket, () => 60);
  const stopB = reportEvery(b, bucket, () => 20);
  t.teardown(() => (stopA(), stopB()));
  await eventually(
    () => near(assignedRate(a.latest(bucket)), 75, 0.05) && near(assignedRate(b.latest(bucket)), 25, 0.05),
    20_000,
    'shares 75 and 25',
  );
  const sum = assignedRate(a.latest(bucket))! + assignedRate(b.latest(bucket))!;
  t.ok(near(sum, 100, 0.05), `shares sum to the budget (${sum})`);
});

t.test("Envoy's first report (time_elapsed 0) subscribes and weighs as the average subscriber", async (t) => {
  const app = await pod(t);
  const a = stream(t, app);
  const b = stream(t, app);
  const bucket = { tenant: 'watch' };
  const stopA = reportEvery(a, bucket, () => 30);
  t.teardown(stopA);
  await eventually(
    () => near(assignedRate(a.latest(bucket)), 100, 0.001),
    10_000,
    'a alone: the whole budget',
  );
  // Sent as the bucket is created: one request, no time elapsed.
  b.send({ domain: 'rlqs', bucketQuotaUsages: [{ bucketId: { bucket }, numRequestsAllowed: 1 }] });
  await eventually(() => b.latest(bucket) !== undefined, 10_000, 'b answered');
  t.ok(
    near(assignedRate(b.latest(bucket)), 50, 0.05),
    `b: half, as a newcomer (${assignedRate(b.latest(bucket))})`,
  );
  await eventually(() => near(assignedRate(a.latest(bucket)), 50, 0.05), 10_000, 'a: the other half');
  t.equal(b.status, undefined, 'b stays open');
});

t.test('the caller errors end that stream only, with INVALID_ARGUMENT naming the problem', async (t) => {
  const app = await pod(t);
  const good = stream(t, app);
  const stopGood = reportEvery(good, { tenant: 'g' }, () => 10);
  t.teardown(stopGood);
  const cases: [string, (s: TestQuotaStream) => void, RegExp][] = [
    ['missing domain', (s) => s.report('', { tenant: 'x' }, 1, 1), /must name its domain/],
    [
      'changed domain',
      (s) => {
        s.report('rlqs', { tenant: 'x' }, 1, 1);
        s.report('other', { tenant: 'x' }, 1, 1);
      },
      /domain changed from 'rlqs' to 'other'/,
    ],
    ['empty BucketId', (s) => s.report('rlqs', {}, 1, 1), /bucket_id is empty/],
    [
      'negative time_elapsed',
      (s) =>
        s.send({
          domain: 'rlqs',
          bucketQuotaUsages: [{ bucketId: { bucket: { tenant: 'x' } }, timeElapsed: { seconds: -1 } }],
        }),
      /time_elapsed must not be negative/,
    ],
  ];
  for (const [name, send, message] of cases) {
    const s = stream(t, app);
    send(s);
    await eventually(() => s.status !== undefined, 10_000, `${name}: the stream ends`);
    t.equal(s.status!.code, 3, `${name}: INVALID_ARGUMENT`);
    t.match(s.status!.details, message, name);
  }
  const before = good.responses.length;
  await eventually(() => good.responses.length > before, 10_000, 'the good stream still gets assignments');
  t.equal(good.status, undefined, 'the good stream is still open');
});

t.test('a config change is pushed at once to every subscriber', async (t) => {
  // A 60% move is under the threshold: the periodic pass would not send it, only the reload does.
  const app = await pod(t, {
    RLQS_REPORTING_INTERVAL: '10s',
    RLQS_IDLE_TIMEOUT: '60s',
    RLQS_REASSIGN_THRESHOLD_PERCENT: '100',
  });
  const s = stream(t, app);
  s.report('rlqs', { tenant: 'c' }, 10, 10);
  await eventually(
    () => near(assignedRate(s.latest({ tenant: 'c' })), 100, 0.001),
    10_000,
    'first assignment',
  );
  const seen = s.responses.length;
  app.writeConfig('rlqs.yaml', CONFIG.replace('requests_per_unit: 100', 'requests_per_unit: 40'));
  // No report is sent: the new assignment is pushed by the reload itself (the next report is 10 s away).
  await eventually(
    () => s.responses.length > seen && near(assignedRate(s.latest({ tenant: 'c' })), 40, 0.001),
    8000,
    'the new budget pushed',
  );
  t.pass('pushed without a report');
});

t.test('a bucket not reported for the idle timeout is abandoned, then the silent stream ends', async (t) => {
  const app = await pod(t, { RLQS_IDLE_TIMEOUT: '600ms' });
  const s = stream(t, app);
  s.report('rlqs', { tenant: 'idle' }, 10, 0.2);
  await eventually(() => s.latest({ tenant: 'idle' }) !== undefined, 10_000, 'assignment');
  await eventually(
    () => s.latest({ tenant: 'idle' })!.bucketAction === 'abandonAction',
    10_000,
    'AbandonAction',
  );
  const rlqs = JSON.parse(await (await fetch(`${app.debugUrl}/rlqs`)).text());
  t.equal(rlqs.buckets.length, 0, 'the bucket is forgotten');
  t.equal(app.app.stats.snapshot()['ratelimit.rlqs.rlqs.tenant.abandoned'], 1, 'counted');
  await eventually(() => s.status !== undefined, 10_000, 'the silent stream ends');
  t.equal(s.status!.code, 0, 'with OK: nothing left to watch');
});

t.test('graceful shutdown sends every assignment again with a TTL of 0, then ends the stream', async (t) => {
  const app = await startTestApp({ env: ENV, files: { 'rlqs.yaml': CONFIG } });
  const s = openQuotaStream(app.grpcAddress);
  t.teardown(() => s.close());
  s.report('rlqs', { tenant: 'bye' }, 10, 0.2);
  await eventually(() => s.latest({ tenant: 'bye' }) !== undefined, 10_000, 'assignment');
  await app.close();
  await eventually(() => s.status !== undefined, 10_000, 'the stream ends');
  const last = s.latest({ tenant: 'bye' })!;
  const ttl = last.quotaAssignmentAction!.assignmentTimeToLive;
  t.equal(Number(ttl.seconds ?? 0) + Number(ttl.nanos ?? 0), 0, 'TTL 0');
  t.equal(s.status!.code, 14, 'then UNAVAILABLE: reconnect');
});

t.test('two pods on one Redis divide the budget fleet-wide by their Envoys demand', async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const env = { BACKEND_TYPE: 'redis', REDIS_SOCKET_TYPE: 'tcp', REDIS_URL: redis.url };
  const p1 = await pod(t, env);
  const p2 = await pod(t, env);
  const a = stream(t, p1);
  const b = stream(t, p2);
  const bucket = { tenant: 'fleet' };
  // 60 + 30 fit in the budget of 100: each pod gets its demand and the room left in proportion.
  const stopA = reportEvery(a, bucket, () => 60);
  const stopB = reportEvery(b, bucket, () => 30);
  t.teardown(() => (stopA(), stopB()));
  await eventually(
    () => near(assignedRate(a.latest(bucket)), 66, 0.1) && near(assignedRate(b.latest(bucket)), 33, 0.1),
    30_000,
    'fleet shares 66 and 33',
  );
  const sum = assignedRate(a.latest(bucket))! + assignedRate(b.latest(bucket))!;
  t.ok(near(sum, 100, 0.1), `the two pods' shares sum to the budget (${sum})`);
});

t.test('an Envoy with one full demand sample weighs its demand, not the others average', async (t) => {
  const app = await pod(t);
  const hot = stream(t, app);
  const cold = stream(t, app);
  const bucket = { tenant: 'skew' };
  // Both subscribe (a first report without a sample), then report their demand once: 90/s and 5/s.
  hot.report('rlqs', bucket, 0, 0);
  cold.report('rlqs', bucket, 0, 0);
  await eventually(() => !!hot.latest(bucket) && !!cold.latest(bucket), 10_000, 'first assignments');
  hot.report('', bucket, 90, 1);
  cold.report('', bucket, 5, 1);
  // The hot Envoy's second sample arrives before the cold one's: it must not drop to half the budget
  // because the cold one, with one sample, is weighed as the average of the others.
  hot.report('', bucket, 90, 1);
  await eventually(
    () => (assignedRate(hot.latest(bucket)) ?? 0) >= 85,
    10_000,
    'the hot Envoy assigned its part by demand (90 / 95 of 100/s)',
  );
  t.ok(
    assignedRate(cold.latest(bucket))! <= 15,
    `the cold one about 5/s (${assignedRate(cold.latest(bucket))})`,
  );
});

t.test('an Envoy reporting that it went idle hands its share to the others at once', async (t) => {
  const app = await pod(t);
  const busy = stream(t, app);
  const idle = stream(t, app);
  const bucket = { tenant: 'idle' };
  busy.report('rlqs', bucket, 0, 0);
  idle.report('rlqs', bucket, 0, 0);
  busy.report('', bucket, 80, 1);
  idle.report('', bucket, 80, 1);
  await eventually(
    () =>
      near(assignedRate(busy.latest(bucket)), 50, 0.05) && near(assignedRate(idle.latest(bucket)), 50, 0.05),
    10_000,
    'equal demand: 50 each',
  );
  // One report of no use. Smoothed (0.7 of the newest), the idle Envoy kept 80 × 0.3 = 24/s of demand
  // and the busy one 77 % of the budget until more reports came.
  idle.report('', bucket, 0, 1);
  await eventually(() => (assignedRate(idle.latest(bucket)) ?? 100) <= 2, 10_000, 'the idle share gone');
  await eventually(
    () => (assignedRate(busy.latest(bucket)) ?? 0) >= 95,
    10_000,
    `the busy Envoy gets the budget after that one report (${assignedRate(busy.latest(bucket))})`,
  );
});
