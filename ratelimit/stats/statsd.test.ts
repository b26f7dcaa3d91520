// StatsD and DogStatsD output on the wire: a real UDP socket in the test receives the datagrams
// the service sends after known traffic, and the lines are checked for names, values and tags.
import { createSocket, type Socket } from 'node:dgram';
import type { AddressInfo } from 'node:net';
import t, { type Test } from 'tap';
import { descriptor, eventually, startTestApp, roomInWindow } from '../test-support.js';
import { mogrifiersFromEnv, MogrifierError } from './mogrifier.js';

// Counting tests must not straddle a minute boundary (see roomInWindow).
t.beforeEach(() => roomInWindow());

const CONFIG = `
domain: d
descriptors:
  - key: k
    rate_limit: { unit: minute, requests_per_unit: 2 }
  - key: a
    descriptors:
      - key: b
        rate_limit: { unit: minute, requests_per_unit: 10 }
  - key: user
    detailed_metric: true
    rate_limit: { unit: minute, requests_per_unit: 10 }
  - key: ip
    rate_limit: { unit: minute, requests_per_unit: 10 }
`;

interface Receiver {
  port: number;
  lines: string[];
  /** Sum of the values of `name` over the counter lines received so far. */
  counter(name: string): number;
  close(): Promise<void>;
}

async function udpReceiver(): Promise<Receiver> {
  const sock: Socket = createSocket('udp4');
  const lines: string[] = [];
  sock.on('message', (buf) => {
    for (const l of buf.toString('utf8').split('\n')) if (l !== '') lines.push(l);
  });
  await new Promise<void>((r) => sock.bind(0, '127.0.0.1', r));
  return {
    port: (sock.address() as AddressInfo).port,
    lines,
    counter(name) {
      let sum = 0;
      for (const l of lines) {
        const m = /^(.*):([0-9.]+)\|c(\|.*)?$/.exec(l);
        if (m && m[1] === name) sum += Number(m[2]);
      }
      return sum;
    },
    close: () => new Promise((r) => sock.close(() => r())),
  };
}

const traffic = async (svc: Awaited<ReturnType<typeof startTestApp>>) => {
  for (let i = 0; i < 3; i++) await svc.call({ domain: 'd', descriptors: [descriptor(['k', 'x'])] });
  await svc.call({ domain: 'd', descriptors: [descriptor(['a', '1'], ['b', '2'])] });
  await svc.call({ domain: 'd', descriptors: [descriptor(['user', 'alice'])] });
  await svc.call({ domain: 'd', descriptors: [descriptor(['ip', '10.0.0.1'])] });
  await svc.call({ domain: 'nope', descriptors: [descriptor(['k', 'x'])] });
  await svc.call({ domain: '', descriptors: [descriptor(['k', 'x'])] }).catch(() => undefined);
};

/** A receiver and a service flushing StatsD to it every 100 ms (both stopped at the test's end). */
async function withStatsd(t: Test, env: Record<string, string> = {}) {
  const rx = await udpReceiver();
  t.teardown(() => rx.close());
  const svc = await startTestApp({
    files: { 'd.yaml': CONFIG },
    env: {
      USE_STATSD: 'true',
      STATSD_HOST: '127.0.0.1',
      STATSD_PORT: String(rx.port),
      STATS_FLUSH_INTERVAL: '100ms',
      ...env,
    },
  });
  t.teardown(() => svc.close());
  return { rx, svc };
}

t.test('StatsD: counters as deltas per flush, gostats names, EXTRA_TAGS as .__k=v', async (t) => {
  const { rx, svc } = await withStatsd(t);
  await traffic(svc);
  const p = 'ratelimit.service.rate_limit.d';
  const timings = () =>
    rx.lines.filter((l) => l.startsWith('ratelimit_server.ShouldRateLimit.response_time:'));
  await eventually(
    () => rx.counter('ratelimit_server.ShouldRateLimit.total_requests') === 8 && timings().length === 8,
    5000,
    'the last call flushed',
  );
  await new Promise((r) => setTimeout(r, 250)); // two more flush intervals: everything sent
  t.equal(rx.counter(`${p}.k.total_hits`), 3);
  t.equal(rx.counter(`${p}.k.within_limit`), 2);
  t.equal(rx.counter(`${p}.k.over_limit`), 1);
  t.equal(rx.counter(`${p}.k.near_limit`), 1, 'the 2nd hit of 2 is above 0.8 * 2');
  t.equal(rx.counter(`${p}.a.b.total_hits`), 1, 'nested keys are appended');
  t.equal(rx.counter(`${p}.user_alice.total_hits`), 1, 'detailed_metric adds the value');
  t.equal(rx.counter(`${p}.ip.total_hits`), 1, 'a key-only entry omits the value');
  t.equal(rx.counter('ratelimit.service.rate_limit.nope.domain_not_found'), 1);
  t.equal(rx.counter('ratelimit.service.call.should_rate_limit.service_error'), 1);
  t.equal(rx.counter('ratelimit.service.config_load_success'), 1);
  t.equal(rx.counter('ratelimit_server.ShouldRateLimit.total_requests'), 8);
  await eventually(() =>
    rx.lines.some((l) => l.startsWith('ratelimit_server.ShouldRateLimit.response_time:')),
  );
  const timing = rx.lines.filter((l) => l.startsWith('ratelimit_server.ShouldRateLimit.response_time:'));
  t.equal(timing.length, 8, 'one timing per call');
  t.match(timing[0], /^ratelimit_server\.ShouldRateLimit\.response_time:[0-9.]+\|ms$/);

  // A flush sends only what changed since the previous one.
  const before = rx.lines.length;
  await new Promise((r) => setTimeout(r, 350));
  t.equal(rx.lines.length, before, 'nothing new to send, nothing sent');
  await svc.call({ domain: 'd', descriptors: [descriptor(['k', 'x'])] });
  await eventually(() => rx.counter(`${p}.k.total_hits`) === 4);
  t.ok(rx.lines.slice(before).includes(`${p}.k.total_hits:1|c`), 'delta 1, not the total 4');
});

t.test('StatsD: a descriptor value with a line break or ":" cannot add a line of its own', async (t) => {
  const { rx, svc } = await withStatsd(t);
  // detailed_metric puts the request's value into the statistic's name.
  await svc.call({ domain: 'd', descriptors: [descriptor(['user', 'x\ninjected.metric:999|c\r\u0000'])] });
  const p = 'ratelimit.service.rate_limit.d';
  await eventually(() => rx.counter(`${p}.user_x_injected.metric_999_c__.total_hits`) === 1, 5000, 'flushed');
  t.notOk(
    rx.lines.some((l) => l.startsWith('injected.metric')),
    "no line of the caller's making reached the StatsD server",
  );
});

t.test('StatsD: EXTRA_TAGS are serialized into the name like gostats', async (t) => {
  const { rx, svc } = await withStatsd(t, { EXTRA_TAGS: 'zone:eu-1,app:rl' });
  await svc.call({ domain: 'd', descriptors: [descriptor(['k', 'x'])] });
  await eventually(
    () => rx.counter('ratelimit.service.rate_limit.d.k.total_hits.__app=rl.__zone=eu-1') === 1,
  );
  t.ok(
    rx.lines.every((l) => !l.includes('|#')),
    'plain StatsD carries no DogStatsD tags',
  );
});

t.test('DogStatsD: tags, mogrifiers with $1..$3 from both variable spellings', async (t) => {
  const rx = await udpReceiver();
  t.teardown(() => rx.close());
  const env = {
    USE_STATSD: 'false',
    USE_DOG_STATSD: 'true',
    STATSD_HOST: '127.0.0.1',
    STATSD_PORT: String(rx.port),
    STATS_FLUSH_INTERVAL: '100ms',
    EXTRA_TAGS: 'zone:eu',
    DOG_STATSD_MOGRIFIERS: 'rule,server',
    DOG_STATSD_MOGRIFIER_RULE_PATTERN: '^ratelimit\\.service\\.rate_limit\\.([^.]+)\\.(.+)\\.([^.]+)$',
    DOG_STATSD_MOGRIFIER_RULE_NAME: 'ratelimit.service.rate_limit.$3',
    DOG_STATSD_MOGRIFIER_RULE_TAGS: 'domain:$1,descriptor:$2',
    DOG_STATSD_MOGRIFIERS_SERVER_PATTERN: '^ratelimit_server\\.(.+)\\.(total_requests|response_time)$',
    DOG_STATSD_MOGRIFIERS_SERVER_NAME: 'ratelimit_server.$2',
    DOG_STATSD_MOGRIFIERS_SERVER_TAGS: 'grpc_method:$1',
  };
  const svc = await startTestApp({ files: { 'd.yaml': CONFIG }, env, appOptions: { env } });
  t.teardown(() => svc.close());
  await svc.call({ domain: 'd', descriptors: [descriptor(['a', '1'], ['b', '2'])] });
  const want = 'ratelimit.service.rate_limit.total_hits:1|c|#zone:eu,domain:d,descriptor:a.b';
  await eventually(() => rx.lines.includes(want), 5000, want);
  await eventually(() =>
    rx.lines.includes('ratelimit_server.total_requests:1|c|#zone:eu,grpc_method:ShouldRateLimit'),
  );
  await eventually(() =>
    rx.lines.some((l) =>
      /^ratelimit_server\.response_time:[0-9.]+\|ms\|#zone:eu,grpc_method:ShouldRateLimit$/.test(l),
    ),
  );
  t.ok(
    rx.lines.includes('ratelimit.service.config_load_success:1|c|#zone:eu'),
    'unmatched names pass unchanged',
  );
});

t.test('mogrifier settings: first match wins, missing PATTERN or NAME is an error', async (t) => {
  const m = mogrifiersFromEnv(['a', 'b'], {
    DOG_STATSD_MOGRIFIER_A_PATTERN: 'x\\.(\\w+)',
    DOG_STATSD_MOGRIFIER_A_NAME: 'first.$1.$9',
    DOG_STATSD_MOGRIFIER_B_PATTERN: '.*',
    DOG_STATSD_MOGRIFIER_B_NAME: 'second',
  });
  t.same(m.mogrify('x.y'), { name: 'first.y.$9', tags: [] }, 'an out-of-range $9 stays as written');
  t.same(m.mogrify('other'), { name: 'second', tags: [] });
  t.throws(() => mogrifiersFromEnv(['c'], {}), MogrifierError);
  t.throws(() => mogrifiersFromEnv(['c'], { DOG_STATSD_MOGRIFIER_C_PATTERN: 'x' }), /no NAME/);
  t.throws(
    () => mogrifiersFromEnv(['c'], { DOG_STATSD_MOGRIFIER_C_PATTERN: '(', DOG_STATSD_MOGRIFIER_C_NAME: 'n' }),
    /failed to compile/,
  );
});

t.test('USE_STATSD=false logs statistics at debug level; DISABLE_STATS sends nothing', async (t) => {
  const rx = await udpReceiver();
  t.teardown(() => rx.close());
  const off = await startTestApp({
    files: { 'd.yaml': CONFIG },
    env: {
      DISABLE_STATS: 'true',
      USE_STATSD: 'true',
      STATSD_HOST: '127.0.0.1',
      STATSD_PORT: String(rx.port),
      STATS_FLUSH_INTERVAL: '50ms',
    },
  });
  await off.call({ domain: 'd', descriptors: [descriptor(['k', 'x'])] });
  await new Promise((r) => setTimeout(r, 200));
  t.equal(off.app.statsPipeline.flusher.sinks.length, 0);
  t.equal(
    off.app.stats.snapshot()['ratelimit.service.rate_limit.d.k.total_hits'],
    1,
    'still counted in memory',
  );
  await off.close();
  t.equal(rx.lines.length, 0, 'no datagram');

  const lines: string[] = [];
  const { createLogger } = await import('../../common/index.js');
  const logger = createLogger({ level: 'debug', format: 'json' }, { write: (l: string) => lines.push(l) });
  const svc = await startTestApp({
    files: { 'd.yaml': CONFIG },
    env: { USE_STATSD: 'false', STATS_FLUSH_INTERVAL: '50ms' },
    appOptions: { logger },
  });
  t.teardown(() => svc.close());
  await svc.call({ domain: 'd', descriptors: [descriptor(['k', 'x'])] });
  await eventually(() => lines.some((l) => l.includes('ratelimit.service.rate_limit.d.k.total_hits')));
  const line = lines.find((l) => l.includes('ratelimit.service.rate_limit.d.k.total_hits'))!;
  const inner = JSON.parse(JSON.parse(line)['@message']);
  t.match(inner, {
    level: 'debug',
    logger: 'gostats.loggingsink',
    msg: 'flushing counter',
    json: { name: 'ratelimit.service.rate_limit.d.k.total_hits', type: 'counter', value: '1.000000' },
  });
});

t.test('timers past the reservoir: StatsD gets a uniform sample with |@rate', async (t) => {
  const rx = await udpReceiver();
  t.teardown(() => rx.close());
  const { StatsdSink } = await import('./statsd-sink.js');
  const { Timer, TIMER_RESERVOIR } = await import('./store.js');
  const timer = new Timer('ratelimit_server.ShouldRateLimit.response_time');
  for (let i = 0; i < TIMER_RESERVOIR * 2; i++) timer.record(i % 7);
  const drained = timer.drain()!;
  t.equal(drained.count, TIMER_RESERVOIR * 2);
  t.equal(drained.samples.length, TIMER_RESERVOIR);
  t.equal(timer.drain(), undefined, 'drained');
  const sink = new StatsdSink({ host: '127.0.0.1', port: rx.port });
  sink.flushTimer(timer.name, drained);
  sink.flushed();
  await eventually(() => rx.lines.length === TIMER_RESERVOIR, 5000, 'all sampled lines');
  t.ok(rx.lines.every((l) => /^ratelimit_server\.ShouldRateLimit\.response_time:[0-6]\|ms\|@0\.5$/.test(l)));
  await sink.close();
});
