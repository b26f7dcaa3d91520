// The gRPC listener (our gRPC server, h2grpc/, on the HTTP/2 layer of our own) against two client
// implementations, grpc-js and grpc-go (the reference's client_cmd): protocol errors, message compression, size limits, TLS and
// mutual TLS with the SAN check, max connection age, health Watch, and what a raw HTTP/2 client sees.
import t from 'tap';
import http2 from 'node:http2';
import { gzipSync } from 'node:zlib';
import * as grpc from '@grpc/grpc-js';
import { service as healthService } from 'grpc-health-check';
import { makeCerts } from '../../harness/tls.js';
import { resolveReferenceRatelimitClient } from '../../harness/kube.js';
import { runCommand } from '../../harness/proc.js';
import { rateLimitServiceDefinition } from '../../proto/index.js';
import type { WireRateLimitRequest, WireRateLimitResponse } from '../../proto/index.js';
import { descriptor, eventually, roomInWindow, startTestApp } from '../test-support.js';
import { decodeHealthRequest, encodeHealthResponse } from './grpc-server.js';
import { percentEncode } from '../../h2grpc/index.js';

const CONFIG = `
domain: g
descriptors:
  - key: k
    rate_limit: { unit: minute, requests_per_unit: 2 }
`;

t.beforeEach(() => roomInWindow());

type Unary = (
  req: WireRateLimitRequest,
  md: grpc.Metadata,
  opts: grpc.CallOptions,
  cb: (err: grpc.ServiceError | null, res?: WireRateLimitResponse) => void,
) => void;

function rlsClient(address: string, creds: grpc.ChannelCredentials, options: grpc.ChannelOptions = {}) {
  const Ctor = grpc.makeGenericClientConstructor(rateLimitServiceDefinition(), 'RateLimitService');
  const client = new Ctor(address, creds, options) as unknown as grpc.Client & { ShouldRateLimit: Unary };
  const call = (req: WireRateLimitRequest, md = new grpc.Metadata()) =>
    new Promise<WireRateLimitResponse>((resolve, reject) =>
      client.ShouldRateLimit(req, md, { deadline: Date.now() + 5000 }, (e, r) =>
        e ? reject(e) : resolve(r!),
      ),
    );
  return { client, call };
}

const req = (value: string): WireRateLimitRequest => ({
  domain: 'g',
  descriptors: [descriptor(['k', value])],
});

/** One raw HTTP/2 request: status, headers and trailers as a peer sees them. */
async function rawCall(
  address: string,
  headers: http2.OutgoingHttpHeaders,
  body: Buffer,
): Promise<{ headers: http2.IncomingHttpHeaders; trailers: http2.IncomingHttpHeaders; data: Buffer }> {
  const session = http2.connect(`http://${address}`);
  try {
    return await new Promise((resolve, reject) => {
      const stream = session.request(headers);
      let h: http2.IncomingHttpHeaders = {};
      let tr: http2.IncomingHttpHeaders = {};
      const chunks: Buffer[] = [];
      stream.on('response', (x) => (h = x));
      stream.on('trailers', (x) => (tr = x));
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => resolve({ headers: h, trailers: tr, data: Buffer.concat(chunks) }));
      stream.on('error', reject);
      // node:http2 ends GET requests at once (endStream defaults to true for them).
      if (headers[':method'] !== 'GET') stream.end(body);
    });
  } finally {
    session.close();
  }
}

function grpcFrame(msg: Uint8Array, compressed = false): Buffer {
  const b = Buffer.alloc(5 + msg.length);
  b[0] = compressed ? 1 : 0;
  b.writeUInt32BE(msg.length, 1);
  Buffer.from(msg).copy(b, 5);
  return b;
}

const PATH = '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit';
const encodeReq = (r: WireRateLimitRequest) =>
  rateLimitServiceDefinition().ShouldRateLimit.requestSerialize(r) as Buffer;

t.test('protocol: unknown method, wrong verb or content type, bad frames, gzip and deflate', async (t) => {
  const svc = await startTestApp({ files: { 'g.yaml': CONFIG } });
  t.teardown(() => svc.close());
  const grpcHeaders = { ':method': 'POST', 'content-type': 'application/grpc', te: 'trailers' };

  const unknown = await rawCall(
    svc.grpcAddress,
    { ...grpcHeaders, ':path': '/x.Y/Z' },
    grpcFrame(Buffer.alloc(0)),
  );
  t.equal(unknown.headers['grpc-status'], '12', 'UNIMPLEMENTED, trailers-only');
  t.match(unknown.headers['grpc-message'], /unknown method \/x\.Y\/Z/);

  const get = await rawCall(svc.grpcAddress, { ':method': 'GET', ':path': PATH }, Buffer.alloc(0));
  t.equal(get.headers[':status'], 405);
  const json = await rawCall(
    svc.grpcAddress,
    { ':method': 'POST', ':path': PATH, 'content-type': 'application/json' },
    Buffer.from('{}'),
  );
  t.equal(json.headers[':status'], 415);

  const truncated = await rawCall(
    svc.grpcAddress,
    { ...grpcHeaders, ':path': PATH },
    Buffer.from([0, 0, 0, 0, 9, 1]),
  );
  t.equal(truncated.headers['grpc-status'], '13');
  t.match(truncated.headers['grpc-message'], /truncated message/);

  const garbage = await rawCall(
    svc.grpcAddress,
    { ...grpcHeaders, ':path': PATH },
    grpcFrame(Buffer.from([0xff, 0xff, 0xff])),
  );
  t.equal(garbage.headers['grpc-status'], '13');
  t.match(garbage.headers['grpc-message'], /error parsing request/);

  const unsupported = await rawCall(
    svc.grpcAddress,
    { ...grpcHeaders, ':path': PATH, 'grpc-encoding': 'snappy' },
    grpcFrame(encodeReq(req('x'))),
  );
  t.equal(unsupported.headers['grpc-status'], '12');
  t.equal(unsupported.headers['grpc-accept-encoding'], 'identity,gzip,deflate');

  const gz = await rawCall(
    svc.grpcAddress,
    { ...grpcHeaders, ':path': PATH, 'grpc-encoding': 'gzip' },
    grpcFrame(gzipSync(encodeReq(req('gz'))), true),
  );
  t.equal(gz.trailers['grpc-status'], '0', 'a gzip-compressed request is answered');
  t.equal(gz.headers['content-type'], 'application/grpc');
  const res = rateLimitServiceDefinition().ShouldRateLimit.responseDeserialize(gz.data.subarray(5)) as
    WireRateLimitResponse | undefined;
  t.equal(res?.overallCode, 'OK');
  t.equal(res?.statuses[0].limitRemaining, 1);

  // grpc-js compressing every message (gzip, then deflate) reaches the same counter.
  for (const algorithm of [2, 1]) {
    const c = rlsClient(svc.grpcAddress, grpc.credentials.createInsecure(), {
      'grpc.default_compression_algorithm': algorithm,
    });
    const r = await c.call(req(`alg${algorithm}`));
    t.equal(r.statuses[0].limitRemaining, 1, `compression algorithm ${algorithm}`);
    c.client.close();
  }
});

t.test('GRPC_MAX_RECV_MSG_SIZE: a larger request is RESOURCE_EXHAUSTED, the process serves on', async (t) => {
  const svc = await startTestApp({ files: { 'g.yaml': CONFIG }, env: { GRPC_MAX_RECV_MSG_SIZE: '1024' } });
  t.teardown(() => svc.close());
  const err = await svc.call(req('x'.repeat(2000))).catch((e: grpc.ServiceError) => e);
  t.equal((err as grpc.ServiceError).code, grpc.status.RESOURCE_EXHAUSTED);
  t.match((err as grpc.ServiceError).details, /larger than max.*GRPC_MAX_RECV_MSG_SIZE/);
  t.equal((await svc.call(req('small'))).overallCode, 'OK');
});

t.test('grpc-message is percent-encoded; health request and response codecs', async (t) => {
  t.equal(percentEncode('plain text: ok'), 'plain text: ok');
  t.equal(percentEncode('100% ünïcode\n'), '100%25 %C3%BCn%C3%AFcode%0A');
  t.equal(decodeHealthRequest(Buffer.from([0x0a, 0x03, 0x61, 0x62, 0x63])), 'abc');
  t.equal(decodeHealthRequest(Buffer.alloc(0)), '');
  t.equal(decodeHealthRequest(Buffer.from([0x10, 0x05, 0x0a, 0x01, 0x7a])), 'z', 'unknown fields skipped');
  t.throws(() => decodeHealthRequest(Buffer.from([0x0a, 0x05, 0x61])), /truncated/);
  t.same([...encodeHealthResponse(2)], [0x08, 0x02]);
});

t.test('a service error reaches both clients with its code and message', async (t) => {
  const svc = await startTestApp({ files: { 'g.yaml': CONFIG } });
  t.teardown(() => svc.close());
  const err = (await svc.call({ domain: '', descriptors: [] }).catch((e) => e)) as grpc.ServiceError;
  t.equal(err.code, grpc.status.INVALID_ARGUMENT);
  t.match(err.details, /domain/);
});

for (const http2Server of ['builtin', 'node'] as const) {
  t.test(
    `GRPC_HTTP2_SERVER=${http2Server}: grpc-go (the reference client_cmd) gets the same decisions as grpc-js`,
    async (t) => {
      let clientCmd: string;
      try {
        clientCmd = resolveReferenceRatelimitClient();
      } catch (err) {
        t.fail(`client_cmd not built (bash scripts/build-go-tools.sh): ${(err as Error).message}`);
        return;
      }
      const svc = await startTestApp({
        files: { 'g.yaml': CONFIG },
        env: { GRPC_HTTP2_SERVER: http2Server },
      });
      t.teardown(() => svc.close());
      // The listener under the gRPC server is the one asked for.
      const inner = (svc.app.grpc as unknown as { server: { server: object } }).server.server;
      t.equal(
        inner.constructor.name,
        http2Server === 'node' ? 'Http2Server' : 'Server',
        'the HTTP/2 layer asked for',
      );
      const outputs: string[] = [];
      for (let i = 0; i < 3; i++) {
        const r = await runCommand(clientCmd, [
          '-dial_string',
          svc.grpcAddress,
          '-domain',
          'g',
          '-descriptors',
          'k=go',
        ]);
        t.equal(r.code, 0, r.stderr);
        outputs.push(r.stdout);
      }
      t.match(outputs[0], /overall_code:\s*OK/);
      t.match(outputs[0], /limit_remaining:\s*1/);
      t.match(outputs[2], /overall_code:\s*OVER_LIMIT/);
      const mine = await svc.call(req('go'));
      t.equal(mine.overallCode, 'OVER_LIMIT', 'grpc-js sees the hits grpc-go made');
    },
  );
}

t.test('TLS and mutual TLS: certificates checked, GRPC_CLIENT_TLS_SAN enforced, grpc-go too', async (t) => {
  const certs = await makeCerts(undefined, { clientName: 'envoy.test' });
  t.teardown(() => certs.remove());
  const pem = certs.pem();
  const tlsEnv = {
    GRPC_SERVER_USE_TLS: 'true',
    GRPC_SERVER_TLS_CERT: certs.certPath,
    GRPC_SERVER_TLS_KEY: certs.keyPath,
  };

  const tlsOnly = await startTestApp({ files: { 'g.yaml': CONFIG }, env: tlsEnv });
  t.teardown(() => tlsOnly.close());
  const addr = `localhost:${tlsOnly.app.grpc!.port}`;
  const good = rlsClient(addr, grpc.credentials.createSsl(pem.ca));
  t.equal((await good.call(req('tls'))).overallCode, 'OK', 'TLS with the right CA');
  good.client.close();
  const plain = rlsClient(addr, grpc.credentials.createInsecure());
  const plainErr = (await plain.call(req('tls')).catch((e) => e)) as grpc.ServiceError;
  t.equal(plainErr.code, grpc.status.UNAVAILABLE, 'a plaintext client is not served');
  plain.client.close();

  const mtls = await startTestApp({
    files: { 'g.yaml': CONFIG },
    env: { ...tlsEnv, GRPC_CLIENT_TLS_CACERT: certs.caPath, GRPC_CLIENT_TLS_SAN: 'envoy.test' },
  });
  t.teardown(() => mtls.close());
  const mAddr = `localhost:${mtls.app.grpc!.port}`;
  const noCert = rlsClient(mAddr, grpc.credentials.createSsl(pem.ca));
  const noCertErr = (await noCert.call(req('m')).catch((e) => e)) as grpc.ServiceError;
  t.equal(noCertErr.code, grpc.status.UNAVAILABLE, 'no client certificate: handshake refused');
  noCert.client.close();
  const withCert = rlsClient(mAddr, grpc.credentials.createSsl(pem.ca, pem.clientKey, pem.clientCert));
  t.equal((await withCert.call(req('m'))).overallCode, 'OK', 'client certificate with the SAN');
  withCert.client.close();

  const otherSan = await startTestApp({
    files: { 'g.yaml': CONFIG },
    env: { ...tlsEnv, GRPC_CLIENT_TLS_CACERT: certs.caPath, GRPC_CLIENT_TLS_SAN: 'someone-else.test' },
  });
  t.teardown(() => otherSan.close());
  const wrong = rlsClient(
    `localhost:${otherSan.app.grpc!.port}`,
    grpc.credentials.createSsl(pem.ca, pem.clientKey, pem.clientCert),
  );
  const sanErr = (await wrong.call(req('m')).catch((e) => e)) as grpc.ServiceError;
  t.equal(sanErr.code, grpc.status.UNAUTHENTICATED);
  t.match(sanErr.details, /no SAN DNS:someone-else\.test/);
  wrong.client.close();

  let clientCmd: string | undefined;
  try {
    clientCmd = resolveReferenceRatelimitClient();
  } catch {
    t.fail('client_cmd not built (bash scripts/build-go-tools.sh)');
  }
  if (clientCmd) {
    const r = await runCommand(clientCmd, [
      '-dial_string',
      mAddr,
      '-grpc-use-tls',
      '-grpc-server-ca-file',
      certs.caPath,
      '-grpc-cert-file',
      certs.clientCertPath,
      '-grpc-key-file',
      certs.clientKeyPath,
      '-domain',
      'g',
      '-descriptors',
      'k=m',
    ]);
    t.equal(r.code, 0, r.stderr);
    t.match(r.stdout, /overall_code:\s*OK/, 'grpc-go over mutual TLS: the second hit of 2/minute is OK');
    const again = rlsClient(mAddr, grpc.credentials.createSsl(pem.ca, pem.clientKey, pem.clientCert));
    t.equal((await again.call(req('m'))).overallCode, 'OVER_LIMIT', 'and counted: the third is over');
    again.client.close();
  }
});

t.test('GRPC_MAX_CONNECTION_AGE: connections get GOAWAY and clients carry on over new ones', async (t) => {
  const svc = await startTestApp({
    files: { 'g.yaml': CONFIG },
    env: { GRPC_MAX_CONNECTION_AGE: '300ms', GRPC_MAX_CONNECTION_AGE_GRACE: '1s' },
  });
  t.teardown(() => svc.close());
  const session = http2.connect(`http://${svc.grpcAddress}`);
  session.on('error', () => {});
  const opened = Date.now();
  const goaway = await new Promise<number>((resolve) =>
    session.once('goaway', () => resolve(Date.now() - opened)),
  );
  t.ok(goaway >= 250 && goaway < 3000, `GOAWAY after ${goaway} ms (300 ms +/- 10% jitter)`);
  await eventually(() => session.closed || session.destroyed, 5000, 'the aged connection to close');

  // grpc-js follows GOAWAY: calls spread over several connection lifetimes all succeed.
  const c = rlsClient(svc.grpcAddress, grpc.credentials.createInsecure());
  t.teardown(() => c.client.close());
  const until = Date.now() + 1200;
  let calls = 0;
  for (let i = 0; Date.now() < until; i++) {
    await c.call(req(`age${i}`));
    calls++;
    await new Promise((r) => setTimeout(r, 20));
  }
  t.ok(calls > 10, `${calls} calls across several connection lifetimes, none failed`);
});

t.test('grpc.health.v1 Watch streams changes, unknown services, and ends at shutdown', async (t) => {
  const svc = await startTestApp({ files: { 'g.yaml': CONFIG } });
  const Health = grpc.makeGenericClientConstructor(healthService as grpc.ServiceDefinition, 'Health');
  const client = new Health(svc.grpcAddress, grpc.credentials.createInsecure()) as unknown as grpc.Client & {
    Watch(req: { service: string }): grpc.ClientReadableStream<{ status: string }>;
    Check(req: { service: string }, cb: (e: grpc.ServiceError | null, r?: { status: string }) => void): void;
  };
  t.teardown(() => client.close());
  const seen: string[] = [];
  const watch = client.Watch({ service: '' });
  watch.on('data', (m: { status: string }) => seen.push(m.status));
  const ended = new Promise<grpc.StatusObject>((resolve) => watch.on('status', resolve));
  watch.on('error', () => {});
  await eventually(() => seen.length === 1, 5000, 'the first Watch message');
  t.same(seen, ['SERVING']);

  const unknownSeen: string[] = [];
  const unknown = client.Watch({ service: 'no.such.Service' });
  unknown.on('data', (m: { status: string }) => unknownSeen.push(m.status));
  unknown.on('error', () => {});
  await eventually(() => unknownSeen.length === 1, 5000, 'the unknown service answer');
  t.same(unknownSeen, ['SERVICE_UNKNOWN'], 'Watch of an unknown service: SERVICE_UNKNOWN, stream open');
  const checkErr = await new Promise<grpc.ServiceError | null>((resolve) =>
    client.Check({ service: 'no.such.Service' }, (e) => resolve(e)),
  );
  t.equal(checkErr?.code, grpc.status.NOT_FOUND, 'Check of an unknown service: NOT_FOUND');

  svc.app.health.fail('sigterm');
  await eventually(() => seen.length === 2, 5000, 'the NOT_SERVING update');
  t.same(seen, ['SERVING', 'NOT_SERVING']);
  await svc.close();
  const status = await ended;
  t.equal(status.code, grpc.status.UNAVAILABLE, 'the Watch stream ends when the server shuts down');
  unknown.cancel();
});
