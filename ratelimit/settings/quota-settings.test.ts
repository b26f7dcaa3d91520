// The RLQS_* group: defaults, and values that cannot work refused at startup naming the variable.
import t from 'tap';
import { loadSettings } from './index.js';

t.test('RLQS settings: defaults and refusals', async (t) => {
  const q = loadSettings({}).quota;
  t.same(q, {
    enabled: false,
    reportingIntervalMs: 5000,
    ttlIntervals: 3,
    reassignThresholdPercent: 5,
    demandSmoothing: 0.7,
    idleTimeoutMs: 60_000,
    expectedPods: 1,
    maxStreams: 10_000,
    maxBucketsPerStream: 1000,
    maxReportsPerMessage: 1000,
    maxBuckets: 100_000,
    maxBucketBytesPerStream: 1024 * 1024,
    maxBucketBytes: 64 * 1024 * 1024,
    sendTimeoutMs: 30_000,
  });
  t.equal(
    loadSettings({ RLQS_ENABLED: 'true', RLQS_REPORTING_INTERVAL: '1s' }).quota.reportingIntervalMs,
    1000,
  );
  t.throws(
    () => loadSettings({ RLQS_REPORTING_INTERVAL: '10ms' }),
    /RLQS_REPORTING_INTERVAL.*between 40ms and 1h/,
  );
  t.throws(
    () => loadSettings({ RLQS_REPORTING_INTERVAL: '10s', RLQS_IDLE_TIMEOUT: '5s' }),
    /RLQS_IDLE_TIMEOUT.*at least RLQS_REPORTING_INTERVAL/,
  );
  t.throws(() => loadSettings({ RLQS_DEMAND_SMOOTHING: '0' }), /RLQS_DEMAND_SMOOTHING/);
  t.throws(() => loadSettings({ RLQS_MAX_STREAMS: '0' }), /RLQS_MAX_STREAMS/);
  t.throws(() => loadSettings({ RLQS_MAX_BUCKET_BYTES: '0' }), /RLQS_MAX_BUCKET_BYTES/);
  t.throws(() => loadSettings({ RLQS_SEND_TIMEOUT: '10ms' }), /RLQS_SEND_TIMEOUT.*at least 100ms/);
});
