// Secrets never leak: a service run with every secret setting set (Redis passwords and ACL user,
// sentinel passwords, TLS keys, xDS headers) is grepped in every output it has: all log lines at
// debug level, every debug path (profiles included), /stats, /rlconfig, /healthcheck, /metrics,
// /json and gRPC answers, errors included (a bad request, a Redis outage).
import t from 'tap';
import * as grpc from '@grpc/grpc-js';
import { readFileSync } from 'node:fs';
import { freePort } from '../harness/net.js';
import { startRedis } from '../harness/redis/index.js';
import { makeCerts } from '../harness/tls.js';
import { rateLimitServiceDefinition, type WireRateLimitRequest } from '../proto/index.js';
import { createLogger } from '../common/index.js';
import { loadSettings } from './settings/index.js';
import { startTestApp } from './test-support.js';

const CONFIG =
  'domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: minute, requests_per_unit: 5 }\n';

/** A distinctive slice of a PEM key's base64 body: what a leak of the key would contain. */
function keyMarker(path: string): string {
  const body = readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => l && !l.startsWith('-----'))
    .join('');
  return body.slice(20, 60);
}

t.test('no secret appears in logs, errors or any debug, stats or API response', async (t) => {
  const certs = await makeCerts(undefined, { clientName: 'envoy.test' });
  t.teardown(() => certs.remove());
  const secrets = {
    redisPass: 'main-S3CRET-pass-1',
    perSecondPass: 'ps-S3CRET-pass-2',
    sentinelPass: 'sentinel-S3CRET-3',
    perSecondSentinelPass: 'ps-sentinel-S3CRET-4',
    xdsHeader: 'Bearer-xds-S3CRET-5',
    serverKey: keyMarker(certs.keyPath),
    clientKey: keyMarker(certs.clientKeyPath),
  };
  const [main, perSecond] = await Promise.all([
    startRedis({ users: [{ name: 'rl', password: secrets.redisPass }] }),
    startRedis({ password: secrets.perSecondPass }),
  ]);
  t.teardown(() => Promise.all([main.stop(), perSecond.stop()]));
  const promPort = await freePort();
  const env = {
    BACKEND_TYPE: 'redis',
    REDIS_SOCKET_TYPE: 'tcp',
    REDIS_URL: main.url,
    REDIS_AUTH: `rl:${secrets.redisPass}`,
    REDIS_SENTINEL_AUTH: secrets.sentinelPass,
    REDIS_TIMEOUT: '500ms',
    REDIS_PERSECOND: 'true',
    REDIS_PERSECOND_SOCKET_TYPE: 'tcp',
    REDIS_PERSECOND_URL: perSecond.url,
    REDIS_PERSECOND_AUTH: secrets.perSecondPass,
    REDIS_PERSECOND_SENTINEL_AUTH: secrets.perSecondSentinelPass,
    REDIS_PERSECOND_TIMEOUT: '500ms',
    REDIS_TLS_CLIENT_KEY: certs.clientKeyPath,
    MEMCACHE_TLS_CLIENT_KEY: certs.clientKeyPath,
    CONFIG_GRPC_XDS_CLIENT_TLS_KEY: certs.clientKeyPath,
    CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS: `authorization:${secrets.xdsHeader}`,
    GRPC_SERVER_USE_TLS: 'true',
    GRPC_SERVER_TLS_CERT: certs.certPath,
    GRPC_SERVER_TLS_KEY: certs.keyPath,
    GRPC_CLIENT_TLS_CACERT: certs.caPath,
    USE_PROMETHEUS: 'true',
    PROMETHEUS_ADDR: `127.0.0.1:${promPort}`,
    LOG_LEVEL: 'debug',
    LOG_FORMAT: 'json',
  };
  const outputs: string[] = [];
  const logger = createLogger({ level: 'debug', format: 'json' }, { write: (s: string) => outputs.push(s) });
  const svc = await startTestApp({ files: { 'd.yaml': CONFIG }, env, appOptions: { logger } });
  t.teardown(() => svc.close());
  t.equal(loadSettings({ ...env, RUNTIME_ROOT: '/x' }).redis.main.auth, `rl:${secrets.redisPass}`, 'set');

  const pem = certs.pem();
  const Client = grpc.makeGenericClientConstructor(rateLimitServiceDefinition(), 'RateLimitService');
  const client = new Client(
    `localhost:${svc.app.grpc!.port}`,
    grpc.credentials.createSsl(pem.ca, pem.clientKey, pem.clientCert),
  ) as unknown as grpc.Client & {
    ShouldRateLimit(
      req: WireRateLimitRequest,
      cb: (err: grpc.ServiceError | null, res?: unknown) => void,
    ): void;
  };
  t.teardown(() => client.close());
  const call = (req: WireRateLimitRequest) =>
    new Promise<string>((resolve) =>
      client.ShouldRateLimit(req, (err, res) =>
        resolve(err ? `${err.code} ${err.details}` : JSON.stringify(res)),
      ),
    );
  const get = async (url: string) => {
    const r = await fetch(url);
    const headers: string[] = [];
    r.headers.forEach((v, k) => headers.push(`${k}: ${v}`));
    return `${r.status} ${headers.join('\n')} ${await r.text()}`;
  };
  const ok = { domain: 'd', descriptors: [{ entries: [{ key: 'k', value: 'v' }] }] };
  outputs.push(await call(ok));
  t.match(outputs.at(-1), /OK/, 'a decision over mTLS with both Redis instances');
  outputs.push(await call({ domain: '', descriptors: [] }));
  outputs.push((await svc.postJson(ok)).body);
  outputs.push((await svc.postJson('{"domain": ')).body);
  outputs.push((await svc.postJson({ domain: 'd', descriptors: [{ entries: [{ key: 'k' }] }] })).body);
  for (const p of [
    '/',
    '/rlconfig',
    '/stats',
    '/debug/pprof/',
    '/debug/pprof/heap',
    '/debug/pprof/profile?seconds=0.1',
  ]) {
    outputs.push(await get(`${svc.debugUrl}${p}`));
  }
  outputs.push(await get(`${svc.httpUrl}/healthcheck`));
  outputs.push(await get(`http://127.0.0.1:${promPort}/metrics`));
  // An outage: errors to the caller and in the log.
  await main.stop();
  outputs.push(await call(ok));
  t.match(outputs.at(-1), /^14 /, 'UNAVAILABLE while Redis is down');
  outputs.push((await svc.postJson(ok)).body);
  outputs.push(await get(`${svc.debugUrl}/stats`));

  const all = outputs.join('\n');
  t.ok(all.length > 1000, `${all.length} characters of output checked`);
  for (const [name, secret] of Object.entries(secrets))
    t.notOk(all.includes(secret), `${name} not in any output`);
});
