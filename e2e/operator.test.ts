// The operator against a real API server, serving a real ratelimit service over xDS:
// apply -> enforced, update -> new limit, invalid -> rejected with the validator's message while the
// rest keeps serving, conflict -> status says why, NACKing pod -> status shows it, delete -> domain
// gone, operator restart -> decisions never stop.
import t from 'tap';
import { openRawAdsStream } from '../control-plane/testing.js';
import { RATELIMIT_CONFIG_TYPE_URL } from '../proto/index.js';
import { roomInWindow, type TestApp } from '../ratelimit/test-support.js';
import { RateLimitOperator } from '../operator/operator.js';
import {
  applyRlc,
  condition,
  deleteRlc,
  getRlc,
  installCrd,
  rlcFromYaml,
  waitFor,
} from '../operator/testing.js';
import { freePort } from '../harness/net.js';
import { startKube, type KubeHarness } from '../harness/kube.js';
import { startXdsPod } from '../harness/operator.js';

let kube: KubeHarness;
let operator: RateLimitOperator;
let pod: TestApp;
let xdsPort: number;

function startOperator(): Promise<RateLimitOperator> {
  const op = new RateLimitOperator({
    kubeConfig: kube.kubeConfig,
    xdsListen: `127.0.0.1:${xdsPort}`,
    resyncMs: 2_000,
  });
  return op.start().then(() => op);
}

/** The limit the pod's answer carries for one descriptor (undefined: no rule matched / no domain). */
async function limitOf(domain: string, key: string, value: string): Promise<number | undefined> {
  const r = await pod.call({ domain, descriptors: [{ entries: [{ key, value }] }] });
  return r.statuses?.[0]?.currentLimit?.requestsPerUnit;
}

t.before(async () => {
  kube = await startKube();
  await installCrd(kube.kubeConfig);
  xdsPort = await freePort();
  operator = await startOperator();
  pod = await startXdsPod('pod-a', xdsPort);
});
t.teardown(async () => {
  await pod?.close();
  await operator?.close();
  await kube?.stop();
});

t.test(
  'apply: the pod enforces the limit, status is Accepted and Programmed with the pod counted',
  async (t) => {
    const started = Date.now();
    await applyRlc(
      kube.kubeConfig,
      rlcFromYaml(
        'checkout',
        `domain: checkout
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 3 }`,
      ),
    );
    await waitFor(
      'the pod to serve domain checkout',
      async () => (await limitOf('checkout', 'user', 'probe')) === 3,
    );
    t.ok(Date.now() - started < 10_000, `enforced within 10 s (${Date.now() - started} ms)`);
    await roomInWindow();
    const codes: string[] = [];
    for (let i = 0; i < 4; i++) {
      const r = await pod.call({
        domain: 'checkout',
        descriptors: [{ entries: [{ key: 'user', value: 'alice' }] }],
      });
      codes.push(r.overallCode as string);
    }
    t.same(codes, ['OK', 'OK', 'OK', 'OVER_LIMIT'], 'the fourth request in the minute is over the limit');

    const obj = await waitFor('Programmed=True', async () => {
      const o = await getRlc(kube.kubeConfig, 'checkout');
      return condition(o, 'Programmed')?.status === 'True' ? o : undefined;
    });
    const accepted = condition(obj, 'Accepted')!;
    t.equal(accepted.status, 'True');
    t.equal(accepted.reason, 'Accepted');
    t.equal(accepted.observedGeneration, obj.metadata.generation);
    t.equal(obj.status?.podsAcked, '1/1');
    t.same(obj.status?.pods, { connected: 1, acked: 1, nacked: 0 });
    t.equal(obj.status?.version, operator.controller.snapshotVersion);
  },
);

t.test('update: the new limit is enforced and the new generation is Programmed', async (t) => {
  await applyRlc(
    kube.kubeConfig,
    rlcFromYaml(
      'checkout',
      `domain: checkout
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 7 }`,
    ),
  );
  await waitFor('the new limit', async () => (await limitOf('checkout', 'user', 'probe2')) === 7);
  const obj = await waitFor('generation 2 Programmed', async () => {
    const o = await getRlc(kube.kubeConfig, 'checkout');
    const p = condition(o, 'Programmed');
    return p?.status === 'True' && p.observedGeneration === 2 ? o : undefined;
  });
  t.equal(obj.status?.observedGeneration, 2);
});

t.test(
  'an invalid resource gets the validator message and never reaches the pod; others keep serving',
  async (t) => {
    // Below the CRD's CEL levels: the API server stores it, the operator refuses it.
    await applyRlc(
      kube.kubeConfig,
      rlcFromYaml(
        'deep-bad',
        `domain: deep
descriptors:
  - key: a
    descriptors:
      - key: b
        descriptors:
          - key: c
            rate_limit: { unlimited: true, unit: second }`,
      ),
    );
    const obj = await waitFor('Accepted=False', async () => {
      const o = await getRlc(kube.kubeConfig, 'deep-bad');
      return condition(o, 'Accepted')?.status === 'False' ? o : undefined;
    });
    t.equal(condition(obj, 'Accepted')?.reason, 'Invalid');
    t.equal(
      condition(obj, 'Accepted')?.message,
      'default/deep-bad: descriptors[0].descriptors[0].descriptors[0].rate_limit.unit: should not specify rate limit unit when unlimited',
    );
    t.equal(condition(obj, 'Programmed')?.reason, 'NotAccepted');
    t.notOk(pod.app.service.getConfig()?.hasDomain('deep'), 'the pod never got domain deep');
    t.equal(await limitOf('checkout', 'user', 'probe3'), 7, 'checkout keeps serving');
  },
);

t.test('a second resource claiming a domain gets DomainConflict naming the owner', async (t) => {
  await new Promise((r) => setTimeout(r, 1100)); // creationTimestamp has second resolution
  await applyRlc(
    kube.kubeConfig,
    rlcFromYaml(
      'checkout-copy',
      `domain: checkout
descriptors:
  - key: user
    rate_limit: { unit: second, requests_per_unit: 1000 }`,
    ),
  );
  const obj = await waitFor('Accepted=False', async () => {
    const o = await getRlc(kube.kubeConfig, 'checkout-copy');
    return condition(o, 'Accepted')?.status === 'False' ? o : undefined;
  });
  t.equal(condition(obj, 'Accepted')?.reason, 'DomainConflict');
  t.match(condition(obj, 'Accepted')?.message, /domain "checkout" belongs to default\/checkout/);
  t.equal(await limitOf('checkout', 'user', 'probe4'), 7, 'the owner keeps the domain');
  await deleteRlc(kube.kubeConfig, 'checkout-copy');
});

t.test('a pod that NACKs shows in the status with its message', async (t) => {
  const raw = openRawAdsStream(`127.0.0.1:${xdsPort}`, 'pod-nacker');
  t.teardown(() => raw.close());
  raw.send({});
  const resp = await raw.next(10_000);
  raw.send({
    responseNonce: resp.nonce,
    versionInfo: '',
    errorDetail: { code: 3, message: 'pod-nacker says no' },
  });
  const obj = await waitFor('Programmed=False Nacked', async () => {
    const o = await getRlc(kube.kubeConfig, 'checkout');
    return condition(o, 'Programmed')?.reason === 'Nacked' ? o : undefined;
  });
  t.equal(condition(obj, 'Programmed')?.status, 'False');
  t.match(
    condition(obj, 'Programmed')?.message,
    /pod pod-nacker .* rejected version [0-9a-f]+: pod-nacker says no/,
  );
  t.same(obj.status?.pods, { connected: 2, acked: 1, nacked: 1 });
  t.equal(obj.status?.podsAcked, '1/2');
  raw.close();
  await waitFor('Programmed=True after the NACKing pod left', async () => {
    const o = await getRlc(kube.kubeConfig, 'checkout');
    return condition(o, 'Programmed')?.status === 'True' && o.status?.podsAcked === '1/1';
  });
});

t.test(
  'value_to_metric crosses xDS (it used to be dropped): Accepted without a lost-field note, enforced with its statistic',
  async (t) => {
    await applyRlc(
      kube.kubeConfig,
      rlcFromYaml(
        'lossy',
        `domain: lossy
descriptors:
  - key: method
    value_to_metric: true
    rate_limit: { unit: second, requests_per_unit: 4 }`,
      ),
    );
    const obj = await waitFor('lossy Accepted', async () => {
      const o = await getRlc(kube.kubeConfig, 'lossy');
      return condition(o, 'Accepted')?.status === 'True' ? o : undefined;
    });
    t.equal(condition(obj, 'Accepted')?.message, 'domain "lossy" is served');
    await waitFor('the pod to serve lossy', async () => (await limitOf('lossy', 'method', 'GET')) === 4);
    t.ok(pod.app.stats.ruleStats('lossy.method_GET').totalHits.value > 0, 'the statistic carries the value');
    const { CoreV1Api } = await import('@kubernetes/client-node');
    const core = kube.kubeConfig.makeApiClient(CoreV1Api);
    const list = await core.listNamespacedEvent({ namespace: 'default' });
    t.notOk(
      list.items.some((e) => e.involvedObject.name === 'lossy' && e.reason === 'FieldsNotServed'),
      'no FieldsNotServed Event',
    );
    await deleteRlc(kube.kubeConfig, 'lossy');
  },
);

t.test('Kubernetes Events record accept, reject and programmed', async (t) => {
  const { CoreV1Api } = await import('@kubernetes/client-node');
  const core = kube.kubeConfig.makeApiClient(CoreV1Api);
  const reasons = await waitFor('events', async () => {
    const list = await core.listNamespacedEvent({ namespace: 'default' });
    const rs = new Set(list.items.map((e) => `${e.involvedObject.name}:${e.reason}`));
    return rs.has('checkout:Accepted') &&
      rs.has('checkout:Programmed') &&
      rs.has('deep-bad:Invalid') &&
      rs.has('checkout:Nacked')
      ? rs
      : undefined;
  });
  t.ok(reasons.has('checkout-copy:DomainConflict'));
});

t.test('operator restart: decisions never stop and the pod keeps its version', async (t) => {
  const versionBefore = operator.controller.snapshotVersion;
  let stop = false;
  const failures: string[] = [];
  let calls = 0;
  const prober = (async () => {
    while (!stop) {
      try {
        const l = await limitOf('checkout', 'user', `restart-${calls++}`);
        if (l !== 7) failures.push(`limit ${l}`);
      } catch (err) {
        failures.push((err as Error).message);
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  await operator.close();
  await new Promise((r) => setTimeout(r, 500));
  operator = await startOperator();
  await waitFor('the new operator to publish', async () => operator.controller.ready);
  await waitFor('the pod to be back on the new operator', async () => operator.ads.streams().length === 1);
  await new Promise((r) => setTimeout(r, 500));
  stop = true;
  await prober;
  t.same(failures, [], `${calls} decisions during the restart, none failed or changed`);
  t.equal(operator.controller.snapshotVersion, versionBefore, 'same content, same version');
  const ts = operator.ads.streams()[0].types.get(RATELIMIT_CONFIG_TYPE_URL);
  t.equal(ts?.versionAcked, versionBefore, 'the pod resumed on the version it had');
});

t.test('delete: the domain is removed from the pod', async (t) => {
  await deleteRlc(kube.kubeConfig, 'checkout');
  await waitFor(
    'domain checkout gone',
    async () => pod.app.service.getConfig()?.hasDomain('checkout') === false,
  );
  t.equal(await limitOf('checkout', 'user', 'gone'), undefined, 'no rule answers for the deleted domain');
  await deleteRlc(kube.kubeConfig, 'deep-bad');
});
