// What the quota server takes from outside is bounded, and a caller's bad value ends that caller's
// stream only: message size, reports per message, buckets per stream, streams per pod, bytes that do not
// decode; compressed messages are inflated in order; a config ambiguous for buckets is refused and the
// last good one keeps serving; while Redis is down a pod assigns budget / RLQS_EXPECTED_PODS.
import * as http2 from 'node:http2';
import { gzipSync } from 'node:zlib';
import t, { type Test } from 'tap';
import {
  rateLimitQuotaServiceDefinition,
  RLQS_STREAM_PATH,
  type WireUsageReports,
} from '../../proto/index.js';
import { startRedis } from '../../harness/redis/index.js';
import { eventually, startTestApp, type TestApp } from '../test-support.js';
import { assignedRate, openQuotaStream, type TestQuotaStream } from './test-support.js';

const CONFIG = `domain: rlqs
descriptors:
  - key: tenant
    rate_limit: { unit: second, requests_per_unit: 100 }
`;
const ENV = { RLQS_ENABLED: 'true', RLQS_REPORTING_INTERVAL: '200ms' };

async function pod(t: Test, env: Record<string, string> = {}): Promise<TestApp> {
  const app = await startTestApp({ env: { ...ENV, ...env }, files: { 'rlqs.yaml': CONFIG } });
  t.teardown(() => app.close());
  return app;
}

function stream(t: Test, app: TestApp): TestQuotaStream {
  const s = openQuotaStream(app.grpcAddress);
  t.teardown(() => s.close());
  return s;
}

const usage = (tenant: string) => ({
  bucketId: { bucket: { tenant } },
  timeElapsed: { seconds: 1 },
  numRequestsAllowed: 1,
});

async function ended(s: TestQuotaStream, what: string): Promise<{ code: number; details: string }> {
  await eventually(() => s.status !== undefined, 10_000, what);
  return s.status!;
}

t.test('bounds end the offending stream with a status naming the bound; other streams go on', async (t) => {
  const app = await pod(t, {
    GRPC_MAX_RECV_MSG_SIZE: '2048',
    RLQS_MAX_REPORTS_PER_MESSAGE: '2',
    RLQS_MAX_BUCKETS_PER_STREAM: '2',
    RLQS_MAX_STREAMS: '5',
  });
  const good = stream(t, app);
  good.send({ domain: 'rlqs', bucketQuotaUsages: [usage('good')] });
  await eventually(() => good.latest({ tenant: 'good' }) !== undefined, 10_000, 'the good stream is served');

  const big = stream(t, app);
  big.send({ domain: 'rlqs', bucketQuotaUsages: [usage('x'.repeat(4000))] });
  let st = await ended(big, 'a message past GRPC_MAX_RECV_MSG_SIZE');
  t.equal(st.code, 8, 'RESOURCE_EXHAUSTED');
  t.match(st.details, /GRPC_MAX_RECV_MSG_SIZE/);

  const many = stream(t, app);
  many.send({ domain: 'rlqs', bucketQuotaUsages: [usage('a'), usage('b'), usage('c')] });
  st = await ended(many, 'too many reports in a message');
  t.equal(st.code, 3, 'INVALID_ARGUMENT');
  t.match(st.details, /RLQS_MAX_REPORTS_PER_MESSAGE/);

  const wide = stream(t, app);
  wide.send({ domain: 'rlqs', bucketQuotaUsages: [usage('a'), usage('b')] });
  wide.send({ domain: 'rlqs', bucketQuotaUsages: [usage('c')] });
  st = await ended(wide, 'too many buckets on a stream');
  t.equal(st.code, 3, 'INVALID_ARGUMENT');
  t.match(st.details, /RLQS_MAX_BUCKETS_PER_STREAM/);
  t.ok(wide.latest({ tenant: 'a' }), 'its first message was served');

  const open: TestQuotaStream[] = [];
  for (let i = 0; i < 5; i++) {
    const s = stream(t, app);
    s.send({ domain: 'rlqs', bucketQuotaUsages: [usage(`s${i}`)] });
    open.push(s);
  }
  await eventually(
    () => open.filter((s) => s.status !== undefined).length === 1,
    10_000,
    'the sixth stream refused',
  );
  const refused = open.find((s) => s.status !== undefined)!;
  t.equal(refused.status!.code, 8, 'RESOURCE_EXHAUSTED');
  t.match(refused.status!.details, /RLQS_MAX_STREAMS/);

  const before = good.responses.length;
  good.send({ bucketQuotaUsages: [usage('good')] });
  await eventually(() => good.responses.length > before, 10_000, 'the good stream still answered');
  t.equal(good.status, undefined);
  t.ok(app.app.stats.snapshot()['ratelimit.rlqs.stream_errors']! >= 3, 'stream errors counted');
});

/** One raw call: writes the given frames, resolves with grpc-status, grpc-message and the messages. */
function rawCall(
  address: string,
  frames: Buffer[],
  encoding?: string,
): Promise<{ code: number; details: string; messages: number }> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(`http://${address}`);
    session.on('error', reject);
    const req = session.request({
      ':method': 'POST',
      ':path': RLQS_STREAM_PATH,
      'content-type': 'application/grpc',
      te: 'trailers',
      ...(encoding ? { 'grpc-encoding': encoding } : {}),
    });
    let headers: http2.IncomingHttpHeaders = {};
    let body = Buffer.alloc(0);
    req.on('response', (h) => (headers = h));
    req.on('trailers', (tr) => (headers = { ...headers, ...tr }));
    req.on('data', (c: Buffer) => (body = Buffer.concat([body, c])));
    req.on('error', reject);
    req.on('close', () => {
      session.close();
      let messages = 0;
      for (let i = 0; i + 5 <= body.length; i += 5 + body.readUInt32BE(i + 1)) messages++;
      resolve({
        code: Number(headers['grpc-status'] ?? -1),
        details: decodeURIComponent(String(headers['grpc-message'] ?? '')),
        messages,
      });
    });
    for (const f of frames) req.write(f);
    req.end();
  });
}

function frame(payload: Buffer, compressed = false): Buffer {
  const out = Buffer.alloc(5 + payload.length);
  out[0] = compressed ? 1 : 0;
  out.writeUInt32BE(payload.length, 1);
  payload.copy(out, 5);
  return out;
}

const encode = (m: WireUsageReports): Buffer =>
  rateLimitQuotaServiceDefinition().StreamRateLimitQuotas!.requestSerialize(m) as Buffer;

t.test('bytes that do not decode: INVALID_ARGUMENT; gzip messages are answered in order', async (t) => {
  const app = await pod(t);
  const bad = await rawCall(app.grpcAddress, [frame(Buffer.from([0x12, 0x05, 0x01]))]);
  t.equal(bad.code, 3, 'INVALID_ARGUMENT');
  t.match(bad.details, /error parsing request/);

  const first = encode({ domain: 'rlqs', bucketQuotaUsages: [usage('z1')] });
  const second = encode({ bucketQuotaUsages: [usage('z2')] });
  // The compressed first message and the plain second one: the domain must be seen first.
  const ok = await rawCall(app.grpcAddress, [frame(gzipSync(first), true), frame(second)], 'gzip');
  t.equal(ok.code, 0, `half-close ends the call with OK (${ok.details})`);
  t.equal(ok.messages, 2, 'one response per report, in order');
});

t.test('a config ambiguous for buckets is refused; the last good one keeps serving', async (t) => {
  const app = await pod(t);
  const s = stream(t, app);
  s.report('rlqs', { tenant: 'a' }, 10, 1);
  await eventually(() => s.latest({ tenant: 'a' }) !== undefined, 10_000, 'assignment');
  const errors = () => app.app.stats.snapshot()['ratelimit.service.config_load_error'] ?? 0;
  const before = errors();
  app.writeConfig(
    'rlqs.yaml',
    `domain: rlqs
descriptors:
  - key: tenant
    rate_limit: { unit: second, requests_per_unit: 7 }
    descriptors:
      - key: path
        rate_limit: { unit: second, requests_per_unit: 1 }
  - key: path
    descriptors:
      - key: tenant
        rate_limit: { unit: second, requests_per_unit: 2 }
`,
  );
  await eventually(() => errors() > before, 10_000, 'the reload refused');
  const limit = app.app.service.getConfig()!.getLimit('rlqs', { entries: [{ key: 'tenant', value: 'a' }] });
  t.equal(limit?.rule.requestsPerUnit, 100, 'the previous config still serves');
});

t.test(
  'while Redis is down a pod assigns budget / RLQS_EXPECTED_PODS, and the stream stays open',
  async (t) => {
    const redis = await startRedis();
    t.teardown(() => redis.stop());
    const app = await pod(t, {
      BACKEND_TYPE: 'redis',
      REDIS_SOCKET_TYPE: 'tcp',
      REDIS_URL: redis.url,
      REDIS_TIMEOUT: '200ms',
      RLQS_EXPECTED_PODS: '4',
    });
    const s = stream(t, app);
    const bucket = { tenant: 'outage' };
    s.report('rlqs', bucket, 50, 0.2);
    const timer = setInterval(() => s.report('', bucket, 50, 0.2), 200);
    t.teardown(() => clearInterval(timer));
    await eventually(
      () => Math.abs(assignedRate(s.latest(bucket))! - 100) < 1,
      10_000,
      'the whole budget while Redis answers (one pod)',
    );
    await redis.kill();
    await eventually(
      () => Math.abs(assignedRate(s.latest(bucket))! - 25) < 1,
      20_000,
      'budget / 4 once the fleet totals cannot be read',
    );
    t.equal(s.status, undefined, 'the stream is still open');
    t.ok(app.app.stats.snapshot()['ratelimit.rlqs.fleet_errors']! > 0, 'fleet errors counted');
  },
);
