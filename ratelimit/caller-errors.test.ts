// A caller's bad value is the caller's error: hits_addend beyond what can be counted and strings that
// are not UTF-8 get INVALID_ARGUMENT (HTTP 400 on /json) with a message, never reach the counter
// store, and never move the cache-error statistic.
import t from 'tap';
import * as grpc from '@grpc/grpc-js';
import { SHOULD_RATE_LIMIT_PATH } from '../proto/index.js';
import type { CounterOp, CounterStore } from './counting/index.js';
import { MemoryCounterStore } from './memory/index.js';
import { startTestApp } from './test-support.js';

const CONFIG =
  'domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: minute, requests_per_unit: 5 }\n';

function varint(n: bigint): number[] {
  const out: number[] = [];
  while (n >= 0x80n) {
    out.push(Number(n & 0x7fn) | 0x80);
    n >>= 7n;
  }
  out.push(Number(n));
  return out;
}
const ld = (field: number, bytes: number[]) => [(field << 3) | 2, ...varint(BigInt(bytes.length)), ...bytes];
const str = (field: number, s: Buffer | string) => ld(field, [...Buffer.from(s)]);

/** RateLimitRequest bytes: domain d, one descriptor k=value, optional hits_addend (UInt64Value). */
function requestBytes(value: Buffer | string, hits?: bigint): Buffer {
  const entry = [...str(1, 'k'), ...str(2, value)];
  const descriptor = [...ld(1, entry), ...(hits === undefined ? [] : ld(3, [0x08, ...varint(hits)]))];
  return Buffer.from([...str(1, 'd'), ...ld(2, descriptor)]);
}

t.test(
  'out-of-range hits_addend and invalid UTF-8: INVALID_ARGUMENT, no store call, no cache error',
  async (t) => {
    const inner = new MemoryCounterStore();
    let increments = 0;
    const store: CounterStore = {
      increment: async (ops: readonly CounterOp[]) => {
        increments++;
        return inner.increment(ops);
      },
      get: (ops) => inner.get(ops),
      isHealthy: () => true,
      close: () => inner.close(),
    };
    const svc = await startTestApp({ files: { 'd.yaml': CONFIG }, appOptions: { store } });
    t.teardown(() => svc.close());
    const client = new grpc.Client(svc.grpcAddress, grpc.credentials.createInsecure());
    t.teardown(() => client.close());
    const raw = (bytes: Buffer) =>
      new Promise<{ code: number; details: string }>((resolve) =>
        client.makeUnaryRequest(
          SHOULD_RATE_LIMIT_PATH,
          (b: Buffer) => b,
          (b: Buffer) => b,
          bytes,
          (err) => resolve(err ? { code: err.code, details: err.details } : { code: 0, details: '' }),
        ),
      );

    t.same(await raw(requestBytes('v', 3n)), { code: 0, details: '' }, 'a valid request is counted');
    t.equal(increments, 1);
    const cases: [string, Buffer, RegExp][] = [
      [
        'hits_addend 2^63-1',
        requestBytes('v', 2n ** 63n - 1n),
        /hits_addend: 9223372036854775807 is out of range/,
      ],
      [
        'hits_addend 2^64-1 (10-byte varint)',
        requestBytes('v', 2n ** 64n - 1n),
        /hits_addend: 18446744073709551615 is out of range/,
      ],
      ['hits_addend 2^53', requestBytes('v', 2n ** 53n), /hits_addend: 9007199254740992 is out of range/],
      ['value with \\xff', requestBytes(Buffer.from([0x61, 0xff])), /invalid UTF-8/],
      ['value with \\xfe', requestBytes(Buffer.from([0x61, 0xfe])), /invalid UTF-8/],
      ['truncated UTF-8 sequence', requestBytes(Buffer.from([0x61, 0xe2, 0x82])), /invalid UTF-8/],
    ];
    for (const [what, bytes, message] of cases) {
      const r = await raw(bytes);
      t.equal(r.code, grpc.status.INVALID_ARGUMENT, `${what}: INVALID_ARGUMENT`);
      t.match(r.details, message, `${what}: says why`);
    }
    const jsonCases: [string, string | Buffer, RegExp][] = [
      [
        'hits_addend 2^64-1',
        '{"domain":"d","descriptors":[{"entries":[{"key":"k","value":"v"}],"hitsAddend":"18446744073709551615"}]}',
        /out of range/,
      ],
      [
        'hits_addend 2^63-1 as a number',
        '{"domain":"d","descriptors":[{"entries":[{"key":"k","value":"v"}],"hits_addend":9223372036854775807}]}',
        /out of range/,
      ],
      [
        'a lone surrogate',
        '{"domain":"d","descriptors":[{"entries":[{"key":"k","value":"\\ud800"}]}]}',
        /invalid UTF-8/,
      ],
      [
        'bytes that are not UTF-8',
        Buffer.concat([
          Buffer.from('{"domain":"d","descriptors":[{"entries":[{"key":"k","value":"a'),
          Buffer.from([0xff]),
          Buffer.from('"}]}]}'),
        ]),
        /not valid UTF-8/,
      ],
    ];
    for (const [what, body, message] of jsonCases) {
      const res = await fetch(`${svc.httpUrl}/json`, {
        method: 'POST',
        body: typeof body === 'string' ? body : new Uint8Array(body),
      });
      t.equal(res.status, 400, `/json ${what}: 400`);
      t.match(await res.text(), message, `/json ${what}: says why`);
    }
    t.equal(increments, 1, 'no bad request reached the store');
    const stats = svc.app.stats.snapshot();
    t.equal(stats['ratelimit.service.call.should_rate_limit.redis_error'] ?? 0, 0, 'no cache error counted');
  },
);
