// The operator's promises under bad edits and between teams, against a real API server with two real
// ratelimit pods over xDS: an invalid edit (one only the operator's validator catches) keeps the last
// accepted generation enforced on every pod while status says why and what is served; a conflicting
// edit never moves a served domain; the tenant rule (--domain-policy) keeps a team off another team's
// domains, mergeDomain included; the kstatus conditions are there for GitOps tools.
import { CoreV1Api } from '@kubernetes/client-node';
import t from 'tap';
import { roomInWindow, type TestApp } from '../ratelimit/test-support.js';
import { parseDomainPolicy } from '../operator/domain-policy.js';
import { RateLimitOperator } from '../operator/operator.js';
import type { RateLimitConfigObject } from '../operator/resource.js';
import { applyRlc, condition, getRlc, installCrd, rlcFromYaml, waitFor } from '../operator/testing.js';
import { freePort } from '../harness/net.js';
import { startKube, type KubeHarness } from '../harness/kube.js';
import { startXdsPod } from '../harness/operator.js';

let kube: KubeHarness;
let operator: RateLimitOperator;
const pods: TestApp[] = [];

const POLICY = 'default=api,x;team-a=checkout,checkout-*;team-b={namespace}-*';

const startPod = startXdsPod;

/** The limit each pod answers for one descriptor (undefined: no rule / no domain). */
async function limits(domain: string, key: string, value = 'probe'): Promise<(number | undefined)[]> {
  return Promise.all(
    pods.map(async (p) => {
      const r = await p.call({ domain, descriptors: [{ entries: [{ key, value }] }] });
      return r.statuses?.[0]?.currentLimit?.requestsPerUnit;
    }),
  );
}

const spec = (domain: string, rpu: number, extra = '') =>
  `domain: ${domain}\n${extra}descriptors:\n  - key: user\n    rate_limit: { unit: minute, requests_per_unit: ${rpu} }`;

function inNamespace(o: RateLimitConfigObject, namespace: string): RateLimitConfigObject {
  return { ...o, metadata: { ...o.metadata, namespace } };
}

t.before(async () => {
  kube = await startKube();
  await installCrd(kube.kubeConfig);
  const core = kube.kubeConfig.makeApiClient(CoreV1Api);
  for (const name of ['team-a', 'team-b']) await core.createNamespace({ body: { metadata: { name } } });
  const xdsPort = await freePort();
  operator = new RateLimitOperator({
    kubeConfig: kube.kubeConfig,
    xdsListen: `127.0.0.1:${xdsPort}`,
    resyncMs: 2_000,
    domainPolicy: parseDomainPolicy(POLICY),
  });
  await operator.start();
  pods.push(await startPod('pod-1', xdsPort), await startPod('pod-2', xdsPort));
});
t.teardown(async () => {
  for (const p of pods) await p.close();
  await operator?.close();
  await kube?.stop();
});

t.test(
  'an invalid edit keeps the last accepted generation enforced on every pod; status says both',
  async (t) => {
    await applyRlc(kube.kubeConfig, rlcFromYaml('api', spec('api', 3)));
    await waitFor('both pods enforce 3', async () => (await limits('api', 'user')).every((l) => l === 3));
    const first = await waitFor('generation 1 Ready with lastAccepted', async () => {
      const o = await getRlc(kube.kubeConfig, 'api');
      return condition(o, 'Ready')?.status === 'True' && o.status?.lastAccepted?.generation === 1
        ? o
        : undefined;
    });
    t.equal(first.status?.servedGeneration, 1);
    t.equal(first.status?.podsAcked, '2/2');
    const versionBefore = operator.controller.snapshotVersion;

    // A cross-field error at level 3: the API server stores it (its CEL rules stop at level 2).
    await applyRlc(
      kube.kubeConfig,
      rlcFromYaml(
        'api',
        `domain: api
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 1000 }
    descriptors:
      - key: a
        descriptors:
          - { key: x, rate_limit: { unlimited: true, unit: second } }`,
      ),
    );
    const bad = await waitFor('generation 2 Accepted=False', async () => {
      const o = await getRlc(kube.kubeConfig, 'api');
      const a = condition(o, 'Accepted');
      return a?.status === 'False' && a.observedGeneration === 2 ? o : undefined;
    });
    const accepted = condition(bad, 'Accepted')!;
    t.equal(accepted.reason, 'Invalid');
    t.equal(
      accepted.message,
      'default/api: descriptors[0].descriptors[0].descriptors[0].rate_limit.unit: should not specify rate limit unit when unlimited',
    );
    t.equal(bad.status?.servedGeneration, 1, 'status says generation 1 is still served');
    t.equal(bad.status?.lastAccepted?.generation, 1);
    t.match(
      condition(bad, 'Programmed')?.message,
      /^generation 2 is not accepted; pods keep enforcing generation 1, the last accepted: 2\/2 connected pods ACKed version [0-9a-f]+$/,
    );
    t.same(
      [condition(bad, 'Ready')?.status, condition(bad, 'Stalled')?.status, condition(bad, 'Stalled')?.reason],
      ['False', 'True', 'Invalid'],
    );
    t.equal(operator.controller.snapshotVersion, versionBefore, 'the served content did not change');
    t.same(await limits('api', 'user'), [3, 3], 'every pod still enforces generation 1');
    await roomInWindow();
    for (const [i, p] of pods.entries()) {
      const codes: string[] = [];
      for (let n = 0; n < 4; n++) {
        const r = await p.call({
          domain: 'api',
          descriptors: [{ entries: [{ key: 'user', value: `bob-${i}` }] }],
        });
        codes.push(r.overallCode as string);
      }
      t.same(codes, ['OK', 'OK', 'OK', 'OVER_LIMIT'], `pod-${i + 1} still cuts at generation 1's limit`);
    }

    // Fixed: the new generation is served, as before.
    await applyRlc(kube.kubeConfig, rlcFromYaml('api', spec('api', 9)));
    await waitFor('both pods enforce 9', async () => (await limits('api', 'user')).every((l) => l === 9));
    const fixed = await waitFor('generation 3 Ready', async () => {
      const o = await getRlc(kube.kubeConfig, 'api');
      const r = condition(o, 'Ready');
      return r?.status === 'True' && r.observedGeneration === 3 ? o : undefined;
    });
    t.equal(fixed.status?.servedGeneration, 3);
    t.equal(fixed.status?.lastAccepted?.generation, 3);
    t.equal(condition(fixed, 'Stalled'), undefined, 'Stalled is gone');
  },
);

t.test('a conflicting edit never moves a served domain: the serving owner keeps it', async (t) => {
  await new Promise((r) => setTimeout(r, 1100)); // creationTimestamp has second resolution
  await applyRlc(kube.kubeConfig, rlcFromYaml('younger', spec('x', 5)));
  await waitFor('x enforced', async () => (await limits('x', 'user')).every((l) => l === 5));
  await waitFor(
    'younger has lastAccepted',
    async () => (await getRlc(kube.kubeConfig, 'younger')).status?.lastAccepted,
  );
  // The OLDER resource api is edited to claim x: by age alone it would take x over.
  await applyRlc(kube.kubeConfig, rlcFromYaml('api', spec('x', 77)));
  const api = await waitFor('api generation 4 DomainConflict', async () => {
    const o = await getRlc(kube.kubeConfig, 'api');
    const a = condition(o, 'Accepted');
    return a?.reason === 'DomainConflict' && a.observedGeneration === 4 ? o : undefined;
  });
  t.equal(
    condition(api, 'Accepted')?.message,
    'domain "x" belongs to default/younger (which serves it); to share a domain both must set spec.mergeDomain: true',
  );
  t.equal(api.status?.servedGeneration, 3, 'api keeps serving its generation 3');
  t.same(await limits('x', 'user'), [5, 5], 'x is still the younger owner’s');
  t.same(await limits('api', 'user'), [9, 9], 'api is still served');
});

t.test(
  'tenant rule: no team claims or extends another team’s domain; violations never reach a pod',
  async (t) => {
    await applyRlc(
      kube.kubeConfig,
      inNamespace(rlcFromYaml('checkout', spec('checkout', 4, 'mergeDomain: true\n')), 'team-a'),
    );
    await waitFor('checkout enforced', async () => (await limits('checkout', 'user')).every((l) => l === 4));
    // team-b: its own prefix is fine; team-a's domain, a new domain in team-a's space, a merge: refused.
    await applyRlc(kube.kubeConfig, inNamespace(rlcFromYaml('jobs', spec('team-b-jobs', 6)), 'team-b'));
    await applyRlc(kube.kubeConfig, inNamespace(rlcFromYaml('steal', spec('checkout-eu', 1000)), 'team-b'));
    await applyRlc(
      kube.kubeConfig,
      inNamespace(
        rlcFromYaml(
          'extend',
          `domain: checkout\nmergeDomain: true\ndescriptors:\n  - key: bypass\n    rate_limit: { unlimited: true }`,
        ),
        'team-b',
      ),
    );
    await waitFor('team-b-jobs enforced', async () =>
      (await limits('team-b-jobs', 'user')).every((l) => l === 6),
    );
    for (const [name, domain] of [
      ['steal', 'checkout-eu'],
      ['extend', 'checkout'],
    ]) {
      const o = await waitFor(`${name} DomainNotAllowed`, async () => {
        const x = await getRlc(kube.kubeConfig, name, 'team-b');
        return condition(x, 'Accepted')?.reason === 'DomainNotAllowed' ? x : undefined;
      });
      t.equal(
        condition(o, 'Accepted')?.message,
        `namespace "team-b" may not claim domain "${domain}" (--domain-policy allows it: team-b-*)`,
      );
      t.equal(condition(o, 'Accepted')?.status, 'False');
      t.equal(o.status?.servedGeneration, undefined, `${name} is not served`);
    }
    t.same(await limits('checkout-eu', 'user'), [undefined, undefined], 'checkout-eu never reached a pod');
    t.same(await limits('checkout', 'bypass'), [undefined, undefined], 'checkout was not extended');
    t.same(await limits('checkout', 'user'), [4, 4]);
    const owner = await getRlc(kube.kubeConfig, 'checkout', 'team-a');
    t.equal(condition(owner, 'Accepted')?.message, 'domain "checkout" is served');
  },
);
