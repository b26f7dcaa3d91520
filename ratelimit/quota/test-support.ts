// A minimal RLQS client for the quota server's tests: a @grpc/grpc-js bidirectional stream with the Envoy
// protos, which sends usage reports on demand and keeps every response it gets. (The Envoy emulator of
// the accuracy runs is a fuller client; this one only lets tests speak the protocol.)
import * as grpc from '@grpc/grpc-js';
import {
  rateLimitQuotaServiceDefinition,
  type WireBucketAction,
  type WireQuotaResponse,
  type WireUsageReports,
} from '../../proto/index.js';

export interface TestQuotaStream {
  /** Every response received, in order. */
  readonly responses: WireQuotaResponse[];
  /** Set when the stream ended: its gRPC status code and message. */
  status: { code: number; details: string } | undefined;
  send(msg: WireUsageReports): void;
  /** One usage report of one bucket: `rate` requests per second over `seconds`. */
  report(domain: string, bucket: Record<string, string>, rate: number, seconds: number): void;
  /** The latest action received for a bucket (by its pairs). */
  latest(bucket: Record<string, string>): WireBucketAction | undefined;
  close(): void;
}

/** Requests per second of a token bucket assignment; ALLOW_ALL is Infinity, DENY_ALL 0. */
export function assignedRate(a: WireBucketAction | undefined): number | undefined {
  const s = a?.quotaAssignmentAction?.rateLimitStrategy;
  if (!s) return undefined;
  if (s.blanketRule === 'ALLOW_ALL') return Infinity;
  if (s.blanketRule === 'DENY_ALL' || s.strategy === 'blanketRule')
    return s.blanketRule === 'DENY_ALL' ? 0 : Infinity;
  const tb = s.tokenBucket!;
  const seconds = Number(tb.fillInterval.seconds ?? 0) + Number(tb.fillInterval.nanos ?? 0) / 1e9;
  return (tb.tokensPerFill?.value ?? 1) / seconds;
}

const sameBucket = (a: Record<string, string> | undefined, b: Record<string, string>): boolean => {
  const ka = Object.keys(a ?? {});
  return ka.length === Object.keys(b).length && ka.every((k) => a![k] === b[k]);
};

export function openQuotaStream(address: string): TestQuotaStream {
  const Client = grpc.makeGenericClientConstructor(
    rateLimitQuotaServiceDefinition(),
    'RateLimitQuotaService',
  );
  const client = new Client(address, grpc.credentials.createInsecure()) as unknown as grpc.Client & {
    StreamRateLimitQuotas(): grpc.ClientDuplexStream<WireUsageReports, WireQuotaResponse>;
  };
  const call = client.StreamRateLimitQuotas();
  const out: TestQuotaStream = {
    responses: [],
    status: undefined,
    send: (msg) => {
      if (out.status === undefined) call.write(msg);
    },
    report: (domain, bucket, rate, seconds) =>
      out.send({
        domain,
        bucketQuotaUsages: [
          {
            bucketId: { bucket },
            timeElapsed: { seconds: Math.floor(seconds), nanos: Math.round((seconds % 1) * 1e9) },
            numRequestsAllowed: Math.round(rate * seconds),
            numRequestsDenied: 0,
          },
        ],
      }),
    latest: (bucket) => {
      for (let i = out.responses.length - 1; i >= 0; i--) {
        for (const a of out.responses[i]!.bucketAction) if (sameBucket(a.bucketId?.bucket, bucket)) return a;
      }
      return undefined;
    },
    close: () => {
      call.cancel();
      client.close();
    },
  };
  call.on('data', (r: WireQuotaResponse) => out.responses.push(r));
  call.on('error', (err: grpc.ServiceError) => (out.status ??= { code: err.code, details: err.details }));
  call.on('status', (s: grpc.StatusObject) => (out.status ??= { code: s.code, details: s.details }));
  return out;
}
