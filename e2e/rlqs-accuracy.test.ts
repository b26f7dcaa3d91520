// RLQS from the client side, with simulated Envoys (harness/rlqs/envoy.ts, Envoy's rate_limit_quota
// filter emulated) on real Redis and the real built service:
// - the emulation, driven by examples/envoy/rate-limit-quota.yaml, does what the filter documents
//   (bucket ids from headers, immediate first report, periodic reports, local enforcement, fallbacks,
//   abandon), against a scripted RLQS server of this test;
// - fleet accuracy: the static "full quota to each Envoy" baseline over-admits, a demand-dividing server
//   (a small stub of this test, to show the measurement can read an accurate server as accurate) holds
//   the budget in steady state and comes back after a shift of demand; our service must pass the same
//   checks, on 1 and 2 pods.
//
// Tolerances (a busy 2-core CI machine): a 1 s window moves with the load generator's timer, so a late
// tick shifts requests into the next window; the steady figure is the median window, held to the 5 %
// target, each steady window to 15 %. After a shift: within 10 % two reporting intervals later, the
// target itself.
import t, { type Test } from 'tap';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { parse } from 'yaml';
import { REPO_ROOT } from '../harness/dist.js';
import { BOOTSTRAP, type Json } from '../harness/envoy-actions.js';
import { LOOPBACK, makeTempDir, removeTempDir, waitUntil } from '../harness/net.js';
import { startRedis } from '../harness/redis/index.js';
import {
  accuracyFilterConfig,
  accuracyServiceConfig,
  bucketKey,
  decodeFilter,
  envoyProtos,
  median,
  probeRlqs,
  RLQS_FILTER,
  rlqsEnv,
  rlqsFleet,
  rlqsServiceDefinition,
  runFleet,
  startPods,
  StaticQuotaServer,
  type FleetRunResult,
  type QuotaResponse,
  type UsageReports,
} from '../harness/rlqs/index.js';

const EXAMPLE = join(REPO_ROOT, 'examples', 'envoy', 'rate-limit-quota.yaml');
const INTERVAL_MS = 1000;
const BUDGET = 100;
const N = 10;

/** The rate_limit_quota filter of the example, decoded strictly. */
function exampleFilter(): Json {
  const r = envoyProtos().decode(BOOTSTRAP, parse(readFileSync(EXAMPLE, 'utf8')));
  if (r.errors.length) throw new Error(r.errors.join('\n'));
  const hcm = r.value.static_resources.listeners[0].filter_chains[0].filters[0].typed_config;
  const f = hcm.http_filters.find((x: Json) => x.typed_config?.['@type'] === RLQS_FILTER);
  return f.typed_config;
}

/** An RLQS server of this test: records every message per stream, answers what the test tells it to. */
class ScriptedServer {
  readonly messages: UsageReports[] = [];
  private calls: grpc.ServerDuplexStream<UsageReports, QuotaResponse>[] = [];
  private server = new grpc.Server();
  port = 0;

  async start(): Promise<void> {
    this.server.addService(rlqsServiceDefinition(), {
      StreamRateLimitQuotas: (call: grpc.ServerDuplexStream<UsageReports, QuotaResponse>) => {
        this.calls.push(call);
        call.on('data', (m: UsageReports) => this.messages.push(m));
        call.on('error', () => undefined);
        call.on('end', () => call.end());
      },
    });
    this.port = await new Promise<number>((resolve, reject) =>
      this.server.bindAsync(`${LOOPBACK}:0`, grpc.ServerCredentials.createInsecure(), (e, p) =>
        e ? reject(e) : resolve(p),
      ),
    );
  }

  send(r: QuotaResponse): void {
    for (const c of this.calls) c.write(r);
  }

  stop(): void {
    this.server.forceShutdown();
  }
}

t.test(
  'the emulated rate_limit_quota filter follows the documented behaviour (example config)',
  async (t) => {
    const srv = new ScriptedServer();
    await srv.start();
    t.teardown(() => srv.stop());
    const { emulators } = rlqsFleet(exampleFilter(), 1, [`${LOOPBACK}:${srv.port}`]);
    const em = emulators[0];
    t.teardown(() => em.close());
    const acme = { 'x-tenant': 'acme' };
    const acmeId = { bucket: { name: 'tenant', tenant: 'acme' } };

    // First request of a new bucket: reported at once, with the domain; the id built from the header.
    t.same(em.decide(acme), { allowed: true });
    const first = await waitUntil(() => srv.messages[0], { deadlineMs: 10_000, what: 'the first report' });
    t.equal(first.domain, 'quota', 'the first message carries the domain');
    t.same(first.bucket_quota_usages[0].bucket_id, acmeId, 'bucket id: fixed name + the x-tenant header');
    t.equal(Number(first.bucket_quota_usages[0].num_requests_allowed), 1);
    // Before an assignment: the example's no_assignment fallback, a token bucket of 10.
    let allowed = 1;
    for (let i = 0; i < 30; i++) if (em.decide(acme).allowed) allowed++;
    t.ok(
      allowed >= 10 && allowed <= 12,
      `no_assignment fallback admits ~10 of a burst of 31 (got ${allowed})`,
    );
    // Not matching the header predicate (bad characters): the on_no_match bucket {name: default}, allow all.
    t.same(em.decide({ 'x-tenant': 'NOT VALID' }), { allowed: true });
    await waitUntil(() => srv.messages.length >= 2, {
      deadlineMs: 10_000,
      what: 'the default bucket report',
    });
    t.same(srv.messages[1].bucket_quota_usages[0].bucket_id, { bucket: { name: 'default' } });
    t.equal(srv.messages[1].domain ?? '', '', 'later messages on the stream leave the domain out');
    // The periodic report names every bucket and counts the denied requests.
    const periodic = await waitUntil(
      () => srv.messages.slice(2).find((m) => m.bucket_quota_usages.length === 2),
      { deadlineMs: 10_000, what: 'a periodic report of both buckets' },
    );
    const acmeUsage = periodic.bucket_quota_usages.find((u) => bucketKey(u.bucket_id) === bucketKey(acmeId))!;
    t.equal(Number(acmeUsage.num_requests_denied), 31 - allowed, 'the denied requests are reported');

    // DENY_ALL assignment: denied with the configured status.
    srv.send({
      bucket_action: [
        {
          bucket_id: acmeId,
          quota_assignment_action: {
            assignment_time_to_live: { seconds: 30 },
            rate_limit_strategy: { blanket_rule: 'DENY_ALL' },
          },
        },
      ],
    });
    await waitUntil(() => em.bucketStates().get(bucketKey(acmeId)) === 'assigned', { deadlineMs: 10_000 });
    t.same(em.decide(acme), { allowed: false, status: 429 }, 'DENY_ALL → 429 (deny_response_settings)');
    // A token bucket of 3: three pass, the fourth does not.
    const tokenBucket = (maxTokens: number, ttlSeconds: number) => ({
      bucket_action: [
        {
          bucket_id: acmeId,
          quota_assignment_action: {
            assignment_time_to_live: { seconds: ttlSeconds },
            rate_limit_strategy: {
              token_bucket: {
                max_tokens: maxTokens,
                tokens_per_fill: { value: 1 },
                fill_interval: { seconds: 60 },
              },
            },
          },
        },
      ],
    });
    srv.send(tokenBucket(3, 30));
    await waitUntil(() => em.decide(acme).allowed, {
      deadlineMs: 10_000,
      what: 'the token bucket assignment',
    });
    t.same([em.decide(acme).allowed, em.decide(acme).allowed, em.decide(acme).allowed], [true, true, false]);
    // The same token bucket again keeps the (empty) bucket; a different one starts a new, full bucket.
    const answered = (n: number) => () => em.counters.responses >= n;
    srv.send(tokenBucket(3, 30));
    await waitUntil(answered(em.counters.responses + 1), { deadlineMs: 10_000, what: 'the same assignment' });
    t.equal(em.decide(acme).allowed, false, 'an identical token bucket carries the empty bucket over');
    srv.send(tokenBucket(4, 1));
    await waitUntil(answered(em.counters.responses + 1), {
      deadlineMs: 10_000,
      what: 'a changed assignment',
    });
    t.same(
      Array.from({ length: 5 }, () => em.decide(acme).allowed),
      [true, true, true, true, false],
      'a changed token bucket starts full (max_tokens 4)',
    );
    // Its TTL (1 s) runs out: the example's expired fallback (10 a second) applies.
    await waitUntil(() => em.bucketStates().get(bucketKey(acmeId)) === 'expired', {
      deadlineMs: 10_000,
      what: 'the assignment to expire',
    });
    let afterExpiry = 0;
    for (let i = 0; i < 20; i++) if (em.decide(acme).allowed) afterExpiry++;
    t.ok(afterExpiry >= 10 && afterExpiry <= 11, `expired fallback admits ~10 of 20 (got ${afterExpiry})`);
    // AbandonAction: the bucket is dropped; its next request starts it again with an immediate report.
    srv.send({ bucket_action: [{ bucket_id: acmeId, abandon_action: {} }] });
    await waitUntil(() => !em.bucketStates().has(bucketKey(acmeId)), { deadlineMs: 10_000, what: 'abandon' });
    const before = srv.messages.length;
    em.decide(acme);
    const again = await waitUntil(
      () =>
        srv.messages
          .slice(before)
          .find(
            (m) =>
              m.bucket_quota_usages.length === 1 &&
              bucketKey(m.bucket_quota_usages[0].bucket_id) === bucketKey(acmeId),
          ),
      { deadlineMs: 10_000, what: 'the restarted bucket report' },
    );
    t.equal(Number(again.bucket_quota_usages[0].num_requests_allowed), 1, 'a fresh subscription');
  },
);

/**
 * A demand-dividing RLQS server, ONLY to check the measurement (not the product): every Envoy's share is
 * budget × its demand ÷ the fleet's demand, as a token bucket. When a report moves some Envoy's share by
 * more than 10 % (Envoy restarts a full token bucket on every change), every Envoy whose share differs is
 * sent its new one, so the shares in force always add up to the budget.
 */
class StubAllocator {
  private readonly demand = new Map<number, { rate: number; at: number }>();
  private readonly given = new Map<number, number>();
  private readonly streams = new Map<
    number,
    {
      call: grpc.ServerDuplexStream<UsageReports, QuotaResponse>;
      bucketId: UsageReports['bucket_quota_usages'][number]['bucket_id'];
    }
  >();
  private server = new grpc.Server();
  private nextId = 0;
  port = 0;

  constructor(private readonly budget: number) {}

  private assign(id: number, share: number): void {
    const s = this.streams.get(id);
    if (!s) return;
    this.given.set(id, share);
    s.call.write({
      bucket_action: [
        {
          bucket_id: s.bucketId,
          quota_assignment_action: {
            assignment_time_to_live: { seconds: 10 },
            rate_limit_strategy: {
              token_bucket: {
                max_tokens: Math.max(1, Math.ceil(share * 0.2)),
                tokens_per_fill: { value: Math.max(1, Math.round(share * 10)) },
                fill_interval: { seconds: 10 },
              },
            },
          },
        },
      ],
    });
  }

  private reallocate(): void {
    let total = 0;
    for (const [k, d] of this.demand) {
      if (Date.now() - d.at > 3000) this.demand.delete(k);
      else total += d.rate;
    }
    const shares = new Map<number, number>();
    for (const [k, d] of this.demand)
      shares.set(k, total > 0 ? (this.budget * d.rate) / total : this.budget / this.demand.size);
    let moved = false;
    for (const [k, share] of shares) {
      const prev = this.given.get(k);
      if (prev === undefined || Math.abs(share - prev) > 0.1 * Math.max(prev, 0.5)) moved = true;
    }
    if (!moved) return;
    for (const [k, share] of shares) if (this.given.get(k) !== share) this.assign(k, share);
  }

  async start(): Promise<void> {
    this.server.addService(rlqsServiceDefinition(), {
      StreamRateLimitQuotas: (call: grpc.ServerDuplexStream<UsageReports, QuotaResponse>) => {
        const id = this.nextId++;
        call.on('data', (m: UsageReports) => {
          const u = m.bucket_quota_usages[0];
          this.streams.set(id, { call, bucketId: u.bucket_id });
          const secs = Number(u.time_elapsed.seconds ?? 0) + Number(u.time_elapsed.nanos ?? 0) / 1e9;
          const rate =
            (Number(u.num_requests_allowed ?? 0) + Number(u.num_requests_denied ?? 0)) / Math.max(secs, 0.05);
          this.demand.set(id, { rate, at: Date.now() });
          this.reallocate();
        });
        call.on('error', () => undefined);
        call.on('end', () => {
          this.streams.delete(id);
          call.end();
        });
      },
    });
    this.port = await new Promise<number>((resolve, reject) =>
      this.server.bindAsync(`${LOOPBACK}:0`, grpc.ServerCredentials.createInsecure(), (e, p) =>
        e ? reject(e) : resolve(p),
      ),
    );
  }

  stop(): void {
    this.server.forceShutdown();
  }
}

const filter = () => decodeFilter(accuracyFilterConfig(INTERVAL_MS));

async function fleetRun(targets: string[], scenario: 'steady' | 'shifting'): Promise<FleetRunResult> {
  const { clients } = rlqsFleet(filter(), N, targets);
  try {
    return await runFleet(clients, {
      scenario,
      budget: BUDGET,
      reportingIntervalMs: INTERVAL_MS,
      warmupWindows: 3,
      steadyWindows: 4,
      afterShiftWindows: 5,
    });
  } finally {
    for (const c of clients) c.close();
  }
}

function describeRun(r: FleetRunResult): string {
  const f = (xs: number[]) => xs.map((x) => x.toFixed(2)).join(' ');
  return `admitted/budget per window: steady [${f(r.steadyRatios)}] after shift [${f(r.afterShiftRatios)}] converge ${r.convergeIntervals}`;
}

/** The accuracy assertions of an allocating server. */
function assertAccurate(t: Test, r: FleetRunResult, what: string, opts: { maxConverge?: number } = {}): void {
  const maxConverge = opts.maxConverge ?? 2;
  t.comment(`${what}: ${describeRun(r)}`);
  const m = median(r.steadyRatios);
  t.ok(Math.abs(m - 1) <= 0.05, `${what}: steady median ${m.toFixed(3)} within 5 % of the budget`);
  for (const x of r.steadyRatios)
    t.ok(Math.abs(x - 1) <= 0.15, `${what}: steady window ${x.toFixed(3)} within 15 %`);
  if (r.scenario === 'shifting') {
    t.ok(
      r.convergeIntervals !== null && r.convergeIntervals! <= maxConverge,
      `${what}: within 10 % again ${r.convergeIntervals} reporting intervals after the shift (≤ ${maxConverge})`,
    );
  }
}

t.test('the static "full quota to each Envoy" baseline over-admits', async (t) => {
  const s = new StaticQuotaServer({ budgetPerSecond: () => BUDGET });
  await s.start();
  t.teardown(() => s.stop());
  const r = await fleetRun([s.target], 'steady');
  t.comment(describeRun(r));
  // Each of the 10 Envoys may admit the whole budget: the fleet admits all its demand (1.5 × budget).
  t.ok(median(r.steadyRatios) > 1.3, `static: median ${median(r.steadyRatios).toFixed(2)} × budget (> 1.3)`);
});

t.test('the measurement reads a demand-dividing server as accurate (stub of this test)', async (t) => {
  const s = new StubAllocator(BUDGET);
  await s.start();
  t.teardown(() => s.stop());
  // The stub learns a new Envoy's demand only from its second report: one interval more than the target.
  assertAccurate(t, await fleetRun([`${LOOPBACK}:${s.port}`], 'shifting'), 'stub', { maxConverge: 4 });
});

// Our quota server, through the same checks. It failed them as first merged (it pushed a changed token
// bucket to every stream several times a second, and Envoy starts every changed token bucket full: the
// fleet admitted 1.5 × the budget); it now keeps an Envoy's bucket unchanged in steady state. The
// two-interval recovery after a shift it failed too (three intervals, on 1 and 2 pods) while the idle
// Envoys' demand decayed over several reports, growing shares waited an interval and the pods' parts
// followed the fleet a window late.
t.test('our service holds the budget across the fleet (real Redis, 1 and 2 pods)', async (t) => {
  const redis = await startRedis({ args: ['--save', '', '--appendonly', 'no'] });
  t.teardown(() => redis.stop());
  const root = makeTempDir('rl-rlqs-accuracy');
  t.teardown(() => removeTempDir(root));
  const pods = await startPods({
    count: 2,
    redisUrl: redis.url,
    configYaml: accuracyServiceConfig(BUDGET),
    root,
    env: rlqsEnv(2, INTERVAL_MS),
  });
  t.teardown(() => pods.stop());
  t.equal(await probeRlqs(pods.targets[0]), 'answers', 'the service answers a usage report');
  assertAccurate(t, await fleetRun([pods.targets[0]], 'shifting'), '1 pod');
  assertAccurate(t, await fleetRun(pods.targets, 'shifting'), '2 pods');
});
