// docs/observability.md lists every statistic. This keeps the list true: a service on real Redis with
// write-behind on is driven through OK, near-limit, over-limit, shadow and unknown-domain decisions, and
// every statistic it registers must be in the page, its dynamic parts (domain, key, deployment, shard,
// mode) written as the page's placeholders.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startRedis } from '../harness/redis/index.js';
import { descriptor, eventually, startTestApp } from '../ratelimit/test-support.js';
import { openQuotaStream } from '../ratelimit/quota/test-support.js';

const page = readFileSync(join(dirname(fileURLToPath(import.meta.url)), 'observability.md'), 'utf8');
const documented = new Set([...page.matchAll(/`([^`\s]+)`/g)].map((m) => m[1]!));

/** The page's name of a statistic: its dynamic parts replaced by the placeholders the page uses. */
function documentedName(name: string): string[] {
  if (/^ratelimit\.service\.named_limit\..+\.over_limit$/.test(name))
    return ['ratelimit.service.named_limit.<NAME>.over_limit'];
  let m = /^ratelimit\.service\.rate_limit\.[^.]+\.domain_not_found$/.exec(name);
  if (m) return ['ratelimit.service.rate_limit.<DOMAIN>.domain_not_found'];
  m = /^ratelimit\.service\.rate_limit\..+\.([a-z_]+)$/.exec(name);
  if (m) return [`ratelimit.service.rate_limit.<DOMAIN>.<KEY>.<STAT>`, m[1]!];
  m = /^ratelimit\.rlqs\..+\.(subscribers|assigned|allowed|denied|abandoned)$/.exec(name);
  if (m) return [`ratelimit.rlqs.<DOMAIN>.<KEY>.${m[1]}`];
  m = /^ratelimit\.service\.failure_mode\.[a-z]+$/.exec(name);
  if (m) return ['ratelimit.service.failure_mode.<MODE>'];
  m = /^ratelimit\.redis\.[^.]+\.[^.]+\.([a-z_]+)$/.exec(name);
  if (m) return [`ratelimit.redis.<DEPLOYMENT>.<SHARD>.${m[1]}`];
  return [name];
}

t.test('every statistic the service registers is listed in docs/observability.md', async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const svc = await startTestApp({
    files: {
      'd.yaml':
        'domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: minute, requests_per_unit: 2 }\n' +
        '  - key: s\n    shadow_mode: true\n    rate_limit: { unit: minute, requests_per_unit: 0 }\n',
    },
    env: {
      BACKEND_TYPE: 'redis',
      REDIS_SOCKET_TYPE: 'tcp',
      REDIS_URL: redis.url,
      CACHE_WRITE_BEHIND_ENABLED: 'true',
      STATS_MAX_UNKNOWN_DOMAINS: '0',
      NAMED_LIMITS_STATS_MAX_SERIES: '1',
      RLQS_ENABLED: 'true',
      RLQS_REPORTING_INTERVAL: '100ms',
      RLQS_IDLE_TIMEOUT: '100ms',
    },
  });
  t.teardown(() => svc.close());
  for (let i = 0; i < 4; i++) await svc.call({ domain: 'd', descriptors: [descriptor(['k', '1'])] });
  await svc.call({ domain: 'd', descriptors: [descriptor(['s', '1'])] });
  // A request-supplied limit over its limit: a second limit name, past the bound of one.
  for (let i = 0; i < 2; i++)
    await svc.call({
      domain: 'd',
      descriptors: [{ ...descriptor(['k', '2']), limit: { requestsPerUnit: 1, unit: 'MINUTE' } }],
    });
  await svc.call({ domain: 'nope', descriptors: [descriptor(['k', '1'])] });
  // A quota stream: a known and an unknown bucket, reported once, then abandoned.
  const quota = openQuotaStream(svc.grpcAddress);
  t.teardown(() => quota.close());
  quota.report('d', { k: '1' }, 10, 1);
  quota.report('d', { nobody: '1' }, 10, 1);
  await eventually(() => quota.latest({ k: '1' })?.bucketAction === 'abandonAction', 10_000, 'abandon');
  const names = Object.keys(svc.app.stats.snapshot());
  t.ok(names.length > 20, `${names.length} statistics registered`);
  for (const family of [
    'ratelimit.service.rate_limit.',
    'ratelimit.redis.',
    'ratelimit.write_behind.',
    'ratelimit.service.named_limit.',
    'ratelimit.service.named_limit_unlisted.',
    'ratelimit.rlqs.d.k.',
  ])
    t.ok(
      names.some((n) => n.startsWith(family)),
      `the run reaches ${family}*`,
    );
  const missing = names.filter((n) => !documentedName(n).every((d) => documented.has(d)));
  t.same(missing, [], 'statistics registered by the service but absent from docs/observability.md');
});
