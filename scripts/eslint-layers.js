// The ESLint rule that keeps the folders' layers (eslint.config.js holds the table it enforces):
// - a product file imports only from its own folder and the layers below it. A folder of the table is
//   a top-level folder or one inside it (ratelimit/counting): a file belongs to the deepest folder of
//   the table that holds it, and a folder inside another may import what the table lists for it plus
//   what its parent may import from outside the parent (ratelimit/counting: ratelimit/config, and
//   proto/, h2grpc/, common/ as all of ratelimit/); a parent's own files (ratelimit/app.ts) import
//   any folder inside it;
// - test infrastructure (harness/, bench/, e2e/) is imported only by tests and tools, never by product code;
// - a folder with an index.ts is entered from outside only through it (its public face), test helpers
//   (testing.ts, test-support.ts) excepted: they stay out of the faces and so out of dist/; a folder may
//   have a second face listed in `entries` (proto/ratelimit-config.ts: the RateLimitConfig codec, units
//   and Struct helpers without @grpc/grpc-js, for the config model and its parse worker);
// - an isolated folder (papers/) imports nothing of the rest.
// ESLint's no-restricted-imports matches the import text, and relative paths differ with depth, so this
// small rule resolves each relative import against the importing file and decides on repository paths.
// Type-only imports and re-exports count as imports; package imports are not looked at.
import { existsSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';

const toPosix = (p) => p.split(sep).join('/');

/** Repository path of the .ts file an import names ('./x.js' -> 'dir/x.ts'), or undefined. */
function targetOf(root, filename, spec) {
  if (typeof spec !== 'string' || !spec.startsWith('.')) return undefined;
  const abs = resolve(dirname(filename), spec);
  const rel = toPosix(relative(root, abs));
  if (rel.startsWith('..')) return undefined;
  return rel.replace(/\.(m?)js$/, '.$1ts');
}

const hasIndex = new Map();
function folderHasIndex(root, dir) {
  let v = hasIndex.get(dir);
  if (v === undefined) {
    v = existsSync(join(root, dir, 'index.ts'));
    hasIndex.set(dir, v);
  }
  return v;
}

/**
 * The folder with an index.ts that an import enters from outside, when it does not go through that
 * index.ts: walking from the deepest folder the two files share down to the target's folder, the first
 * folder with an index.ts is the face.
 */
function bypassedFace(root, from, target, entries) {
  if (entries.includes(target)) return undefined;
  const a = dirname(from).split('/');
  const b = dirname(target).split('/');
  if (a[0] === '.') a.length = 0;
  if (b[0] === '.') b.length = 0;
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  for (let j = i + 1; j <= b.length; j++) {
    const dir = b.slice(0, j).join('/');
    if (folderHasIndex(root, dir)) return target === `${dir}/index.ts` ? undefined : dir;
  }
  return undefined;
}

const top = (path) => path.split('/')[0];
const under = (path, prefix) => path === prefix || path.startsWith(`${prefix}/`);

/** The deepest folder of the table that holds a path (its layer), or undefined. */
function layerOf(layers, path) {
  let best;
  for (const key of Object.keys(layers))
    if (under(path, key) && (!best || key.length > best.length)) best = key;
  return best;
}

/** What a layer may import: its own entries, then its parent layers' (their imports from outside). */
function allowedFor(layers, layer) {
  const allowed = [...layers[layer]];
  for (let i = layer.lastIndexOf('/'); i > 0; i = layer.lastIndexOf('/', i - 1)) {
    const parent = layer.slice(0, i);
    if (Object.hasOwn(layers, parent)) allowed.push(...layers[parent]);
  }
  return allowed;
}

const importsRule = {
  meta: {
    type: 'problem',
    docs: { description: 'imports follow the folder layers and enter a folder through its index.ts' },
    schema: [
      {
        type: 'object',
        properties: {
          layers: { type: 'object' },
          testInfrastructure: { type: 'array', items: { type: 'string' } },
          tools: { type: 'array', items: { type: 'string' } },
          isolated: { type: 'array', items: { type: 'string' } },
          entries: { type: 'array', items: { type: 'string' } },
          testFiles: { type: 'string' },
        },
        additionalProperties: false,
      },
    ],
  },
  create(context) {
    const o = context.options[0] ?? {};
    const layers = o.layers ?? {};
    const infra = o.testInfrastructure ?? [];
    const tools = o.tools ?? [];
    const isolated = o.isolated ?? [];
    const entries = o.entries ?? [];
    const testFiles = new RegExp(o.testFiles ?? '\\.test\\.ts$');
    const root = context.cwd;
    const from = toPosix(relative(root, context.filename));
    if (from.startsWith('..')) return {};
    const fromTop = top(from);
    const isTest = testFiles.test(from);
    const isTool = tools.includes(fromTop);
    const isProduct = !isTest && !isTool && Object.hasOwn(layers, fromTop);

    function check(node, source) {
      const target = targetOf(root, context.filename, source?.value);
      if (!target) return;
      const toTop = top(target);
      const report = (message) => context.report({ node: source, message });
      if (toTop !== fromTop && (isolated.includes(fromTop) || isolated.includes(toTop))) {
        return report(`${fromTop}/ and ${toTop}/ are separate: nothing imports across them`);
      }
      if (infra.includes(toTop) && toTop !== fromTop && !isTest && !isTool) {
        return report(`${toTop}/ is test infrastructure: only tests and tools import it, not ${fromTop}/`);
      }
      if (isProduct) {
        const layer = layerOf(layers, from);
        if (!under(target, layer)) {
          const allowed = allowedFor(layers, layer);
          if (!allowed.some((p) => under(target, p))) {
            const may = allowed.length ? allowed.map((p) => `${p}/`).join(', ') : 'nothing of ours';
            return report(`${layer}/ may import only ${may} (layers: eslint.config.js), not ${target}`);
          }
        }
      }
      // Test helpers (testing.ts, test-support.ts) stay out of the faces so they stay out of dist/.
      if (testFiles.test(target)) return;
      const face = bypassedFace(root, from, target, entries);
      if (face) report(`reach ${face}/ through its index.ts, not ${target}`);
    }

    return {
      ImportDeclaration: (n) => check(n, n.source),
      ExportNamedDeclaration: (n) => n.source && check(n, n.source),
      ExportAllDeclaration: (n) => check(n, n.source),
      ImportExpression: (n) => n.source.type === 'Literal' && check(n, n.source),
    };
  },
};

export default { rules: { imports: importsRule } };
