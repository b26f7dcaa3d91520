// The Envoy Gateway examples (examples/envoy-gateway/) decoded into Envoy Gateway's own Go API types with
// strict decoding (tools/eg-check, built from the Go module proxy by scripts/build-go-tools.sh): a field
// Envoy Gateway does not know, or a value of the wrong type, fails here instead of in a user's cluster.
// The EnvoyGateway configuration runs the image `npm run image` builds, under the chart's name and tag.
import t from 'tap';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { REPO_ROOT } from '../harness/dist.js';
import { resolveGoTool } from '../harness/kube.js';
import { runCommand } from '../harness/proc.js';

const dir = join(REPO_ROOT, 'examples', 'envoy-gateway');
const files = readdirSync(dir)
  .filter((f) => f.endsWith('.yaml'))
  .map((f) => join(dir, f));

t.test('every Envoy Gateway example decodes strictly into Envoy Gateway API types', async (t) => {
  const egCheck = resolveGoTool('eg-check');
  const r = await runCommand(egCheck, files);
  t.equal(r.code, 0, r.stdout + r.stderr);
  const lines = r.stdout.trim().split('\n');
  t.equal(lines.filter((l) => / ok EnvoyGateway$/.test(l)).length, 1, 'one EnvoyGateway configuration');
  t.ok(
    lines.filter((l) => / ok BackendTrafficPolicy$/.test(l)).length >= 3,
    'the BackendTrafficPolicy examples',
  );
  t.notOk(
    lines.some((l) => / skipped /.test(l)),
    'nothing left unchecked',
  );
  t.ok(
    lines.some((l) => /llm-token-budget\.yaml#1: ok EnvoyExtensionPolicy$/.test(l)),
    'the Lua extension of the token budget example',
  );
  // The token budget: request cost from the metadata the Lua filter writes, response cost likewise.
  const llm = parseAllDocuments(readFileSync(join(dir, 'llm-token-budget.yaml'), 'utf8')).map((d) =>
    d.toJSON(),
  );
  const rules = llm[1].spec.rateLimit.global.rules;
  t.same(
    rules.map((r: any) => [r.limit.unit, r.cost.request.metadata.key, r.cost.response.metadata.key]),
    [
      ['Day', 'estimate', 'over'],
      ['Month', 'estimate', 'over'],
    ],
  );
  t.match(llm[0].spec.lua[0].inline, /set\("llm_budget", "estimate"[\s\S]*set\("llm_budget", "over"/);
  t.same(
    parseAllDocuments(readFileSync(join(dir, 'envoy-gateway.yaml'), 'utf8'))[0]!.toJSON().provider.kubernetes
      .rateLimitDeployment.container.env,
    [{ name: 'STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT', value: 'true' }],
    'a refused estimate is not counted',
  );

  // The check is strict: one misspelt field in a copy fails, naming the field.
  const tmp = mkdtempSync(join(tmpdir(), 'rl-eg-'));
  t.teardown(() => rmSync(tmp, { recursive: true, force: true }));
  const bad = join(tmp, 'bad.yaml');
  writeFileSync(bad, readFileSync(join(dir, 'envoy-gateway.yaml'), 'utf8').replace('replicas:', 'replica:'));
  const b = await runCommand(egCheck, [bad]);
  t.equal(b.code, 1, 'a misspelt field is refused');
  t.match(b.stdout, /unknown field "replica"/);
  writeFileSync(
    bad,
    readFileSync(join(dir, 'llm-token-budget.yaml'), 'utf8').replace('from: Metadata', 'form: Metadata'),
  );
  const c = await runCommand(egCheck, [bad]);
  t.equal(c.code, 1, 'a misspelt cost field is refused');
  t.match(c.stdout, /#2: error: BackendTrafficPolicy: .*unknown field "form"/);
});

t.test(
  'the EnvoyGateway configuration runs the image the chart runs, with Redis as the backend',
  async (t) => {
    const eg = parseAllDocuments(readFileSync(join(dir, 'envoy-gateway.yaml'), 'utf8'))[0]!.toJSON();
    const chart = join(REPO_ROOT, 'charts', 'ratelimit');
    const appVersion = /^appVersion: '?([^'\n]+)'?$/m.exec(
      readFileSync(join(chart, 'Chart.yaml'), 'utf8'),
    )![1];
    const image: string = eg.provider.kubernetes.rateLimitDeployment.container.image;
    t.ok(
      image.endsWith(`/envoy-ratelimit-ts:${appVersion}`),
      `the pushed image, tag ${appVersion}: ${image}`,
    );
    t.equal(eg.rateLimit.backend.type, 'Redis');
    t.match(eg.rateLimit.backend.redis.url, /^[a-z0-9.-]+:\d+$/, 'a Redis address');
  },
);
