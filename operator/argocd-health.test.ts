// The Argo CD health check (docs/argocd/ratelimitconfig-health.lua) run by a real Lua interpreter
// (fengari) against RateLimitConfig objects whose status the operator's own code computes.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import t from 'tap';
import { reconcile } from './reconcile.js';
import type { RateLimitConfigObject } from './resource.js';
import { desiredStatus, VersionIndex, type PodState } from './status.js';
import { REPO_ROOT } from './testing.js';

const LUA_FILE = join(REPO_ROOT, 'docs', 'argocd', 'ratelimitconfig-health.lua');
const script = readFileSync(LUA_FILE, 'utf8');

// fengari ships no types: the few functions used here.
const { lua, lauxlib, lualib, to_luastring } = createRequire(import.meta.url)('fengari') as {
  lua: Record<string, any>;
  lauxlib: Record<string, any>;
  lualib: Record<string, any>;
  to_luastring: (s: string) => Uint8Array;
};

/** A Lua literal of a JSON value (as Argo CD hands the object to the script). */
function luaLiteral(v: unknown): string {
  if (v === null || v === undefined) return 'nil';
  if (typeof v === 'string') return JSON.stringify(v).replace(/\\u([0-9a-f]{4})/gi, (_, h) => `\\u{${h}}`);
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (Array.isArray(v)) return `{${v.map(luaLiteral).join(', ')}}`;
  return `{${Object.entries(v as Record<string, unknown>)
    .map(([k, x]) => `[${JSON.stringify(k)}] = ${luaLiteral(x)}`)
    .join(', ')}}`;
}

function health(obj: unknown): { status: string; message: string } {
  const L = lauxlib.luaL_newstate();
  lualib.luaL_openlibs(L);
  const code = `obj = ${luaLiteral(obj)}\nlocal function check()\n${script}\nend\nlocal hs = check()\nreturn hs.status, hs.message`;
  if (lauxlib.luaL_loadstring(L, to_luastring(code)) !== lua.LUA_OK)
    throw new Error(lua.lua_tojsstring(L, -1));
  if (lua.lua_pcall(L, 0, 2, 0) !== lua.LUA_OK) throw new Error(lua.lua_tojsstring(L, -1));
  return { status: lua.lua_tojsstring(L, -2), message: lua.lua_tojsstring(L, -1) };
}

const limit = (rpu: number) => [{ key: 'k', rate_limit: { unit: 'second', requests_per_unit: rpu } }];

/** An object with the status the operator writes for these pods. */
function withStatus(obj: RateLimitConfigObject, pods: PodState[], others: RateLimitConfigObject[] = []) {
  const r = reconcile([obj, ...others]);
  const index = new VersionIndex();
  index.record('v1', r.contents);
  const key = `${obj.metadata.namespace}/${obj.metadata.name}`;
  const status = desiredStatus({
    verdict: r.verdicts.get(key)!,
    version: 'v1',
    pods,
    index,
    previous: undefined,
    now: new Date(),
  });
  return { ...obj, status };
}

const rlc = (spec: Record<string, unknown>, generation = 1, extra: Partial<RateLimitConfigObject> = {}) =>
  ({
    metadata: { name: 'api', namespace: 'default', generation, creationTimestamp: '2026-01-01T00:00:00Z' },
    spec,
    ...extra,
  }) as RateLimitConfigObject;
const acked: PodState = { pod: 'p', ackedVersion: 'v1', lastNack: undefined };
const behind: PodState = { pod: 'q', ackedVersion: 'old', lastNack: undefined };
const nacking: PodState = {
  pod: 'q (1.2.3.4:5 via r)',
  ackedVersion: 'old',
  lastNack: { version: 'v1', message: 'no' },
};

t.test('Healthy only when Ready=True for the current generation', async (t) => {
  const ok = withStatus(rlc({ domain: 'api', descriptors: limit(5) }), [acked]);
  t.same(health(ok), {
    status: 'Healthy',
    message: 'Ready: accepted and programmed: all 1 connected pods ACKed version v1',
  });
  // The spec moved on and the operator has not written status for it yet.
  t.equal(health({ ...ok, metadata: { ...ok.metadata, generation: 2 } }).status, 'Progressing');
});

t.test('Progressing: no status yet, pods still to ACK, no pods', async (t) => {
  t.same(health(rlc({ domain: 'api' })), {
    status: 'Progressing',
    message: 'waiting for the ratelimit operator',
  });
  const pending = health(withStatus(rlc({ domain: 'api', descriptors: limit(5) }), [acked, behind]));
  t.same(pending, {
    status: 'Progressing',
    message: 'Pending: 1/2 connected pods ACKed a version with generation 1',
  });
  t.equal(health(withStatus(rlc({ domain: 'api', descriptors: limit(5) }), [])).status, 'Progressing');
});

t.test('Degraded: invalid (naming the generation still served), a conflict, a NACK', async (t) => {
  const good = { domain: 'api', descriptors: limit(5) };
  const invalid = withStatus(
    rlc(
      { domain: 'api', descriptors: [{ key: 'k', rate_limit: { unit: 'fortnight', requests_per_unit: 1 } }] },
      2,
      {
        status: { lastAccepted: { generation: 1, spec: JSON.stringify(good) } },
      },
    ),
    [acked],
  );
  const h = health(invalid);
  t.equal(h.status, 'Degraded');
  t.match(h.message, /^Invalid: default\/api: descriptors\[0\]\.rate_limit\.unit: /);
  t.equal(invalid.status.servedGeneration, 1, 'generation 1 still served');

  const older = {
    ...rlc(good),
    metadata: { ...rlc(good).metadata, name: 'owner', creationTimestamp: '2025-01-01T00:00:00Z' },
  };
  const conflict = health(withStatus(rlc({ domain: 'api', descriptors: limit(9) }), [acked], [older]));
  t.equal(conflict.status, 'Degraded');
  t.match(conflict.message, /^DomainConflict: domain "api" belongs to default\/owner/);

  const nacked = health(withStatus(rlc(good), [acked, nacking]));
  t.same(nacked, { status: 'Degraded', message: 'Nacked: pod q (1.2.3.4:5 via r) rejected version v1: no' });
});

t.test('docs/operator.md installs the script under the key Argo CD reads', async (t) => {
  const doc = readFileSync(join(REPO_ROOT, 'docs', 'operator.md'), 'utf8');
  const key = 'resource.customizations.health.ratelimit.envoyproxy.io_RateLimitConfig';
  t.ok(
    doc.includes(`--rawfile lua docs/argocd/ratelimitconfig-health.lua`),
    'the command reads the .lua file',
  );
  t.ok(doc.includes(`{data: {"${key}": $lua}}`), 'the command writes it under the health key');
});
