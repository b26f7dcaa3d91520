// Behaviours upstream main added in 2026, side by side with the reference binary the Go module proxy
// serves (scripts/build-go-tools.sh pins it) where that binary has them; docs/differences.md says for
// each which it is. Where the pin answers in an older way, its answer is asserted next to ours, so
// moving the pin turns those lines into failures to review.
import t from 'tap';
import { spawn } from 'node:child_process';
import { builtBin, REPO_ROOT } from '../harness/dist.js';
import { startReferenceService } from '../harness/reference.js';
import { startRedis, type RedisServer } from '../harness/redis/index.js';
import { eventually, startTestApp, type TestApp } from '../ratelimit/test-support.js';

async function postJson(baseUrl: string, body: unknown): Promise<{ status: number; json: any }> {
  const res = await fetch(`${baseUrl}/json`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: res.status === 200 || res.status === 429 ? JSON.parse(text) : text };
}

const RULES = `domain: up
descriptors:
  - key: a
    rate_limit: { unit: minute, requests_per_unit: 100 }
  - key: b
    rate_limit: { unit: hour, requests_per_unit: 50 }
`;

t.test('RESPONSE_DYNAMIC_METADATA: the same request, the same metadata', async (t) => {
  const redis: RedisServer = await startRedis();
  t.teardown(() => redis.stop());
  const env = { RESPONSE_DYNAMIC_METADATA: 'true', REDIS_SOCKET_TYPE: 'tcp', REDIS_URL: redis.url };
  const ref = await startReferenceService(t, {
    files: { 'up.yaml': RULES },
    env: { ...env, CACHE_KEY_PREFIX: 'ref_' },
  });
  const ours: TestApp = await startTestApp({
    files: { 'up.yaml': RULES },
    env: { ...env, BACKEND_TYPE: 'redis', CACHE_KEY_PREFIX: 'ours_' },
  });
  t.teardown(() => ours.close());
  const body = {
    domain: 'up',
    hitsAddend: 2,
    descriptors: [
      {
        entries: [
          { key: 'a', value: '1' },
          { key: 'sub', value: 'x=y' },
        ],
        limit: { requestsPerUnit: 7, unit: 'HOUR' },
      },
      { entries: [{ key: 'b', value: '2' }], hitsAddend: 3 },
      { entries: [{ key: 'c', value: '3' }] },
    ],
  };
  let refAnswer: { status: number; json: any } | undefined;
  await eventually(
    async () => {
      if (!ref.proc.running) throw new Error(`${ref.proc.exitReason()}\n${ref.proc.logTail(30)}`);
      refAnswer = await postJson(ref.httpUrl, body).catch(() => undefined);
      return refAnswer?.status === 200;
    },
    30_000,
    'the reference to answer with up.yaml loaded',
  );
  const oursAnswer = await postJson(ours.httpUrl, body);
  t.equal(oursAnswer.status, 200);
  const refMd = refAnswer!.json.dynamicMetadata;
  const oursMd = oursAnswer.json.dynamicMetadata;
  // Go prints a message in its text format with one or two spaces between fields (chosen per build).
  const normalize = (md: any) => ({
    ...md,
    descriptors: md.descriptors.map((d: any) =>
      d.limit ? { ...d, limit: d.limit.replace(/\s+/g, ' ') } : d,
    ),
  });
  const expected = {
    domain: 'up',
    hitsAddend: 2,
    descriptors: [
      { entries: ['a=1', 'sub=x=y'], limit: 'requests_per_unit:7 unit:HOUR' },
      { entries: ['b=2'], hitsAddend: 3 },
      { entries: ['c=3'] },
    ],
  };
  const { quotaModeEnabled, ...refRest } = normalize(refMd);
  t.same(
    refRest,
    expected,
    'reference: entries as key=value, limit, hitsAddend per descriptor and per request',
  );
  t.equal(quotaModeEnabled, false, 'reference at the pin: quotaModeEnabled (upstream main has dropped it)');
  t.same(normalize(oursMd), expected, 'ours: the same, without quotaModeEnabled');
});

/** Our built service with `env`: its exit code and stderr (it is expected to stop at once). */
function runOurs(env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [builtBin('ratelimit')], {
      cwd: REPO_ROOT,
      env: { PATH: process.env.PATH ?? '', USE_STATSD: 'false', ...env },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr });
    });
  });
}

t.test('REDIS_POOL_ON_EMPTY_BEHAVIOR=CREATE stops the start of both', async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const env = { REDIS_SOCKET_TYPE: 'tcp', REDIS_URL: redis.url, REDIS_POOL_ON_EMPTY_BEHAVIOR: 'CREATE' };
  const ref = await startReferenceService(t, { files: { 'up.yaml': RULES }, env });
  await eventually(() => !ref.proc.running, 30_000, 'the reference to stop');
  t.match(ref.proc.exitReason(), /exited with code [1-9]/, 'reference: a failed start');
  t.match(ref.proc.logTail(200), /REDIS_POOL_ON_EMPTY_BEHAVIOR=CREATE is not supported in radix v4/);
  const ours = await runOurs(env);
  t.equal(ours.code, 2, 'ours: an invalid setting, exit 2');
  t.match(ours.stderr, /REDIS_POOL_ON_EMPTY_BEHAVIOR: CREATE is not supported/);
});
