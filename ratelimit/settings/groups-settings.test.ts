// The gRPC listener and the Redis counters as one group each (settings.grpc, settings.redis), read from
// the same variables as before, with their defaults resolved here once: the per-second deployment is
// present only when REDIS_PERSECOND is on, and a 0 REDIS_TIMEOUT gives a 10 s connect timeout.
import t from 'tap';
import { loadSettings } from './index.js';

t.test('GRPC_* fill settings.grpc', async (t) => {
  t.same(loadSettings({}).grpc, {
    host: '0.0.0.0',
    port: 8081,
    uds: '',
    maxConnectionAgeMs: 24 * 3_600_000,
    maxConnectionAgeGraceMs: 3_600_000,
    maxRecvMsgSize: 4 * 1024 * 1024,
    maxDecompressedMsgSize: 64 * 1024,
    limits: {
      maxConcurrentStreams: 1000,
      maxSessionMemory: 16 * 1024 * 1024,
      maxTotalSessionMemory: 32 * 1024 * 1024,
      maxHeaderListSize: 65_536,
      prefaceTimeoutMs: 10_000,
      maxConnectionIdleMs: 3_600_000,
      keepaliveMinTimeMs: 10_000,
      keepalivePermitWithoutStream: true,
      maxConnections: 10_000,
    },
    http2: 'builtin',
    tls: { enabled: false, cert: '', key: '', clientCaCert: '', clientSan: '' },
  });
  const g = loadSettings({
    GRPC_HOST: '127.0.0.1',
    GRPC_PORT: '9000',
    GRPC_UDS: '/tmp/rl.sock',
    GRPC_MAX_CONNECTION_AGE: '1m',
    GRPC_SERVER_USE_TLS: 'true',
    GRPC_SERVER_TLS_CERT: '/c.pem',
    GRPC_SERVER_TLS_KEY: '/k.pem',
    GRPC_CLIENT_TLS_SAN: 'envoy',
  }).grpc;
  t.match(g, { host: '127.0.0.1', port: 9000, uds: '/tmp/rl.sock', maxConnectionAgeMs: 60_000 });
  const h = loadSettings({ GRPC_HTTP2_SERVER: 'node', GRPC_MAX_HEADER_LIST_SIZE: '8192' }).grpc;
  t.match(h, { http2: 'node', limits: { maxHeaderListSize: 8192 } });
  const k = loadSettings({
    GRPC_MAX_SESSION_MEMORY_MB: '8',
    GRPC_MAX_TOTAL_SESSION_MEMORY_MB: '100',
    GRPC_MAX_CONNECTIONS: '50',
    GRPC_MAX_CONNECTION_IDLE: '5m',
    GRPC_KEEPALIVE_MIN_TIME: '30s',
    GRPC_KEEPALIVE_PERMIT_WITHOUT_STREAM: 'false',
  }).grpc.limits;
  t.match(k, {
    maxSessionMemory: 8 * 1024 * 1024,
    maxTotalSessionMemory: 100 * 1024 * 1024,
    maxConnections: 50,
    maxConnectionIdleMs: 300_000,
    keepaliveMinTimeMs: 30_000,
    keepalivePermitWithoutStream: false,
  });
  t.throws(() => loadSettings({ GRPC_HTTP2_SERVER: 'nghttp2' }), /GRPC_HTTP2_SERVER/);
  t.throws(() => loadSettings({ GRPC_MAX_HEADER_LIST_SIZE: '100' }), /GRPC_MAX_HEADER_LIST_SIZE/);
  t.same(g.tls, { enabled: true, cert: '/c.pem', key: '/k.pem', clientCaCert: '', clientSan: 'envoy' });
  t.throws(() => loadSettings({ GRPC_SERVER_USE_TLS: 'true', GRPC_SERVER_TLS_CERT: '/c.pem' }), {
    message: /^GRPC_SERVER_TLS_CERT: GRPC_SERVER_USE_TLS=true needs/,
  });
});

t.test('REDIS_* fill settings.redis; the per-second deployment only with REDIS_PERSECOND', async (t) => {
  const off = loadSettings({ REDIS_URL: 'r:6379', REDIS_TIMEOUT: '0', REDIS_PERSECOND_URL: 'p:6379' }).redis;
  t.match(off.main, { url: 'r:6379', timeoutMs: 0, connectTimeoutMs: 10_000, staleRequestMs: 30_000 });
  t.equal(off.perSecond, undefined, 'no per-second deployment when REDIS_PERSECOND is off');
  t.same(off.circuitBreaker, { enabled: true, failureThreshold: 5, probeIntervalMs: 500 });
  t.equal(off.startupWaitMs, 10_000);
  t.equal(off.healthCheckActiveConnection, false);
  const on = loadSettings({ REDIS_PERSECOND: 'true', REDIS_PERSECOND_TIMEOUT: '2s' }).redis;
  t.match(on.perSecond, {
    url: '/var/run/nutcracker/ratelimitpersecond.sock',
    timeoutMs: 2000,
    connectTimeoutMs: 2000,
    staleRequestMs: 4000,
  });
  t.throws(
    () => loadSettings({ REDIS_PERSECOND_POOL_SIZE: '0' }),
    /^REDIS_PERSECOND_POOL_SIZE/,
    'checked when off',
  );
  t.throws(() => loadSettings({ REDIS_CIRCUIT_BREAKER_PROBE_INTERVAL: '5ms' }), {
    message: /^REDIS_CIRCUIT_BREAKER_PROBE_INTERVAL: must be at least 10ms/,
  });
});

t.test(
  "REDIS_STARTUP_*: the reference's startup retry settings, REDIS_STARTUP_WAIT as the older name",
  async (t) => {
    const none = loadSettings({}).redis;
    t.equal(none.startupWaitMs, 10_000);
    t.equal(none.startupBackoff, undefined, 'our faster schedule when neither interval is set');
    const up = loadSettings({
      REDIS_STARTUP_INITIAL_INTERVAL: '250ms',
      REDIS_STARTUP_MAX_INTERVAL: '4s',
      REDIS_STARTUP_MAX_ELAPSED_TIME: '1m',
      REDIS_STARTUP_WAIT: '5s',
    }).redis;
    t.same(up.startupBackoff, { initialMs: 250, maxMs: 4000 });
    t.equal(up.startupWaitMs, 60_000, 'REDIS_STARTUP_MAX_ELAPSED_TIME wins over REDIS_STARTUP_WAIT');
    t.same(loadSettings({ REDIS_STARTUP_MAX_INTERVAL: '2s' }).redis.startupBackoff, {
      initialMs: 1000,
      maxMs: 2000,
    });
    t.equal(
      loadSettings({ REDIS_STARTUP_MAX_ELAPSED_TIME: '0' }).redis.startupWaitMs,
      Number.POSITIVE_INFINITY,
      '0: wait for as long as it takes, as the reference does',
    );
    t.throws(() => loadSettings({ REDIS_STARTUP_MAX_INTERVAL: 'soon' }), /REDIS_STARTUP_MAX_INTERVAL/);
  },
);

t.test(
  'REDIS_POOL_ON_EMPTY_BEHAVIOR and REDIS_CLUSTER_PIPELINE_PARALLELISM: read with the reference checks',
  async (t) => {
    const main = loadSettings({}).redis.main;
    t.equal(main.poolOnEmptyBehavior, 'WAIT');
    t.equal(main.clusterPipelineParallelism, 1);
    t.equal(main.closeConnectionOnReadOnly, false);
    for (const v of ['CREATE', 'error', 'Create']) {
      t.throws(
        () => loadSettings({ REDIS_POOL_ON_EMPTY_BEHAVIOR: v }),
        { variable: 'REDIS_POOL_ON_EMPTY_BEHAVIOR', message: /not supported.*WAIT/ },
        `${v} stops the start`,
      );
    }
    for (const v of ['WAIT', 'wait', 'whatever']) {
      t.equal(
        loadSettings({ REDIS_POOL_ON_EMPTY_BEHAVIOR: v }).redis.main.poolOnEmptyBehavior,
        v,
        `${v} accepted`,
      );
    }
    t.throws(
      () => loadSettings({ REDIS_PERSECOND: 'true', REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR: 'ERROR' }),
      { variable: 'REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR', message: /ERROR is not supported/ },
    );
    t.doesNotThrow(
      () => loadSettings({ REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR: 'ERROR' }),
      'the per-second client is not built without REDIS_PERSECOND: not checked, as the reference',
    );
    t.doesNotThrow(
      () => loadSettings({ BACKEND_TYPE: 'memcache', REDIS_POOL_ON_EMPTY_BEHAVIOR: 'CREATE' }),
      'no Redis client without the redis backend: not checked',
    );
    t.throws(() => loadSettings({ REDIS_CLUSTER_PIPELINE_PARALLELISM: 'two' }), {
      variable: 'REDIS_CLUSTER_PIPELINE_PARALLELISM',
      message: /invalid integer/,
    });
    t.throws(
      () =>
        loadSettings({ REDIS_TYPE: 'cluster', REDIS_URL: 'a:1', REDIS_CLUSTER_PIPELINE_PARALLELISM: '-1' }),
      { variable: 'REDIS_CLUSTER_PIPELINE_PARALLELISM', message: /must be >= 0/ },
    );
    t.equal(
      loadSettings({ REDIS_CLUSTER_PIPELINE_PARALLELISM: '-1' }).redis.main.clusterPipelineParallelism,
      -1,
      'negative is checked only for a cluster, as the reference',
    );
    t.equal(
      loadSettings({ REDIS_PERSECOND: 'true', REDIS_PERSECOND_CLUSTER_PIPELINE_PARALLELISM: '0' }).redis
        .perSecond!.clusterPipelineParallelism,
      0,
    );
    const both = loadSettings({
      REDIS_PERSECOND: 'true',
      REDIS_CLOSE_CONNECTION_ON_READONLY_ERROR: 'true',
    }).redis;
    t.ok(
      both.main.closeConnectionOnReadOnly && both.perSecond!.closeConnectionOnReadOnly,
      'one setting for both',
    );
  },
);
