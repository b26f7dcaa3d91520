// explain --bucket: a BucketId explained as the descriptor the quota server matches it as, with its rule;
// a configuration ambiguous for buckets refused; --rlqs-url shows a live pod's current assignments.
import t from 'tap';
import { eventually, startTestApp } from '../../ratelimit/test-support.js';
import { openQuotaStream } from '../../ratelimit/quota/test-support.js';
import { runInProcess, tempFiles } from './testing.js';

const CONFIG = `domain: api
descriptors:
  - key: tenant
    rate_limit: { unit: second, requests_per_unit: 100 }
    descriptors:
      - key: path
        value: /api
        rate_limit: { unit: minute, requests_per_unit: 30 }
`;

t.test('a bucket is shown as the descriptor it matches as, with its rule', async (t) => {
  const files = tempFiles({ 'api.yaml': CONFIG });
  t.teardown(files.remove);
  const r = await runInProcess([
    'explain',
    '--config',
    files.dir,
    '--domain',
    'api',
    '--bucket',
    'path=/api,tenant=acme',
  ]);
  t.equal(r.code, 0, r.stderr);
  t.match(r.stdout, /bucket \{path=\/api, tenant=acme\}: matched as the descriptor tenant=acme,path=\/api/);
  t.match(r.stdout, /30 per minute/, "the nested rule's limit");
  const none = await runInProcess([
    'explain',
    '--config',
    files.dir,
    '--domain',
    'api',
    '--bucket',
    'user=x',
  ]);
  t.match(none.stdout, /no rule lists exactly these keys; the quota server assigns ALLOW_ALL/);
  const json = await runInProcess([
    'explain',
    '--config',
    files.dir,
    '--domain',
    'api',
    '--bucket',
    'tenant=acme',
    '--format',
    'json',
  ]);
  const out = JSON.parse(json.stdout);
  t.same(out.buckets[0].descriptor, [{ key: 'tenant', value: 'acme' }]);
  t.equal(out.buckets[0].explanation.rule.limits[0].requestsPerUnit, 100);
});

t.test('a configuration ambiguous for buckets is refused', async (t) => {
  const files = tempFiles({
    'api.yaml': `domain: api
descriptors:
  - key: a
    descriptors:
      - key: b
        rate_limit: { unit: second, requests_per_unit: 1 }
  - key: b
    descriptors:
      - key: a
        rate_limit: { unit: second, requests_per_unit: 2 }
`,
  });
  t.teardown(files.remove);
  const r = await runInProcess(['explain', '--config', files.dir, '--domain', 'api', '--bucket', 'a=1,b=2']);
  t.equal(r.code, 2);
  t.match(r.stderr, /ambiguous for rate limit quota buckets: the paths a -> b and b -> a/);
});

t.test("--rlqs-url shows a running pod's subscribers and shares of the bucket", async (t) => {
  const app = await startTestApp({
    env: { RLQS_ENABLED: 'true', RLQS_REPORTING_INTERVAL: '200ms' },
    files: { 'api.yaml': CONFIG },
  });
  t.teardown(() => app.close());
  const s = openQuotaStream(app.grpcAddress);
  t.teardown(() => s.close());
  s.report('api', { tenant: 'live' }, 40, 1);
  await eventually(() => s.latest({ tenant: 'live' }) !== undefined, 10_000, 'assignment');
  const files = tempFiles({ 'api.yaml': CONFIG });
  t.teardown(files.remove);
  const r = await runInProcess([
    'explain',
    '--config',
    files.dir,
    '--domain',
    'api',
    '--bucket',
    'tenant=live',
    '--rlqs-url',
    app.debugUrl,
  ]);
  t.equal(r.code, 0, r.stderr);
  t.match(
    r.stdout,
    /current assignments on http:\/\/127\.0\.0\.1:\d+:\n\s+stream \d+: demand 40\.00\/s, share 100\.00\/s/,
  );
});
