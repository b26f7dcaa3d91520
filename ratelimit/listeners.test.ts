// Listener and protocol details: gRPC on a unix socket (GRPC_UDS), grpc.health.v1 following the
// health components, dynamic metadata, and the local over-limit cache's memory bound.
import t from 'tap';
import * as grpc from '@grpc/grpc-js';
import { service as healthService } from 'grpc-health-check';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { rateLimitServiceDefinition } from '../proto/index.js';
import type { WireRateLimitRequest, WireRateLimitResponse } from '../proto/index.js';
import { LocalOverLimitCache } from './limiter/index.js';
import { fromStruct } from './service/index.js';
import { descriptor, startTestApp } from './test-support.js';

const CONFIG = `
domain: l
descriptors:
  - key: k
    rate_limit: { unit: minute, requests_per_unit: 5 }
`;

type Unary<Req, Res> = (req: Req, cb: (err: grpc.ServiceError | null, res?: Res) => void) => void;

t.test('GRPC_UDS serves ShouldRateLimit on a unix socket', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'rl-uds-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const sock = join(dir, 'rl.sock');
  const svc = await startTestApp({ files: { 'l.yaml': CONFIG }, env: { GRPC_UDS: sock } });
  t.teardown(() => svc.close());
  const Client = grpc.makeGenericClientConstructor(rateLimitServiceDefinition(), 'RateLimitService');
  const client = new Client(`unix:${sock}`, grpc.credentials.createInsecure()) as unknown as grpc.Client & {
    ShouldRateLimit: Unary<WireRateLimitRequest, WireRateLimitResponse>;
  };
  t.teardown(() => client.close());
  const r = await new Promise<WireRateLimitResponse>((resolve, reject) =>
    client.ShouldRateLimit({ domain: 'l', descriptors: [descriptor(['k', 'v'])] }, (e, res) =>
      e ? reject(e) : resolve(res!),
    ),
  );
  t.equal(r.statuses[0].limitRemaining, 4);
});

t.test('grpc.health.v1.Health is SERVING, and NOT_SERVING once shutdown starts', async (t) => {
  const svc = await startTestApp({ files: { 'l.yaml': CONFIG } });
  const Health = grpc.makeGenericClientConstructor(healthService as grpc.ServiceDefinition, 'Health');
  const client = new Health(svc.grpcAddress, grpc.credentials.createInsecure()) as unknown as grpc.Client & {
    Check: Unary<{ service: string }, { status: string }>;
  };
  t.teardown(() => client.close());
  const check = (service: string) =>
    new Promise<string>((resolve, reject) =>
      client.Check({ service }, (e, res) => (e ? reject(e) : resolve(res!.status))),
    );
  t.equal(await check(''), 'SERVING');
  t.equal(await check('envoy.service.ratelimit.v3.RateLimitService'), 'SERVING');
  svc.app.health.fail('sigterm');
  t.equal(await check(''), 'NOT_SERVING', 'follows the health components');
  const http = await fetch(`${svc.httpUrl}/healthcheck`);
  t.equal(http.status, 500);
  t.match(await http.text(), 'sigterm');
  await svc.close();
});

t.test(
  'RESPONSE_DYNAMIC_METADATA returns the domain, descriptors and the passed rules metadata',
  async (t) => {
    const svc = await startTestApp({
      files: {
        'm.yaml': `
domain: m
descriptors:
  - key: k
    metadata: { team: payments, tier: 2 }
    rate_limit: { unit: minute, requests_per_unit: 5 }
`,
      },
      env: { RESPONSE_DYNAMIC_METADATA: 'true' },
    });
    t.teardown(() => svc.close());
    const r = await svc.call({ domain: 'm', hitsAddend: 2, descriptors: [descriptor(['k', 'v'])] });
    const md = fromStruct(r.dynamicMetadata as never);
    t.equal(md.domain, 'm');
    t.same(md.descriptors, [{ entries: ['k=v'] }]);
    t.equal(md.hitsAddend, 2);
    t.same(md.metadata, { team: 'payments', tier: 2 });
  },
);

t.test('the local over-limit cache stays within its byte budget and expires entries', async (t) => {
  let now = 1_000_000;
  const cache = new LocalOverLimitCache(10_000, () => now);
  for (let i = 0; i < 10_000; i++) cache.set(`domain_key_value${i}_1700000000`, 60);
  t.ok(cache.approximateBytes <= 10_000, `bytes ${cache.approximateBytes} within budget`);
  t.ok(cache.size > 0 && cache.size < 10_000, `oldest evicted (${cache.size} kept)`);
  t.ok(cache.has('domain_key_value9999_1700000000'), 'the newest is kept');
  t.notOk(cache.has('domain_key_value0_1700000000'), 'the oldest was evicted');
  now += 61_000;
  t.notOk(cache.has('domain_key_value9999_1700000000'), 'expired after its window');
});
