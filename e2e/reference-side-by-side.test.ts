// The reference Go service (service_cmd at the revision scripts/build-go-tools.sh pins) and our
// service side by side: the same config files, the same requests, each answer asserted for both.
// Where they agree the test says so; where they differ (README "Differences from the reference")
// it asserts each side's own answer, so an upstream change shows up here as a failing test.
import t, { type Test } from 'tap';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, tryConnect } from '../harness/net.js';
import { startReferenceService, type ReferenceService } from '../harness/reference.js';
import { startRedis, type RedisServer } from '../harness/redis/index.js';
import { eventually, startTestApp, type TestApp } from '../ratelimit/test-support.js';
import * as grpc from '@grpc/grpc-js';
import { status as GrpcStatus } from '@grpc/grpc-js';
import {
  rateLimitServiceDefinition,
  type WireRateLimitRequest,
  type WireRateLimitResponse,
} from '../proto/index.js';
import { callOnce } from '../cli/ratelimit-client/main.js';
import { RateLimitApp } from '../ratelimit/app.js';
import { createLogger } from '../common/index.js';
import { loadSettings } from '../ratelimit/settings/index.js';

/** Starts the reference on free loopback ports with FILE config from `files`, and waits for its health. */
async function startReference(
  t: Test,
  files: Record<string, string>,
  env: Record<string, string> = {},
): Promise<ReferenceService> {
  const ref = await startReferenceService(t, { files, env });
  const { proc, httpUrl } = ref;
  await eventually(
    async () => {
      if (!proc.running) throw new Error(`${proc.exitReason()}\n${proc.logTail(30)}`);
      try {
        return (await fetch(`${httpUrl}/healthcheck`)).status === 200;
      } catch {
        return false;
      }
    },
    30_000,
    'the reference /healthcheck',
  ).catch((err) => {
    throw new Error(`${err.message}\n${proc.logTail(40)}`);
  });
  return ref;
}

interface JsonAnswer {
  status: number;
  body: string;
}

async function postJson(baseUrl: string, body: unknown): Promise<JsonAnswer> {
  const res = await fetch(`${baseUrl}/json`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.status, body: await res.text() };
}

const limitOf = (a: JsonAnswer): number | undefined =>
  (JSON.parse(a.body) as { statuses?: { currentLimit?: { requestsPerUnit?: number } }[] }).statuses?.[0]
    ?.currentLimit?.requestsPerUnit;

/** How a gRPC ShouldRateLimit call failed: its status code and details (code 0 when it succeeded). */
const grpcFailure = (
  dialString: string,
  domain: string,
  entries: { key: string; value: string }[],
): Promise<{ code: number; details: string }> =>
  callOnce({ dialString, domain, descriptors: [entries] }).then(
    () => ({ code: 0, details: '' }),
    (err: Error & { code?: number; details?: string }) => ({
      code: err.code ?? -1,
      details: err.details ?? err.message,
    }),
  );

const SIDE = `domain: side
descriptors:
  - key: host
    value: "foo*bar"
    rate_limit: { unit: hour, requests_per_unit: 11 }
  - key: host
    value: foo9bar
    rate_limit: { unit: hour, requests_per_unit: 12 }
  - key: host
    value: "foo*"
    rate_limit: { unit: hour, requests_per_unit: 13 }
  - key: host
    rate_limit: { unit: hour, requests_per_unit: 14 }
  - key: hdr
    rate_limit: { unit: hour, requests_per_unit: 15 }
  - key: hdr
    value: set
    rate_limit: { unit: hour, requests_per_unit: 16 }
  - key: quota
    quota_mode: true
    rate_limit: { unit: hour, requests_per_unit: 1 }
  - key: refund
    rate_limit: { unit: hour, requests_per_unit: 5 }
`;

/** One ShouldRateLimit call with whole descriptors (is_negative_hits included), over our .proto copies. */
async function grpcCall(dialString: string, request: WireRateLimitRequest): Promise<WireRateLimitResponse> {
  const Client = grpc.makeGenericClientConstructor(rateLimitServiceDefinition(), 'RateLimitService');
  const client = new Client(dialString, grpc.credentials.createInsecure()) as unknown as grpc.Client & {
    ShouldRateLimit(
      req: WireRateLimitRequest,
      cb: (err: grpc.ServiceError | null, res?: WireRateLimitResponse) => void,
    ): void;
  };
  try {
    return await new Promise((resolve, reject) =>
      client.ShouldRateLimit(request, (err, res) => (err ? reject(err) : resolve(res!))),
    );
  } finally {
    client.close();
  }
}

t.test('the same config and requests: where the reference and we agree and differ', async (t) => {
  const redis: RedisServer = await startRedis();
  t.teardown(() => redis.stop());
  const refPrefix = `ref${process.pid}_`;
  const oursPrefix = `ours${process.pid}_`;
  const ref = await startReference(
    t,
    { 'side.yaml': SIDE },
    { REDIS_SOCKET_TYPE: 'tcp', REDIS_URL: redis.url, CACHE_KEY_PREFIX: refPrefix },
  );
  const ours: TestApp = await startTestApp({
    files: { 'side.yaml': SIDE },
    env: {
      BACKEND_TYPE: 'redis',
      REDIS_SOCKET_TYPE: 'tcp',
      REDIS_URL: redis.url,
      CACHE_KEY_PREFIX: oursPrefix,
    },
  });
  t.teardown(() => ours.close());
  const both = async (body: unknown) => ({
    ref: await postJson(ref.httpUrl, body),
    ours: await postJson(ours.httpUrl, body),
  });
  const host = (value: string) => ({ domain: 'side', descriptors: [{ entries: [{ key: 'host', value }] }] });
  await eventually(
    async () => limitOf(await postJson(ref.httpUrl, host('probe'))) === 14,
    15_000,
    'the reference to load side.yaml',
  );

  await t.test('agree: exact value, trailing wildcard, key only, a literal * value', async (t) => {
    for (const [value, rpu] of [
      ['foo9bar', 12],
      ['fooxyz', 13],
      ['other', 14],
      ['foo*bar', 11],
    ] as const) {
      const a = await both(host(value));
      t.equal(limitOf(a.ref), rpu, `reference: host=${value}`);
      t.equal(limitOf(a.ours), rpu, `ours: host=${value}`);
    }
  });

  await t.test('differ: a * inside a value (upstream 6bcd4d2 is newer than the pin)', async (t) => {
    const a = await both(host('foo123bar'));
    t.equal(limitOf(a.ref), 13, 'reference at the pin: foo*bar is literal, the trailing foo* matches');
    t.equal(limitOf(a.ours), 11, 'ours: foo*bar matches first, in config order');
  });

  await t.test('agree: an empty value takes the key-only rule and the same cache key', async (t) => {
    const body = { domain: 'side', descriptors: [{ entries: [{ key: 'hdr', value: '' }] }] };
    const a = await both(body);
    t.equal(a.ref.status, 200);
    t.equal(a.ours.status, 200);
    t.equal(limitOf(a.ref), 15, 'reference');
    t.equal(limitOf(a.ours), 15, 'ours');
    const rc = redis.client();
    t.equal((await rc.keys(`${refPrefix}side_hdr__*`)).length, 1, 'reference key side_hdr__<window>');
    t.equal((await rc.keys(`${oursPrefix}side_hdr__*`)).length, 1, 'our key has the same form');
  });

  await t.test('differ: /json on an invalid request', async (t) => {
    for (const [what, body, ours] of [
      ['bad JSON', '{"domain": ', /./],
      ['an unknown field', { domain: 'side', descriptors: [], bogus: 1 }, /unknown field 'bogus'/],
      ['an empty domain', { ...host('x'), domain: '' }, /rate limit domain must not be empty/],
      ['no descriptors', { domain: 'side', descriptors: [] }, /descriptor list must not be empty/],
    ] as const) {
      const a = await both(body);
      t.equal(a.ref.status, 400, `reference: ${what} is 400`);
      t.equal(a.ref.body, 'Bad Request\n', `reference: ${what} says only "Bad Request"`);
      t.equal(a.ours.status, 400, `ours: ${what} is 400`);
      t.match(a.ours.body, ours, `ours: ${what} says why`);
    }
  });

  await t.test('differ: gRPC status of an invalid request', async (t) => {
    const ref1 = await grpcFailure(ref.dial, '', [{ key: 'host', value: 'x' }]);
    const ours1 = await grpcFailure(ours.grpcAddress, '', [{ key: 'host', value: 'x' }]);
    t.equal(ref1.code, GrpcStatus.UNKNOWN, 'reference: an empty domain is UNKNOWN');
    t.equal(ref1.details, 'rate limit domain must not be empty');
    t.equal(ours1.code, GrpcStatus.INVALID_ARGUMENT, 'ours: INVALID_ARGUMENT');
    t.equal(ours1.details, 'rate limit domain must not be empty');
    const ref2 = await grpcFailure(ref.dial, 'side', [{ key: '', value: 'x' }]);
    const ours2 = await grpcFailure(ours.grpcAddress, 'side', [{ key: '', value: 'x' }]);
    t.equal(ref2.code, 0, 'reference: an empty key is answered');
    t.equal(ours2.code, GrpcStatus.INVALID_ARGUMENT, 'ours: an empty key is INVALID_ARGUMENT');
  });

  await t.test('differ: a descriptor with no entries or an empty key', async (t) => {
    for (const [what, entries, ours] of [
      ['no entries', [], /descriptors\[0\]\.entries: must not be empty/],
      ['an empty key', [{ key: '', value: 'x' }], /descriptors\[0\]\.entries\[0\]\.key: must not be empty/],
    ] as const) {
      const a = await both({ domain: 'side', descriptors: [{ entries }] });
      t.equal(a.ref.status, 200, `reference: ${what} is 200`);
      t.same(JSON.parse(a.ref.body), { overallCode: 'OK', statuses: [{ code: 'OK' }] }, `reference: ${what}`);
      t.equal(a.ours.status, 400, `ours: ${what} is 400`);
      t.match(a.ours.body, ours, `ours: ${what} names the field`);
    }
  });

  await t.test('agree: /rlconfig lines carry shadow_mode and quota_mode', async (t) => {
    const lines = async (url: string) =>
      (await (await fetch(`${url}/rlconfig`)).text())
        .split('\n')
        .filter((l) => /^side\.(quota|hdr):/.test(l));
    const refLines = (await lines(ref.debugUrl)).sort();
    t.same(refLines, [
      'side.hdr: unit=HOUR requests_per_unit=15, shadow_mode: false, quota_mode: false',
      'side.quota: unit=HOUR requests_per_unit=1, shadow_mode: false, quota_mode: true',
    ]);
    t.same((await lines(ours.debugUrl)).sort(), refLines);
  });

  await t.test('differ: an exhausted quota-mode descriptor', async (t) => {
    const body = { domain: 'side', descriptors: [{ entries: [{ key: 'quota', value: 'q' }] }] };
    const first = await both(body);
    t.equal(first.ref.status, 200);
    t.equal(first.ours.status, 200);
    const second = await both(body);
    // The pin turns every exhausted quota descriptor into OK; upstream main since (and our rule)
    // answers OVER_LIMIT once every quota descriptor of the request is exhausted.
    t.equal(second.ref.status, 200, 'reference at the pin: quota mode never limits');
    t.same(JSON.parse(second.ref.body).statuses[0].code, 'OK');
    t.equal(second.ours.status, 429, 'ours: the only quota descriptor is exhausted, so OVER_LIMIT');
    t.same(JSON.parse(second.ours.body).statuses[0].code, 'OVER_LIMIT');
  });

  await t.test('differ: a refund (is_negative_hits: upstream main, after the pin)', async (t) => {
    // Expectation written from upstream main's behaviour, which the pinned binary predates: a
    // descriptor with is_negative_hits decrements its counter by its hits (floored at 0) on the same
    // key, and is answered OK. The pin does not know field 4 and counts the hits as consumption.
    const entries = (who: string) => [{ key: 'refund', value: who }];
    const request = (who: string, hits: number, isNegativeHits?: boolean): WireRateLimitRequest => ({
      domain: 'side',
      descriptors: [
        { entries: entries(who), hitsAddend: { value: hits }, ...(isNegativeHits ? { isNegativeHits } : {}) },
      ],
    });
    for (const [name, dial] of [
      ['reference', ref.dial],
      ['ours', ours.grpcAddress],
    ] as const) {
      const used = await grpcCall(dial, request(name, 4));
      t.equal(used.overallCode, 'OK', `${name}: 4 of 5 used`);
    }
    const refRefund = await grpcCall(ref.dial, request('reference', 3, true));
    t.equal(refRefund.overallCode, 'OVER_LIMIT', 'reference at the pin: the refund is 3 more hits, 7 of 5');
    const oursRefund = await grpcCall(ours.grpcAddress, request('ours', 3, true));
    t.equal(oursRefund.overallCode, 'OK', 'ours (upstream main): the refund is OK');
    t.equal(oursRefund.statuses[0]!.limitRemaining, 4, 'ours: 4 - 3 = 1 used, 4 remain');
    const rc = redis.client();
    const [refKey] = await rc.keys(`${refPrefix}side_refund_reference_*`);
    const [oursKey] = await rc.keys(`${oursPrefix}side_refund_ours_*`);
    t.equal(await rc.get(refKey!), '7', 'reference: the counter went up');
    t.equal(await rc.get(oursKey!), '1', 'ours: the same key form, decremented');
    t.equal(oursKey!.slice(oursPrefix.length).replace('ours', 'reference'), refKey!.slice(refPrefix.length));
    const clamp = await grpcCall(ours.grpcAddress, request('ours', 100, true));
    t.equal(clamp.statuses[0]!.limitRemaining, 5, 'ours: floored at 0, as upstream main');
    t.equal(await rc.get(oursKey!), '0');
  });

  await t.test('differ: /json when the cache is down', async (t) => {
    await redis.stop();
    const body = { domain: 'side', descriptors: [{ entries: [{ key: 'host', value: 'down' }] }] };
    let a: { ref: JsonAnswer; ours: JsonAnswer } | undefined;
    await eventually(
      async () => {
        a = await both(body);
        return a.ref.status !== 200 && a.ours.status !== 200;
      },
      30_000,
      'both services to fail with redis stopped',
    );
    t.equal(a!.ref.status, 400, 'reference: a cache failure is 400');
    t.equal(a!.ref.body, 'Bad Request\n');
    t.equal(a!.ours.status, 500, 'ours: a cache failure is 500, a server-side fault');
    const refGrpc = await grpcFailure(ref.dial, 'side', [{ key: 'host', value: 'down' }]);
    const oursGrpc = await grpcFailure(ours.grpcAddress, 'side', [{ key: 'host', value: 'down' }]);
    t.equal(refGrpc.code, GrpcStatus.UNKNOWN, 'reference: gRPC UNKNOWN');
    t.equal(oursGrpc.code, GrpcStatus.UNAVAILABLE, 'ours: gRPC UNAVAILABLE');
  });
});

const DUP = (rpu: number) =>
  `domain: dup\ndescriptors:\n  - key: k\n    rate_limit: { unit: hour, requests_per_unit: ${rpu} }\n`;

t.test('startup with an invalid initial config (two files, one domain, no merge)', async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const files = { 'a.yaml': DUP(1), 'b.yaml': DUP(2) };
  const ref = await startReference(t, files, { REDIS_SOCKET_TYPE: 'tcp', REDIS_URL: redis.url });
  // startReference returned: the reference's ports are open and /healthcheck says 200.
  const refCall = await grpcFailure(ref.dial, 'dup', [{ key: 'k', value: 'v' }]);
  t.equal(refCall.code, GrpcStatus.UNKNOWN, 'reference: healthy, but every call fails (UNKNOWN)');
  t.equal(refCall.details, 'no rate limit configuration loaded');
  const refJson = await postJson(ref.httpUrl, {
    domain: 'dup',
    descriptors: [{ entries: [{ key: 'k', value: 'v' }] }],
  });
  t.equal(refJson.status, 400, 'reference /json: 400 Bad Request');

  const root = mkdtempSync(join(tmpdir(), 'rl-ours-dup-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  mkdirSync(join(root, 'config'));
  for (const [name, yaml] of Object.entries(files)) writeFileSync(join(root, 'config', name), yaml);
  const base = {
    RUNTIME_ROOT: root,
    RUNTIME_APPDIRECTORY: 'config',
    RUNTIME_WATCH_ROOT: 'false',
    BACKEND_TYPE: 'memory',
    USE_STATSD: 'false',
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'fatal',
    HOST: '127.0.0.1',
    GRPC_HOST: '127.0.0.1',
    DEBUG_HOST: '127.0.0.1',
  };
  const startOurs = async (env: Record<string, string>) => {
    const [grpcPort, httpPort, debugPort] = [await freePort(), await freePort(), await freePort()];
    const settings = loadSettings({
      ...base,
      GRPC_PORT: String(grpcPort),
      PORT: String(httpPort),
      DEBUG_PORT: String(debugPort),
      ...env,
    });
    const app = new RateLimitApp({ settings, logger: createLogger({ level: settings.logLevel }) });
    const started = app.start();
    t.teardown(async () => {
      await started.catch(() => undefined);
      await app.close(2000);
    });
    return { app, started, grpcPort, httpPort };
  };

  await t.test('ours by default: ports stay closed until a valid config arrives', async (t) => {
    const o = await startOurs({});
    let done = false;
    void o.started.then(() => (done = true));
    await eventually(
      () => (o.app.stats.snapshot()['ratelimit.service.config_load_error'] ?? 0) >= 1,
      15_000,
      'our config load to fail',
    );
    t.notOk(done, 'start() still waits for the initial config');
    t.notOk(await tryConnect(o.httpPort), 'HTTP port closed');
    t.notOk(await tryConnect(o.grpcPort), 'gRPC port closed');
    rmSync(join(root, 'config', 'b.yaml'));
    await o.started;
    const r = await callOnce({
      dialString: `127.0.0.1:${o.grpcPort}`,
      domain: 'dup',
      descriptors: [[{ key: 'k', value: 'v' }]],
    });
    t.equal(r.statuses[0].currentLimit?.requestsPerUnit, 1, 'serves the config once it is valid');
    writeFileSync(join(root, 'config', 'b.yaml'), DUP(2));
  });

  await t.test('ours with FORCE_START_WITHOUT_INITIAL_CONFIG=true: as the reference', async (t) => {
    const o = await startOurs({ FORCE_START_WITHOUT_INITIAL_CONFIG: 'true' });
    await o.started;
    const health = await fetch(`http://127.0.0.1:${o.httpPort}/healthcheck`);
    t.equal(health.status, 200, 'healthy (HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED is off)');
    const json = await postJson(`http://127.0.0.1:${o.httpPort}`, {
      domain: 'dup',
      descriptors: [{ entries: [{ key: 'k', value: 'v' }] }],
    });
    t.equal(json.status, 500, 'ours /json: 500 (reference: 400 Bad Request)');
    t.match(json.body, /no rate limit configuration loaded/);
    const call = await grpcFailure(`127.0.0.1:${o.grpcPort}`, 'dup', [{ key: 'k', value: 'v' }]);
    t.equal(call.code, GrpcStatus.UNAVAILABLE, 'every call fails (UNAVAILABLE; reference: UNKNOWN)');
    t.equal(call.details, 'no rate limit configuration loaded', 'with the reference message');
  });
});
