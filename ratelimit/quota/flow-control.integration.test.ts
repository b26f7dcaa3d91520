// HTTP/2 flow control on a quota stream: a client that reads its responses is never cut off, even when
// one answer is larger than what fits in its flow-control window at once (here 5.6 MB: 700 buckets with
// 8000-byte ids); one that stops reading is ended with RESOURCE_EXHAUSTED within RLQS_SEND_TIMEOUT of
// its queue last moving. The real service in-process, a grpc-js client that reads and a node:http2
// client that never does.
import * as http2 from 'node:http2';
import t, { type Test } from 'tap';
import {
  rateLimitQuotaServiceDefinition,
  RLQS_STREAM_PATH,
  type WireUsageReports,
} from '../../proto/index.js';
import { eventually, startTestApp, type TestApp } from '../test-support.js';
import { openQuotaStream } from './test-support.js';

const CONFIG = `domain: rlqs
descriptors:
  - key: tenant
    rate_limit: { unit: second, requests_per_unit: 100 }
`;
const ENV = {
  RLQS_ENABLED: 'true',
  RLQS_REPORTING_INTERVAL: '1s',
  RLQS_SEND_TIMEOUT: '1s',
  GRPC_MAX_RECV_MSG_SIZE: String(16 * 1024 * 1024),
  RLQS_MAX_BUCKET_BYTES_PER_STREAM: String(16 * 1024 * 1024),
};
const BUCKETS = 700;

async function pod(t: Test, env: Record<string, string> = {}): Promise<TestApp> {
  const app = await startTestApp({ env: { ...ENV, ...env }, files: { 'rlqs.yaml': CONFIG } });
  t.teardown(() => app.close());
  return app;
}

/** One report of `count` buckets with 8000-byte ids: its answer is `count` × 8 kB. */
function bigReport(tag: string, count = BUCKETS): WireUsageReports {
  const usages = [];
  for (let i = 0; i < count; i++) {
    usages.push({
      bucketId: { bucket: { tenant: `${tag}${i}:`.padEnd(8000, 'x') } },
      timeElapsed: { seconds: 1 },
      numRequestsAllowed: 1,
    });
  }
  return { domain: 'rlqs', bucketQuotaUsages: usages };
}

t.test('a client that reads is not cut off by an answer larger than its window', async (t) => {
  // The client reads in the service's own process: on a busy machine encoding 5.6 MB answers can hold
  // the thread past 1 s, which is not the client failing to read. 15 s is generous and still bounded.
  const app = await pod(t, { RLQS_SEND_TIMEOUT: '15s' });
  const s = openQuotaStream(app.grpcAddress);
  t.teardown(() => s.close());
  s.send(bigReport('r'));
  const small = { tenant: 'small' };
  const timer = setInterval(() => s.report('', small, 10, 1), 1000);
  t.teardown(() => clearInterval(timer));
  const got = new Set<string | undefined>();
  let read = 0;
  const buckets = () => {
    for (; read < s.responses.length; read++) {
      for (const a of s.responses[read]!.bucketAction) got.add(a.bucketId?.bucket?.tenant);
    }
    return got.size;
  };
  await eventually(() => buckets() >= BUCKETS + 1 || s.status !== undefined, 60_000, 'every assignment');
  t.equal(s.status, undefined, 'the stream is open');
  t.equal(buckets(), BUCKETS + 1, 'an assignment for every bucket reported');
  // It goes on: more reports, more refreshes of the long ids (each about 5.6 MB again), still served.
  const seen = s.responses.length;
  await eventually(
    () => s.responses.length >= seen + 10 || s.status !== undefined,
    60_000,
    'ten more responses',
  );
  t.equal(s.status, undefined, 'still open after ten more responses');
});

t.test('a client that stops reading is ended within RLQS_SEND_TIMEOUT', async (t) => {
  const app = await pod(t);
  const session = http2.connect(`http://${app.grpcAddress}`);
  t.teardown(() => session.destroy());
  session.on('error', () => undefined);
  const req = session.request({
    ':method': 'POST',
    ':path': RLQS_STREAM_PATH,
    'content-type': 'application/grpc',
    te: 'trailers',
  });
  req.on('error', () => undefined);
  // Never read: the stream stays paused, so its flow-control window is never given back. The answer
  // (1.6 MB) is far larger than the window (64 KiB).
  req.pause();
  const body = rateLimitQuotaServiceDefinition().StreamRateLimitQuotas!.requestSerialize(bigReport('n', 200));
  const frame = Buffer.alloc(5 + body.length);
  frame.writeUInt32BE(body.length, 1);
  body.copy(frame, 5);
  req.write(frame);
  const stats = () => app.app.stats.snapshot();
  await eventually(() => stats()['ratelimit.rlqs.streams'] === 1, 10_000, 'the stream is served');
  const started = Date.now();
  await eventually(
    () => stats()['ratelimit.rlqs.streams'] === 0,
    30_000,
    'the stream that does not read is ended',
  );
  t.equal(stats()['ratelimit.rlqs.stream_errors'], 1, 'as the stream error it is');
  t.comment(`ended ${Date.now() - started} ms after it was served`);
});
