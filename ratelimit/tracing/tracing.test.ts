// Tracing end to end: the service exports spans over OTLP to a small receiver in the test (HTTP
// with protobuf bodies, and gRPC), which decodes them; the trace context comes from the gRPC
// metadata of the call. Endpoints and headers use the standard OTEL_EXPORTER_OTLP_* variables.
import * as grpc from '@grpc/grpc-js';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import protobuf from 'protobufjs';
import t from 'tap';
import { rateLimitServiceDefinition } from '../../proto/index.js';
import type { WireRateLimitRequest, WireRateLimitResponse } from '../../proto/index.js';
import { descriptor, startTestApp } from '../test-support.js';
import { EXECUTION_SPAN_NAME, SERVER_SPAN_NAME } from './names.js';

// The part of the OTLP trace protocol the receiver needs (field numbers from opentelemetry-proto).
const OTLP = protobuf.parse(`
syntax = "proto3";
package opentelemetry.proto.collector.trace.v1;
message ExportTraceServiceRequest { repeated ResourceSpans resource_spans = 1; }
message ExportTraceServiceResponse {}
message ResourceSpans { Resource resource = 1; repeated ScopeSpans scope_spans = 2; }
message Resource { repeated KeyValue attributes = 1; }
message ScopeSpans { Scope scope = 1; repeated Span spans = 2; }
message Scope { string name = 1; string version = 2; }
message Span {
  bytes trace_id = 1; bytes span_id = 2; string trace_state = 3; bytes parent_span_id = 4;
  string name = 5; int32 kind = 6; fixed64 start_time_unix_nano = 7; fixed64 end_time_unix_nano = 8;
  repeated KeyValue attributes = 9; Status status = 15;
}
message Status { string message = 2; int32 code = 3; }
message KeyValue { string key = 1; AnyValue value = 2; }
message AnyValue {
  oneof value { string string_value = 1; bool bool_value = 2; int64 int_value = 3; double double_value = 4; }
}
`).root;
const Req = OTLP.lookupType('opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest');
const Resp = OTLP.lookupType('opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse');

interface DecodedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  attributes: Record<string, string | number | boolean>;
  resource: Record<string, string | number | boolean>;
  statusCode: number;
}

function attrs(
  kvs: { key: string; value?: Record<string, unknown> }[] = [],
): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const kv of kvs) {
    const v = kv.value ?? {};
    const x = v.stringValue ?? v.boolValue ?? v.intValue ?? v.doubleValue;
    out[kv.key] = typeof x === 'object' && x !== null ? Number(x) : (x as string | number | boolean);
  }
  return out;
}

function decode(body: Uint8Array): DecodedSpan[] {
  const msg = Req.toObject(Req.decode(body), { longs: Number, bytes: Buffer }) as {
    resourceSpans?: {
      resource?: { attributes?: [] };
      scopeSpans?: { spans?: Record<string, never>[] }[];
    }[];
  };
  const out: DecodedSpan[] = [];
  for (const rs of msg.resourceSpans ?? []) {
    const resource = attrs(rs.resource?.attributes);
    for (const ss of rs.scopeSpans ?? [])
      for (const s of ss.spans ?? []) {
        const sp = s as unknown as {
          traceId: Buffer;
          spanId: Buffer;
          parentSpanId?: Buffer;
          name: string;
          kind?: number;
          attributes?: [];
          status?: { code?: number };
        };
        out.push({
          traceId: sp.traceId.toString('hex'),
          spanId: sp.spanId.toString('hex'),
          parentSpanId: sp.parentSpanId?.toString('hex') ?? '',
          name: sp.name,
          kind: sp.kind ?? 0,
          attributes: attrs(sp.attributes),
          resource,
          statusCode: sp.status?.code ?? 0,
        });
      }
  }
  return out;
}

interface Receiver {
  url: string;
  spans: DecodedSpan[];
  headers: Record<string, string | string[] | undefined>[];
  close(): Promise<void>;
}

async function httpReceiver(): Promise<Receiver> {
  const spans: DecodedSpan[] = [];
  const headers: Receiver['headers'] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/traces') {
        res.writeHead(404).end();
        return;
      }
      headers.push(req.headers);
      spans.push(...decode(Buffer.concat(chunks)));
      res
        .writeHead(200, { 'content-type': 'application/x-protobuf' })
        .end(Buffer.from(Resp.encode({}).finish()));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    headers,
    close: () => new Promise((r) => server.close(() => r())),
  };
}

async function grpcReceiver(): Promise<Receiver> {
  const spans: DecodedSpan[] = [];
  const headers: Receiver['headers'] = [];
  const server = new grpc.Server();
  server.addService(
    {
      Export: {
        path: '/opentelemetry.proto.collector.trace.v1.TraceService/Export',
        requestStream: false,
        responseStream: false,
        requestSerialize: (x: Buffer) => x,
        requestDeserialize: (b: Buffer) => b,
        responseSerialize: () => Buffer.from(Resp.encode({}).finish()),
        responseDeserialize: (b: Buffer) => b,
      },
    },
    {
      Export: (call: grpc.ServerUnaryCall<Buffer, unknown>, cb: grpc.sendUnaryData<unknown>) => {
        headers.push(call.metadata.getMap() as Record<string, string>);
        spans.push(...decode(call.request));
        cb(null, {});
      },
    },
  );
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) =>
      e ? reject(e) : resolve(p),
    ),
  );
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    headers,
    close: () => new Promise((r) => server.tryShutdown(() => r())),
  };
}

type RlsClient = grpc.Client & {
  ShouldRateLimit(
    req: WireRateLimitRequest,
    md: grpc.Metadata,
    cb: (err: grpc.ServiceError | null, res?: WireRateLimitResponse) => void,
  ): void;
};

function callWith(address: string, req: WireRateLimitRequest, md: Record<string, string>): Promise<unknown> {
  const Client = grpc.makeGenericClientConstructor(rateLimitServiceDefinition(), 'RateLimitService');
  const client = new Client(address, grpc.credentials.createInsecure()) as unknown as RlsClient;
  const metadata = new grpc.Metadata();
  for (const [k, v] of Object.entries(md)) metadata.set(k, v);
  return new Promise((resolve) =>
    client.ShouldRateLimit(req, metadata, (err, res) => {
      client.close();
      resolve(err ?? res);
    }),
  );
}

const CONFIG = `
domain: d
descriptors:
  - key: k
    rate_limit: { unit: minute, requests_per_unit: 10 }
`;
const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT_ID = '00f067aa0ba902b7';
const OTEL_VARS = [
  'OTEL_EXPORTER_OTLP_ENDPOINT',
  'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT',
  'OTEL_EXPORTER_OTLP_HEADERS',
];

t.afterEach(() => {
  for (const v of OTEL_VARS) delete process.env[v];
});

t.test(
  'OTLP over http: a server span from the caller context, the execution span, the cache call',
  async (t) => {
    const rx = await httpReceiver();
    t.teardown(() => rx.close());
    process.env.OTEL_EXPORTER_OTLP_ENDPOINT = rx.url;
    process.env.OTEL_EXPORTER_OTLP_HEADERS = 'x-tenant=blue';
    const svc = await startTestApp({
      files: { 'd.yaml': CONFIG },
      env: {
        TRACING_ENABLED: 'true',
        TRACING_EXPORTER_PROTOCOL: 'http',
        TRACING_SERVICE_NAME: 'rl-test',
        TRACING_SERVICE_NAMESPACE: 'ns',
        TRACING_SERVICE_INSTANCE_ID: 'inst-1',
      },
    });
    await callWith(
      svc.grpcAddress,
      { domain: 'd', descriptors: [descriptor(['k', 'v'])] },
      { traceparent: `00-${TRACE_ID}-${PARENT_ID}-01`, baggage: 'user=alice' },
    );
    await callWith(svc.grpcAddress, { domain: '', descriptors: [descriptor(['k', 'v'])] }, {});
    // Concurrent calls: every cache span under the execution span of its own trace.
    const traces = Array.from({ length: 8 }, (_, i) => (i + 1).toString(16).padStart(32, 'a'));
    await Promise.all(
      traces.map((id) =>
        callWith(
          svc.grpcAddress,
          { domain: 'd', descriptors: [descriptor(['k', id])] },
          { traceparent: `00-${id}-${PARENT_ID}-01` },
        ),
      ),
    );
    await svc.close(); // flushes the batch processor
    for (const id of traces) {
      const spans = rx.spans.filter((s) => s.traceId === id);
      const exec = spans.find((s) => s.name === EXECUTION_SPAN_NAME);
      const cache = spans.find((s) => s.name === 'Memory Store Execution');
      t.ok(
        exec && cache && cache.parentSpanId === exec.spanId,
        `trace ${id}: cache span under its own execution span`,
      );
    }

    t.equal(rx.headers[0]['x-tenant'], 'blue', 'OTEL_EXPORTER_OTLP_HEADERS is honoured');
    t.match(rx.headers[0]['content-type'], /application\/x-protobuf/);
    const inTrace = rx.spans.filter((s) => s.traceId === TRACE_ID);
    const server = inTrace.find((s) => s.name === SERVER_SPAN_NAME)!;
    const exec = inTrace.find((s) => s.name === EXECUTION_SPAN_NAME)!;
    const cache = inTrace.find((s) => s.name === 'Memory Store Execution')!;
    t.ok(server && exec && cache, 'three spans in the caller trace');
    t.equal(server.parentSpanId, PARENT_ID, 'the server span continues the caller span from traceparent');
    t.equal(server.kind, 2, 'SPAN_KIND_SERVER');
    t.match(server.attributes, {
      'rpc.system': 'grpc',
      'rpc.method': 'ShouldRateLimit',
      'rpc.grpc.status_code': 0,
    });
    t.equal(exec.parentSpanId, server.spanId);
    t.equal(exec.attributes.domain, 'd');
    t.match(String(exec.attributes['request string']), /"domain":"d"/);
    t.equal(cache.parentSpanId, exec.spanId, 'the cache call is a child of the execution span');
    t.equal(cache.attributes['pipeline length'], 1);
    t.equal(cache.attributes['perSecondPipeline length'], 0);
    t.match(server.resource, {
      'service.name': 'rl-test',
      'service.namespace': 'ns',
      'service.instance.id': 'inst-1',
    });

    const failed = rx.spans.filter((s) => s.name === SERVER_SPAN_NAME && s.parentSpanId === '');
    t.equal(failed.length, 1, 'a call without traceparent starts its own trace');
    t.equal(failed[0].parentSpanId, '');
    t.equal(failed[0].statusCode, 2, 'an invalid request marks the span as an error');
  },
);

t.test('OTLP over grpc; TRACING_SAMPLING_RATE=0 still follows a sampled caller', async (t) => {
  const rx = await grpcReceiver();
  t.teardown(() => rx.close());
  process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT = rx.url;
  const svc = await startTestApp({
    files: { 'd.yaml': CONFIG },
    env: { TRACING_ENABLED: 'true', TRACING_EXPORTER_PROTOCOL: 'grpc', TRACING_SAMPLING_RATE: '0' },
  });
  const req = { domain: 'd', descriptors: [descriptor(['k', 'v'])] };
  await callWith(svc.grpcAddress, req, {}); // new trace at rate 0: not sampled
  await callWith(svc.grpcAddress, req, { traceparent: `00-${TRACE_ID}-${PARENT_ID}-01` });
  await callWith(svc.grpcAddress, req, { traceparent: `00-${'1'.repeat(32)}-${PARENT_ID}-00` });
  const instance = svc.app.tracing!.serviceInstanceId;
  await svc.close();

  t.ok(rx.spans.length > 0, 'spans arrived over gRPC');
  t.same([...new Set(rx.spans.map((s) => s.traceId))], [TRACE_ID], 'only the sampled caller trace');
  t.same(
    rx.spans.map((s) => s.name).sort(),
    [EXECUTION_SPAN_NAME, 'Memory Store Execution', SERVER_SPAN_NAME].sort(),
  );
  t.equal(rx.spans[0].resource['service.name'], 'RateLimit', 'default service name');
  t.match(
    instance,
    /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
    'random v4 UUID',
  );
  t.equal(rx.spans[0].resource['service.instance.id'], instance);
});

t.test('TRACING_ENABLED=false: no tracer, the store is not wrapped', async (t) => {
  const svc = await startTestApp({ files: { 'd.yaml': CONFIG } });
  t.teardown(() => svc.close());
  t.equal(svc.app.tracing, undefined);
  const r = await svc.call({ domain: 'd', descriptors: [descriptor(['k', 'v'])] });
  t.equal(r.overallCode, 'OK');
});

t.test(
  'Zipkin B3: x-b3-* and the single b3 header continue the caller trace; B3 wins over traceparent',
  async (t) => {
    const rx = await httpReceiver();
    t.teardown(() => rx.close());
    process.env.OTEL_EXPORTER_OTLP_ENDPOINT = rx.url;
    const svc = await startTestApp({
      files: { 'd.yaml': CONFIG },
      // Rate 0: only a sampled caller's trace is recorded, so each trace below shows that it was followed.
      env: { TRACING_ENABLED: 'true', TRACING_EXPORTER_PROTOCOL: 'http', TRACING_SAMPLING_RATE: '0' },
    });
    const req = { domain: 'd', descriptors: [descriptor(['k', 'v'])] };
    const multi = 'a'.repeat(32);
    const single = 'b'.repeat(32);
    const short = 'c'.repeat(16);
    const both = 'd'.repeat(32);
    await callWith(svc.grpcAddress, req, {
      'x-b3-traceid': multi,
      'x-b3-spanid': PARENT_ID,
      'x-b3-parentspanid': '1111111111111111',
      'x-b3-sampled': '1',
    });
    await callWith(svc.grpcAddress, req, { b3: `${single}-${PARENT_ID}-1` });
    await callWith(svc.grpcAddress, req, { b3: `${short}-${PARENT_ID}-d` });
    await callWith(svc.grpcAddress, req, {
      traceparent: `00-${TRACE_ID}-${PARENT_ID}-01`,
      b3: `${both}-${PARENT_ID}-1`,
    });
    // Not followed: sampled 0, a malformed id, a sampling state alone.
    await callWith(svc.grpcAddress, req, {
      'x-b3-traceid': 'e'.repeat(32),
      'x-b3-spanid': PARENT_ID,
      'x-b3-sampled': '0',
    });
    await callWith(svc.grpcAddress, req, { b3: `${'F'.repeat(32)}-${PARENT_ID}-1` });
    await callWith(svc.grpcAddress, req, { b3: '1' });
    await svc.close();

    const serverOf = (id: string) => rx.spans.find((s) => s.traceId === id && s.name === SERVER_SPAN_NAME);
    t.equal(serverOf(multi)?.parentSpanId, PARENT_ID, 'x-b3-traceid/spanid/sampled');
    t.equal(serverOf(single)?.parentSpanId, PARENT_ID, 'b3: {trace}-{span}-1');
    t.equal(
      serverOf(`${'0'.repeat(16)}${short}`)?.parentSpanId,
      PARENT_ID,
      'a 64-bit trace id, padded; d = debug',
    );
    t.ok(serverOf(both), 'B3 read after traceparent replaces it, as the reference');
    t.notOk(serverOf(TRACE_ID), 'the traceparent trace is not used when B3 is valid');
    t.same(
      [...new Set(rx.spans.map((s) => s.traceId))].sort(),
      [multi, single, `${'0'.repeat(16)}${short}`, both].sort(),
      'nothing else recorded',
    );
  },
);
