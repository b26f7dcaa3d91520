// The LLM token budget example (examples/envoy/llm-token-budget.yaml with the service config
// examples/token-budget/llm-token-budget.yaml): checked strictly against Envoy's current protos (the route
// RateLimit's apply_on_stream_done and hits_addend.is_negative_hits), then driven through the emulated
// ratelimit filter against the real built service on a real Redis: reserve the estimate at request time,
// settle the difference when the stream ends (more, or a refund), and the budget ends charged exactly
// with the tokens used.
import t from 'tap';
import { copyFileSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { parse } from 'yaml';
import { rateLimitServiceDefinition } from '../proto/index.js';
import type { WireRateLimitRequest, WireRateLimitResponse } from '../proto/index.js';
import { builtBin, REPO_ROOT } from '../harness/dist.js';
import {
  BOOTSTRAP,
  EnvoyProtos,
  RateLimitFilterEmulation,
  filterOutcome,
  hitsAddend,
  type Json,
} from '../harness/envoy-actions.js';
import {
  freePort,
  LOOPBACK,
  quietListenEnv,
  makeTempDir,
  removeTempDir,
  ServerProcess,
  waitForPort,
} from '../harness/net.js';
import { respCommand, startRedis } from '../harness/redis/index.js';

const ENVOY_YAML = join(REPO_ROOT, 'examples', 'envoy', 'llm-token-budget.yaml');
const CONFIG_YAML = join(REPO_ROOT, 'examples', 'token-budget', 'llm-token-budget.yaml');
const DAY_BUDGET = 100_000;

const protos = new EnvoyProtos();
const decode = (text: string) => protos.decode(BOOTSTRAP, parse(text));

t.test('the example decodes strictly with Envoy’s current route and ratelimit protos', async (t) => {
  const good = readFileSync(ENVOY_YAML, 'utf8');
  const r = decode(good);
  t.same(r.errors, [], 'apply_on_stream_done and hits_addend.is_negative_hits are known fields');
  const route =
    r.value.static_resources.listeners[0].filter_chains[0].filters[0].typed_config.route_config
      .virtual_hosts[0].routes[0];
  const limits = route.typed_per_filter_config['envoy.filters.http.ratelimit'].rate_limits;
  t.same(
    limits.map((l: Json) => [l.apply_on_stream_done ?? false, l.hits_addend]),
    [
      [false, { format: '%REQ(x-max-tokens)%' }],
      [true, { format: '%DYNAMIC_METADATA(llm_budget:over)%' }],
      [true, { format: '%DYNAMIC_METADATA(llm_budget:refund)%', is_negative_hits: true }],
    ],
  );
  // Still strict: a misspelt field fails, naming the message.
  const cases: [string, string, RegExp][] = [
    [
      'is_negative_hits: true',
      'is_negative_hit: true',
      /is_negative_hit: unknown field in .*RateLimit\.HitsAddend/,
    ],
    [
      'apply_on_stream_done: true',
      'apply_on_stream_don: true',
      /apply_on_stream_don: unknown field in envoy\.config\.route\.v3\.RateLimit\b/,
    ],
    ['is_negative_hits: true', 'is_negative_hits: "yes"', /is_negative_hits: expected bool/],
    ["hits_addend: { format: '%REQ", "hits_addend: { formt: '%REQ", /formt: unknown field/],
    [
      "format: '%REQ(x-max-tokens)%'",
      "format: 'REQ(x-max-tokens)'",
      /format: must start with "%" and end with "%"/,
    ],
    ["{ format: '%REQ(x-max-tokens)%' }", '{ number: 1000000001 }', /number: at most 1000000000/],
  ];
  for (const [from, to, want] of cases) {
    t.ok(good.includes(from), `the example has ${from}`);
    t.match(decode(good.replace(from, to)).errors.join('\n'), want, `${from} → ${to} is rejected`);
  }
  t.same(
    decode(good.replace('is_negative_hits: true', 'isNegativeHits: true')).errors,
    [],
    'the lowerCamel JSON name is accepted too',
  );
});

t.test('hits_addend: a number, or one substitution giving a whole number up to 10^9', async (t) => {
  const h = { 'x-max-tokens': '250', bad: '12a', big: '1000000001' };
  const md = { llm_budget: { over: '40', n: 7, neg: -1, frac: 1.5 } };
  t.equal(hitsAddend({ number: 3 }, h, md), 3);
  t.equal(hitsAddend({ format: '%REQ(X-Max-Tokens)%' }, h, md), 250, 'header names are case-insensitive');
  t.equal(hitsAddend({ format: '%DYNAMIC_METADATA(llm_budget:over)%' }, h, md), 40, 'a decimal string');
  t.equal(hitsAddend({ format: '%DYNAMIC_METADATA(llm_budget:n)%' }, h, md), 7, 'a number');
  for (const f of [
    '%REQ(missing)%',
    '%REQ(bad)%',
    '%REQ(big)%',
    '%DYNAMIC_METADATA(llm_budget:neg)%',
    '%DYNAMIC_METADATA(llm_budget:frac)%',
    '%DYNAMIC_METADATA(other:over)%',
  ])
    t.equal(hitsAddend({ format: f }, h, md), undefined, `${f}: no number, the descriptor is dropped`);
});

/**
 * What the example's Lua filter does (its code is checked for the pieces this mirrors): on the request,
 * x-max-tokens made a whole number (the default when missing or malformed, at most 10^9) and kept as
 * `llm_budget.estimate`; on the response, `"total_tokens": N` from the body compared with it, the
 * difference written as `llm_budget.over` or `llm_budget.refund`.
 */
function luaOf(bootstrap: Json) {
  const hcm = bootstrap.static_resources.listeners[0].filter_chains[0].filters[0].typed_config;
  const lua = hcm.http_filters.find((f: Json) => f.name === 'envoy.filters.http.lua');
  const code: string = lua.typed_config.default_source_code.inline_string;
  for (const piece of [
    'local MAX_HITS = 1000000000',
    'string.match(given, "^%d+$")',
    'replace("x-max-tokens", string.format("%d", estimate))',
    'set("llm_budget", "estimate", estimate)',
    `'"total_tokens"%s*:%s*(%d+)'`,
    'set("llm_budget", "over", string.format("%d", diff))',
    'set("llm_budget", "refund", string.format("%d", -diff))',
  ])
    if (!code.includes(piece)) throw new Error(`the Lua filter no longer has ${piece}; update the emulation`);
  const defaultEstimate = Number(/local DEFAULT_ESTIMATE = (\d+)/.exec(code)![1]);
  return {
    onRequest(headers: Record<string, string>) {
      const given = headers['x-max-tokens'];
      const estimate =
        given !== undefined && /^\d+$/.test(given) ? Math.min(Number(given), 1e9) : defaultEstimate;
      return {
        headers: { ...headers, 'x-max-tokens': String(estimate) },
        metadata: { llm_budget: { estimate } },
      };
    },
    onResponse(metadata: Json, body: string): Json {
      const budget = { ...metadata.llm_budget };
      const used = /"total_tokens"\s*:\s*(\d+)/.exec(body)?.[1];
      if (used !== undefined) {
        const diff = Number(used) - budget.estimate;
        if (diff > 0) budget.over = String(diff);
        else if (diff < 0) budget.refund = String(-diff);
      }
      return { ...metadata, llm_budget: budget };
    },
  };
}

t.test('reserve, then settle, through the emulated filter against the real service on Redis', async (t) => {
  const bootstrap = decode(readFileSync(ENVOY_YAML, 'utf8')).value;
  const em = new RateLimitFilterEmulation(bootstrap, 'llm');
  const lua = luaOf(bootstrap);

  const redis = await startRedis({ args: ['--save', '', '--appendonly', 'no'] });
  t.teardown(() => redis.stop());
  const root = makeTempDir('rl-llm-budget');
  t.teardown(() => removeTempDir(root));
  mkdirSync(join(root, 'ratelimit', 'config'), { recursive: true });
  copyFileSync(CONFIG_YAML, join(root, 'ratelimit', 'config', 'llm-token-budget.yaml'));
  const [grpcPort, httpPort, debugPort] = [await freePort(), await freePort(), await freePort()];
  const proc = new ServerProcess('ratelimit', process.execPath, [builtBin('ratelimit')], {
    logPath: join(root, 'ratelimit.log'),
    cwd: REPO_ROOT,
    env: {
      ...process.env,
      BACKEND_TYPE: 'redis',
      REDIS_SOCKET_TYPE: 'tcp',
      REDIS_URL: redis.url,
      RUNTIME_ROOT: root,
      RUNTIME_SUBDIRECTORY: 'ratelimit',
      RUNTIME_WATCH_ROOT: 'false',
      ...quietListenEnv(grpcPort, httpPort, debugPort),
    },
  });
  t.teardown(() => proc.stop());
  await waitForPort(grpcPort, {
    deadlineMs: 120_000,
    what: 'the ratelimit gRPC listener',
    abort: () => proc.exitReason(),
    context: () => proc.logTail(),
  });
  const Ctor = grpc.makeGenericClientConstructor(rateLimitServiceDefinition(), 'RateLimitService');
  const client = new Ctor(`${LOOPBACK}:${grpcPort}`, grpc.credentials.createInsecure());
  t.teardown(() => client.close());
  const send = (req: WireRateLimitRequest) =>
    new Promise<WireRateLimitResponse>((resolve, reject) =>
      (client as any).ShouldRateLimit(
        req,
        { deadline: Date.now() + 10_000 },
        (err: Error | null, res: WireRateLimitResponse) => (err ? reject(err) : resolve(res)),
      ),
    );

  /** A request's first half: the Lua filter, then the reserve call; the stream is open when admitted. */
  const start = async (user: string, maxTokens?: string) => {
    const given: Record<string, string> = { ':authority': 'llm.example', 'x-user-id': user };
    if (maxTokens !== undefined) given['x-max-tokens'] = maxTokens;
    const { headers, metadata } = lua.onRequest(given);
    const req = { path: '/v1/chat/completions', peer: '192.0.2.1', headers, dynamicMetadata: metadata };
    const call = em.call(req);
    t.equal(call.route, 'completions');
    const sent = call.request!;
    t.equal(sent.domain, 'llm');
    t.equal(sent.descriptors!.length, 1, 'one descriptor at request time: the reservation');
    const answer = await send(sent);
    return { req, sent, answer, outcome: filterOutcome(em.filter, answer) };
  };
  /** Its second half: the response (with its usage, if the model answered) and the stream-done call. */
  const finish = async (r: Awaited<ReturnType<typeof start>>, body: string) => {
    const dynamicMetadata = lua.onResponse(r.req.dynamicMetadata, body);
    const done = em.call({ ...r.req, dynamicMetadata }, { onStreamDone: true });
    if (!done.request) return undefined;
    const answer = await send(done.request);
    t.equal(answer.overallCode, 'OK', 'a settle is fire and forget; the service answers OK');
    return done.request;
  };
  const usage = (n: number) => JSON.stringify({ object: 'chat.completion', usage: { total_tokens: n } });
  /** What the budget of `user` still has: a check (hits 0) consumes nothing and reports the tighter one. */
  const remaining = async (user: string) => {
    const a = await send({
      domain: 'llm',
      descriptors: [{ entries: [{ key: 'user', value: user }], hitsAddend: { value: 0 } }],
    });
    return a.statuses![0].limitRemaining ?? 0;
  };
  /** The user's counters in Redis: one per window (day and month), each holding the charged tokens. */
  const counters = async (user: string) => {
    const keys = (await respCommand(
      { host: redis.host, port: redis.port },
      'KEYS',
      `*_user_${user}_*`,
    )) as string[];
    const values = [];
    for (const k of keys.sort())
      values.push(Number(await respCommand({ host: redis.host, port: redis.port }, 'GET', k)));
    return values;
  };
  const today = () => Math.floor(Date.now() / 86_400_000);
  const day0 = today();

  await t.test('more used than reserved: the rest is charged at stream end', async (t) => {
    const r = await start('alice', '1000');
    t.same(r.sent.descriptors![0], {
      entries: [{ key: 'user', value: 'alice' }],
      hitsAddend: { value: 1000 },
    });
    t.equal(r.answer.overallCode, 'OK');
    t.equal(r.outcome.headers['x-ratelimit-remaining'], String(DAY_BUDGET - 1000), 'the estimate is held');
    const settle = await finish(r, usage(1500));
    t.same(settle?.descriptors, [{ entries: [{ key: 'user', value: 'alice' }], hitsAddend: { value: 500 } }]);
    t.equal(await remaining('alice'), DAY_BUDGET - 1500);
  });

  await t.test('less used than reserved: the unused part is refunded', async (t) => {
    const r = await start('alice', '2000');
    t.equal(r.answer.overallCode, 'OK');
    const settle = await finish(r, usage(300));
    t.same(settle?.descriptors, [
      { entries: [{ key: 'user', value: 'alice' }], hitsAddend: { value: 1700 }, isNegativeHits: true },
    ]);
    t.equal(await remaining('alice'), DAY_BUDGET - 1500 - 300);
  });

  await t.test(
    'exactly the estimate, or no usage in the response: nothing is sent at stream end',
    async (t) => {
      const exact = await start('alice', '700');
      t.equal(await finish(exact, usage(700)), undefined);
      const none = await start('alice');
      t.same(none.sent.descriptors![0].hitsAddend, { value: 4096 }, 'no x-max-tokens: the default estimate');
      t.equal(await finish(none, 'upstream reset'), undefined, 'no usage: the estimate stays charged');
      t.equal(await remaining('alice'), DAY_BUDGET - 1800 - 700 - 4096);
    },
  );

  await t.test('a reservation that does not fit is refused, holds nothing and settles nothing', async (t) => {
    const r = await start('bob', String(DAY_BUDGET + 1));
    t.equal(r.answer.overallCode, 'OVER_LIMIT');
    t.equal(r.outcome.status, 429);
    t.equal(await finish(r, ''), undefined);
    t.equal(await remaining('bob'), DAY_BUDGET);
  });

  await t.test('streams in flight: the estimates are held until they settle', async (t) => {
    const a = await start('carol', '60000');
    t.equal(a.answer.overallCode, 'OK');
    const b = await start('carol', '50000');
    t.equal(
      b.answer.overallCode,
      'OVER_LIMIT',
      '60,000 held: 50,000 more does not fit, though none is used yet',
    );
    await finish(b, '');
    await finish(a, usage(20_000));
    const c = await start('carol', '50000');
    t.equal(c.answer.overallCode, 'OK', 'after the first settled at 20,000 it fits');
    await finish(c, usage(50_000));
    t.equal(await remaining('carol'), DAY_BUDGET - 70_000);
  });

  await t.test('a settle of more that no longer fits is refused and not counted', async (t) => {
    const r = await start('dave', '99000');
    t.equal(r.answer.overallCode, 'OK');
    const done = em.call(
      { ...r.req, dynamicMetadata: lua.onResponse(r.req.dynamicMetadata, usage(101_000)) },
      {
        onStreamDone: true,
      },
    );
    t.same(done.request!.descriptors![0].hitsAddend, { value: 2000 });
    const answer = await send(done.request!);
    t.equal(answer.overallCode, 'OVER_LIMIT', 'the 2,000 more do not fit the 1,000 left');
    t.equal(await remaining('dave'), 1000, 'the window holds the estimate, 2,000 short of what was used');
  });

  await t.test('each window holds exactly the tokens used', async (t) => {
    if (today() !== day0) {
      t.comment('the day turned over during the test: the day counters started again');
      return;
    }
    t.same(await counters('alice'), [1800 + 700 + 4096, 1800 + 700 + 4096], 'day and month');
    t.same(await counters('carol'), [70_000, 70_000]);
    t.same(await counters('bob'), [], 'a refused reservation created no key');
  });
});
