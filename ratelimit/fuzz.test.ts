// Fuzzing in the suite (fast-check): the YAML config loader, the /json body and the gRPC request
// bytes, random and adversarial (deep nesting, huge strings, invalid UTF-8, __proto__ keys, extreme
// integers). Asserted: no crash (only the documented error types), no hang, no 5xx and no
// INTERNAL for a caller's well-formed request, no stack trace in any answer, no prototype pollution.
//
// CI runs a fixed seed and FUZZ_RUNS (default 2000) per target. A longer local run:
//   FUZZ_RUNS=100000 FUZZ_SEED=$RANDOM nice npx tap ratelimit/fuzz.test.ts --timeout=3600
// A failure prints the seed and path that replay it (fc.assert's message).
import t from 'tap';
import fc from 'fast-check';
import * as grpc from '@grpc/grpc-js';
import { ConfigError, compileConfig } from './config/index.js';
import { parseYamlSource } from './config/index.js';
import {
  decodeRateLimitRequest,
  rateLimitServiceDefinition,
  SHOULD_RATE_LIMIT_PATH,
} from '../proto/index.js';
import { ServiceError } from './service/index.js';
import { startTestApp } from './test-support.js';

const RUNS = Number(process.env.FUZZ_RUNS ?? 2000);
const SEED = Number(process.env.FUZZ_SEED ?? 20261124);
const params = { numRuns: RUNS, seed: SEED };
const STACK = /\n\s+at [\w.<>]+ \(|\bat .*\.(ts|js):\d+:\d+/;

const CONFIG = `domain: d
descriptors:
  - key: k
    rate_limit: { unit: minute, requests_per_unit: 1000000 }
  - key: w
    value: pre*
    rate_limit: { unit: second, requests_per_unit: 5 }
`;

// --- adversarial pieces -------------------------------------------------------------------------
const extremeInt = fc.constantFrom(
  0,
  -1,
  1,
  2 ** 31 - 1,
  2 ** 32,
  2 ** 53 - 1,
  2 ** 53,
  2 ** 63,
  2 ** 64,
  -(2 ** 63),
  1e308,
  Number.MAX_VALUE,
);
const nastyKey = fc.constantFrom('__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', '');
const text = fc.oneof(
  fc.string({ maxLength: 20 }),
  fc.string({ unit: 'binary', maxLength: 20 }),
  nastyKey,
  fc.constant('\ud800'),
  fc.integer({ min: 0, max: 3 }).map((n) => 'x'.repeat(10 ** (n + 2))),
);
const deep = (n: number, open: string, close: string, inner = '1') =>
  open.repeat(n) + inner + close.repeat(n);

// --- YAML -----------------------------------------------------------------------------------------
const yamlScalar = fc.oneof(
  text.map((s) => JSON.stringify(s)),
  extremeInt.map(String),
  fc.constantFrom(
    '~',
    'null',
    'yes',
    'no',
    '.inf',
    '.nan',
    '0x1F',
    '0o17',
    '1e400',
    '010',
    '1:30',
    '<<',
    '*a',
    '&a x',
    '!!binary aGk=',
  ),
);
const descriptorYaml: fc.Arbitrary<string> = fc.letrec<{ d: string }>((tie) => ({
  d: fc.oneof(
    { depthSize: 'small' },
    fc.tuple(nastyKey, yamlScalar).map(([k, v]) => `{ key: ${JSON.stringify(k)}, value: ${v} }`),
    fc
      .tuple(yamlScalar, yamlScalar, extremeInt, fc.constantFrom('second', 'minute', 'fortnight', '7'))
      .map(
        ([k, v, n, u]) => `{ key: ${k}, value: ${v}, rate_limit: { unit: ${u}, requests_per_unit: ${n} } }`,
      ),
    fc.array(tie('d'), { maxLength: 3 }).map((ds) => `{ key: k, descriptors: [${ds.join(', ')}] }`),
  ),
})).d;
const yamlDoc = fc.oneof(
  fc.string({ maxLength: 200 }),
  fc.string({ unit: 'binary', maxLength: 200 }),
  fc
    .tuple(yamlScalar, fc.array(descriptorYaml, { maxLength: 4 }))
    .map(([domain, ds]) => `domain: ${domain}\ndescriptors: [${ds.join(', ')}]\n`),
  fc.tuple(nastyKey, yamlScalar).map(([k, v]) => `domain: d\n${k}: ${v}\n__proto__: { polluted: 1 }\n`),
  fc.integer({ min: 1, max: 3000 }).map((n) => `domain: d\nx: ${deep(n, '[', ']')}\n`),
  fc.integer({ min: 1, max: 3000 }).map((n) => `domain: d\nx: ${deep(n, '{a: ', '}')}\n`),
  fc
    .integer({ min: 1, max: 400 })
    .map((n) => Array.from({ length: n }, (_, i) => `${' '.repeat(i)}k${i}:`).join('\n')),
  fc.integer({ min: 1, max: 12 }).map((levels) => {
    let y = 'a0: &a0 [x]\n';
    for (let i = 1; i <= levels; i++)
      y += `a${i}: &a${i} [${Array(10)
        .fill(`*a${i - 1}`)
        .join(', ')}]\n`;
    return `${y}domain: d\n`;
  }),
  fc.integer({ min: 1, max: 5 }).map((n) => `domain: "${'q'.repeat(20_000 * n)}"\n`),
);

t.test('YAML loader: any text is a document or a ConfigError, quickly; nothing is polluted', (t) => {
  let configErrors = 0;
  fc.assert(
    fc.property(yamlDoc, (yaml) => {
      try {
        const doc = parseYamlSource({ name: 'fuzz.yaml', yaml });
        compileConfig([{ name: 'fuzz.yaml', document: doc }]);
      } catch (err) {
        if (!(err instanceof ConfigError)) throw err;
        if (!err.message.startsWith('fuzz.yaml'))
          throw new Error(`error without the file name: ${err.message}`, { cause: err });
        configErrors++;
      }
      return ({} as Record<string, unknown>).polluted === undefined;
    }),
    params,
  );
  t.pass(`${RUNS} documents (${configErrors} rejected with a ConfigError)`);
  t.end();
});

// --- /json and gRPC -----------------------------------------------------------------------------
const entry = fc.record({ key: text, value: text }, { requiredKeys: [] });
const wireRequest = fc.record(
  {
    domain: fc.oneof(fc.constant('d'), text),
    hitsAddend: fc.oneof(fc.integer({ min: 0, max: 5 }), extremeInt),
    descriptors: fc.array(
      fc.record(
        {
          entries: fc.array(
            fc.oneof(entry, fc.constant({ key: 'k', value: 'v' }), fc.constant({ key: 'w', value: 'pre1' })),
            {
              maxLength: 4,
            },
          ),
          hitsAddend: fc.oneof(
            fc.record({ value: fc.oneof(fc.integer({ min: 0, max: 3 }), extremeInt) }),
            fc.constant(null),
          ),
          limit: fc.record(
            { requestsPerUnit: extremeInt, unit: fc.constantFrom('SECOND', 'MINUTE', 'WEEK', 'BOGUS', 99) },
            { requiredKeys: [] },
          ),
        },
        { requiredKeys: [] },
      ),
      { maxLength: 5 },
    ),
  },
  { requiredKeys: [] },
);
/** Requests the service accepts, so the fuzz also reaches the counting path (200 and 429). */
const plausibleRequest = fc.record({
  domain: fc.constantFrom('d', 'unknown'),
  descriptors: fc.array(
    fc.record({
      entries: fc.array(
        fc.oneof(
          fc.constant({ key: 'k', value: 'v' }),
          fc.record({ key: fc.constantFrom('k', 'w'), value: fc.string({ minLength: 1, maxLength: 8 }) }),
        ),
        { minLength: 1, maxLength: 2 },
      ),
    }),
    { minLength: 1, maxLength: 3 },
  ),
});
const jsonBody = fc.oneof(
  plausibleRequest.map((r) => JSON.stringify(r)),
  wireRequest.map((r) => JSON.stringify(r)),
  fc.json({ maxDepth: 4 }),
  fc.string({ maxLength: 100 }),
  fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b)),
  fc.integer({ min: 1, max: 5000 }).map((n) => deep(n, '{"domain":', '}', '"d"')),
  fc.integer({ min: 1, max: 5000 }).map((n) => `{"domain":"d","descriptors":${deep(n, '[', ']', '{}')}}`),
  fc.constantFrom(
    '{"__proto__":{"polluted":1},"domain":"d","descriptors":[{"entries":[{"key":"k","value":"v"}]}]}',
    '{"domain":"d","descriptors":[{"entries":[{"key":"k","value":"v","__proto__":{"x":1}}]}]}',
    '{"domain":"d","descriptors":[{"entries":[{"key":"k","value":"v"}],"hitsAddend":"99999999999999999999999999"}]}',
    '{"domain":"d","descriptors":[{"entries":[{"key":"k","value":"v"}],"hitsAddend":-1}]}',
    '{"domain":"d","descriptors":[{"entries":[{"key":"k","value":"v"}],"hitsAddend":1e999}]}',
    '{"domain":"d","descriptors":[{"entries":[{"key":"k","value":"\\udfff"}]}]}',
    'null',
    '[]',
  ),
);

t.test('/json: no 5xx, no stack trace, no pollution for any body', async (t) => {
  const svc = await startTestApp({ files: { 'd.yaml': CONFIG } });
  t.teardown(() => svc.close());
  const http = await svc.app.http!.fastify();
  const seen = new Map<number, number>();
  await fc.assert(
    fc.asyncProperty(jsonBody, async (body) => {
      const res = await http.inject({
        method: 'POST',
        url: '/json',
        payload: body,
        headers: { 'content-type': 'application/json' },
      });
      seen.set(res.statusCode, (seen.get(res.statusCode) ?? 0) + 1);
      if (![200, 400, 413, 415, 429].includes(res.statusCode))
        throw new Error(`status ${res.statusCode}: ${res.body.slice(0, 300)}`);
      if (STACK.test(res.body)) throw new Error(`stack trace in the answer: ${res.body.slice(0, 300)}`);
      return ({} as Record<string, unknown>).polluted === undefined;
    }),
    params,
  );
  t.pass(`${RUNS} bodies: ${[...seen].map(([s, n]) => `${s}x${n}`).join(' ')}`);
});

const def = rateLimitServiceDefinition().ShouldRateLimit;
/** Random and mutated request bytes: valid messages with bytes flipped, cut or spliced in. */
const requestBytes = fc.oneof(
  fc.uint8Array({ maxLength: 300 }).map((b) => Buffer.from(b)),
  wireRequest
    .filter((r) => {
      try {
        def.requestSerialize(r);
        return true;
      } catch {
        return false;
      }
    })
    .chain((r) => {
      const bytes = def.requestSerialize(r) as Buffer;
      return fc.oneof(
        fc.constant(bytes),
        fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })).map(([i, v]) => {
          const b = Buffer.from(bytes);
          if (b.length > 0) b[i % b.length] = v;
          return b;
        }),
        fc.nat().map((i) => bytes.subarray(0, bytes.length === 0 ? 0 : i % bytes.length)),
      );
    }),
);

/**
 * A message the decoder accepts (protobufjs is no oracle here: it reads a field whatever its wire
 * type says); a refusal of such a message is the caller's (INVALID_ARGUMENT), never INTERNAL.
 */
function decodes(b: Buffer): boolean {
  try {
    decodeRateLimitRequest(b);
    return true;
  } catch {
    return false;
  }
}

t.test('gRPC request bytes: decode and decide in-process; only documented errors', async (t) => {
  const svc = await startTestApp({ files: { 'd.yaml': CONFIG } });
  t.teardown(() => svc.close());
  await fc.assert(
    fc.asyncProperty(requestBytes, async (bytes) => {
      let req;
      try {
        req = decodeRateLimitRequest(bytes);
      } catch (err) {
        // Malformed bytes: an Error with a one-line message (INTERNAL), or a caller's bad value.
        if (!(err instanceof Error) || err.message.includes('\n')) throw err;
        return true;
      }
      try {
        await svc.app.service.shouldRateLimit(req);
      } catch (err) {
        if (!(err instanceof ServiceError)) throw err;
      }
      return true;
    }),
    params,
  );
  t.pass(`${RUNS} messages`);
});

t.test('gRPC over the wire: well-formed requests never get INTERNAL/UNKNOWN; no stack traces', async (t) => {
  const svc = await startTestApp({ files: { 'd.yaml': CONFIG } });
  t.teardown(() => svc.close());
  const client = new grpc.Client(svc.grpcAddress, grpc.credentials.createInsecure());
  t.teardown(() => client.close());
  const codes = new Map<number, number>();
  await fc.assert(
    fc.asyncProperty(requestBytes, async (bytes) => {
      const r = await new Promise<{ code: number; details: string }>((resolve) =>
        client.makeUnaryRequest(
          SHOULD_RATE_LIMIT_PATH,
          (b: Buffer) => b,
          (b: Buffer) => b,
          bytes,
          (err) => resolve(err ? { code: err.code, details: err.details } : { code: 0, details: '' }),
        ),
      );
      codes.set(r.code, (codes.get(r.code) ?? 0) + 1);
      if (STACK.test(r.details)) throw new Error(`stack trace in grpc-message: ${r.details}`);
      if (r.code === grpc.status.UNKNOWN) throw new Error(`UNKNOWN: ${r.details}`);
      if (r.code === grpc.status.INTERNAL && decodes(bytes))
        throw new Error(`INTERNAL for a well-formed request: ${r.details}`);
      return true;
    }),
    { ...params, numRuns: Math.ceil(RUNS / 4) },
  );
  t.pass(`${Math.ceil(RUNS / 4)} calls: ${[...codes].map(([c, n]) => `${c}x${n}`).join(' ')}`);
});

// --- request bounds (REQUEST_MAX_*) ---------------------------------------------------------------
// Random requests around each bound, small bounds so that both sides are reached often: within every
// bound a request is decided (OK or OVER_LIMIT, 200 or 429), past one it is refused with
// INVALID_ARGUMENT (400) naming a bound it passes; never a 5xx, UNAVAILABLE, INTERNAL or cache error.
const BOUNDS = { descriptors: 5, entries: 4, keyBytes: 12, valueBytes: 20, hits: 50 };
const BOUND_ENV = {
  REQUEST_MAX_DESCRIPTORS: String(BOUNDS.descriptors),
  REQUEST_MAX_DESCRIPTOR_ENTRIES: String(BOUNDS.entries),
  REQUEST_MAX_KEY_BYTES: String(BOUNDS.keyBytes),
  REQUEST_MAX_VALUE_BYTES: String(BOUNDS.valueBytes),
  REQUEST_MAX_HITS_ADDEND: String(BOUNDS.hits),
};
/** A string of exactly `bytes` UTF-8 bytes, ASCII and two-byte characters mixed. */
const utf8Of = (bytes: number, first: string) =>
  fc.array(fc.boolean(), { minLength: bytes, maxLength: bytes }).map((picks) => {
    let s = first.slice(0, bytes);
    let n = s.length;
    for (const two of picks) {
      if (n >= bytes) break;
      if (two && n + 2 <= bytes) {
        s += 'é';
        n += 2;
      } else {
        s += 'a';
        n += 1;
      }
    }
    return s;
  });
/** Mostly within the bound, up to it; sometimes just past it. */
const near = (bound: number, min = 1) =>
  fc.oneof(
    { arbitrary: fc.integer({ min, max: bound }), weight: 39 },
    { arbitrary: fc.integer({ min: bound + 1, max: bound + 2 }), weight: 1 },
  );
const boundedRequest = fc.record({
  domainBytes: fc.oneof(fc.constant(1), near(BOUNDS.keyBytes)),
  hits: fc.option(near(BOUNDS.hits, 0), { nil: undefined }),
  descriptors: near(BOUNDS.descriptors).chain((n) =>
    fc.array(
      fc.record({
        entries: fc.array(
          fc
            .tuple(near(BOUNDS.keyBytes), near(BOUNDS.valueBytes, 0))
            .chain(([k, v]) => fc.tuple(utf8Of(k, 'k'), utf8Of(v, ''))),
          { minLength: 1, maxLength: BOUNDS.entries + 2 },
        ),
        hits: fc.option(near(BOUNDS.hits, 0), { nil: undefined }),
      }),
      { minLength: n, maxLength: n },
    ),
  ),
});
type BoundedRequest = typeof boundedRequest extends fc.Arbitrary<infer T> ? T : never;

/** The settings of the bounds the request passes (empty: within all of them). */
function passed(r: BoundedRequest): Set<string> {
  const out = new Set<string>();
  const bytes = (s: string) => Buffer.byteLength(s);
  if (r.descriptors.length > BOUNDS.descriptors) out.add('REQUEST_MAX_DESCRIPTORS');
  if (r.domainBytes > BOUNDS.keyBytes) out.add('REQUEST_MAX_KEY_BYTES');
  if ((r.hits ?? 0) > BOUNDS.hits) out.add('REQUEST_MAX_HITS_ADDEND');
  for (const d of r.descriptors) {
    if (d.entries.length > BOUNDS.entries) out.add('REQUEST_MAX_DESCRIPTOR_ENTRIES');
    if ((d.hits ?? 0) > BOUNDS.hits) out.add('REQUEST_MAX_HITS_ADDEND');
    for (const [k, v] of d.entries) {
      if (bytes(k) > BOUNDS.keyBytes) out.add('REQUEST_MAX_KEY_BYTES');
      if (bytes(v) > BOUNDS.valueBytes) out.add('REQUEST_MAX_VALUE_BYTES');
    }
  }
  return out;
}

function toWire(r: BoundedRequest) {
  return {
    domain: 'd'.repeat(r.domainBytes),
    ...(r.hits === undefined ? {} : { hitsAddend: r.hits }),
    descriptors: r.descriptors.map((d) => ({
      entries: d.entries.map(([key, value]) => ({ key, value })),
      ...(d.hits === undefined ? {} : { hitsAddend: { value: d.hits } }),
    })),
  };
}

/** The proto3 JSON form: a UInt64Value is a plain number there. */
function toJson(r: BoundedRequest) {
  const w = toWire(r);
  return {
    ...w,
    descriptors: w.descriptors.map((d, i) => ({
      entries: d.entries,
      ...(r.descriptors[i]!.hits === undefined ? {} : { hitsAddend: r.descriptors[i]!.hits }),
    })),
  };
}

/** Decided when within every bound; refused naming one it passes otherwise. */
function checkOutcome(r: BoundedRequest, refused: boolean, decided: boolean, message: string): void {
  const over = passed(r);
  if (over.size === 0 && !decided) throw new Error(`within the bounds, not decided: ${message}`);
  if (over.size > 0) {
    if (!refused) throw new Error(`past ${[...over].join(', ')}, not refused: ${message}`);
    const named = /REQUEST_MAX_[A-Z_]+/.exec(message)?.[0];
    if (!named || !over.has(named)) throw new Error(`past ${[...over].join(', ')}, refused with: ${message}`);
  }
}

t.test('request bounds over gRPC: decided within them, INVALID_ARGUMENT naming one past them', async (t) => {
  const svc = await startTestApp({ files: { 'd.yaml': CONFIG }, env: BOUND_ENV });
  t.teardown(() => svc.close());
  const client = new grpc.Client(svc.grpcAddress, grpc.credentials.createInsecure());
  t.teardown(() => client.close());
  let refusedCount = 0;
  const runs = Math.ceil(RUNS / 4);
  await fc.assert(
    fc.asyncProperty(boundedRequest, async (r) => {
      const bytes = def.requestSerialize(toWire(r)) as Buffer;
      const a = await new Promise<{ code: number; details: string }>((resolve) =>
        client.makeUnaryRequest(
          SHOULD_RATE_LIMIT_PATH,
          (b: Buffer) => b,
          (b: Buffer) => b,
          bytes,
          (err) => resolve(err ? { code: err.code, details: err.details } : { code: 0, details: '' }),
        ),
      );
      if (a.code === grpc.status.INVALID_ARGUMENT) refusedCount++;
      checkOutcome(r, a.code === grpc.status.INVALID_ARGUMENT, a.code === 0, `${a.code} ${a.details}`);
      return true;
    }),
    { ...params, numRuns: runs },
  );
  t.ok(refusedCount > 0 && refusedCount < runs, `${runs} requests, ${refusedCount} past a bound`);
  t.equal(svc.app.stats.snapshot()['ratelimit.service.call.should_rate_limit.redis_error'] ?? 0, 0);
});

t.test('request bounds on /json: decided within them, 400 naming one past them', async (t) => {
  const svc = await startTestApp({ files: { 'd.yaml': CONFIG }, env: BOUND_ENV });
  t.teardown(() => svc.close());
  const http = await svc.app.http!.fastify();
  let refusedCount = 0;
  await fc.assert(
    fc.asyncProperty(boundedRequest, fc.constantFrom('application/json', 'text/plain'), async (r, ct) => {
      const res = await http.inject({
        method: 'POST',
        url: '/json',
        payload: JSON.stringify(toJson(r)),
        headers: { 'content-type': ct },
      });
      if (res.statusCode === 400) refusedCount++;
      const decided = res.statusCode === 200 || res.statusCode === 429;
      checkOutcome(r, res.statusCode === 400, decided, `${res.statusCode} ${res.body}`);
      return true;
    }),
    params,
  );
  t.ok(refusedCount > 0 && refusedCount < RUNS, `${RUNS} bodies, ${refusedCount} past a bound`);
});
