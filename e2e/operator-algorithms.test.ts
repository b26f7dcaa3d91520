// A RateLimitConfig with every field beyond the reference, end to end on a real API server:
// custom resource -> CRD validation -> operator -> xDS -> our pod, which enforces the sliding window,
// the token bucket and the list form; and a pod that announces no features (as a reference pod)
// is never sent that version, which the resource's status says.
import t from 'tap';
import { openRawAdsStream } from '../control-plane/testing.js';
import type { TestApp } from '../ratelimit/test-support.js';
import { RateLimitOperator } from '../operator/operator.js';
import { applyRlc, condition, getRlc, installCrd, rlcFromYaml, waitFor } from '../operator/testing.js';
import { freePort } from '../harness/net.js';
import { startKube, type KubeHarness } from '../harness/kube.js';
import { startXdsPod } from '../harness/operator.js';

let kube: KubeHarness;
let operator: RateLimitOperator;
let pod: TestApp;
let xdsPort: number;

t.before(async () => {
  kube = await startKube();
  await installCrd(kube.kubeConfig);
  xdsPort = await freePort();
  operator = new RateLimitOperator({
    kubeConfig: kube.kubeConfig,
    xdsListen: `127.0.0.1:${xdsPort}`,
    resyncMs: 2_000,
  });
  await operator.start();
  pod = await startXdsPod('pod-a', xdsPort);
});
t.teardown(async () => {
  await pod?.close();
  await operator?.close();
  await kube?.stop();
});

const call = (key: string, value: string) =>
  pod.call({ domain: 'algo', descriptors: [{ entries: [{ key, value }] }] });

t.test('every new field travels from the custom resource to the pod, which enforces it', async (t) => {
  await applyRlc(
    kube.kubeConfig,
    rlcFromYaml(
      'algo',
      `domain: algo
descriptors:
  - key: user
    metadata: { owner: team-a }
    rate_limit: { unit: hour, requests_per_unit: 3, algorithm: sliding_window }
  - key: tenant
    value: trial-*
    share_threshold: true
    rate_limits:
      - { unit: minute, requests_per_unit: 2, algorithm: token_bucket, burst: 2 }
      - { unit: day, requests_per_unit: 100 }
  - key: route
    value_to_metric: true
    rate_limit: { unit: hour, requests_per_unit: 10, algorithm: token_bucket, burst: 1 }`,
    ),
  );
  await waitFor('the pod to serve domain algo', async () => {
    const r = await call('user', 'probe');
    return r.statuses?.[0]?.currentLimit?.requestsPerUnit === 3;
  });
  const dump = pod.app.service.getConfig()!.dump();
  t.match(
    dump,
    /algo\.user: unit=HOUR requests_per_unit=3, shadow_mode: false, quota_mode: false, algorithm: sliding_window/,
  );
  t.match(
    dump,
    /algo\.route: unit=HOUR requests_per_unit=10, shadow_mode: false, quota_mode: false, algorithm: token_bucket, burst: 1/,
  );

  const codes: string[] = [];
  for (let i = 0; i < 4; i++) codes.push((await call('user', 'alice')).overallCode as string);
  t.same(codes, ['OK', 'OK', 'OK', 'OVER_LIMIT'], 'sliding window: 3 per hour');

  // share_threshold: every trial-* value shares the bucket (burst 2).
  const shared = [
    (await call('tenant', 'trial-1')).overallCode,
    (await call('tenant', 'trial-2')).overallCode,
    (await call('tenant', 'trial-3')).overallCode,
  ];
  t.same(shared, ['OK', 'OK', 'OVER_LIMIT'], 'rate_limits with share_threshold: one bucket for all');

  t.equal((await call('route', 'a')).overallCode, 'OK');
  t.equal((await call('route', 'a')).overallCode, 'OVER_LIMIT', 'token bucket with burst 1');
  t.equal(pod.app.stats.ruleStats('algo.route_a').totalHits.value, 2, 'value_to_metric arrived');
  const rule = pod.app.service
    .getConfig()!
    .getLimit('algo', { entries: [{ key: 'user', value: 'x' }] })!.rule;
  t.same(rule.metadata, { owner: 'team-a' }, 'metadata arrived');

  const obj = await waitFor('Programmed=True', async () => {
    const o = await getRlc(kube.kubeConfig, 'algo');
    return condition(o, 'Programmed')?.status === 'True' ? o : undefined;
  });
  t.equal(condition(obj, 'Accepted')?.message, 'domain "algo" is served', 'nothing reported as lost');
  t.equal(obj.status?.podsAcked, '1/1');
});

t.test('a pod that announces no features is not sent the version, and status says so', async (t) => {
  const raw = openRawAdsStream(`127.0.0.1:${xdsPort}`, 'reference-like');
  t.teardown(() => raw.close());
  raw.send({});
  t.ok(await raw.quiet(2_000), 'no response: the version uses features the pod did not announce');
  const obj = await waitFor('Programmed=False for the pod', async () => {
    const o = await getRlc(kube.kubeConfig, 'algo');
    return condition(o, 'Programmed')?.status === 'False' ? o : undefined;
  });
  t.match(
    condition(obj, 'Programmed')?.message,
    /pod reference-like .* version [0-9a-f]+: not sent to this pod: it does not announce rate_limits, sliding_window, token_bucket/,
  );
  raw.close();
  await waitFor('Programmed=True after it left', async () => {
    const o = await getRlc(kube.kubeConfig, 'algo');
    return condition(o, 'Programmed')?.status === 'True';
  });
});
