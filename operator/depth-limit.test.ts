// One depth limit of the descriptor tree for every door, with one message: the service (YAML file), the
// control plane (directory of files), the operator (custom resource) and the CRD's schema.
import t from 'tap';
import { stringify } from 'yaml';
import { parseConfigFile } from '../control-plane/index.js';
import { generateCrd } from '../crds/generate.js';
import {
  compileConfig,
  DESCRIPTOR_DEPTH_MESSAGE,
  loadConfig,
  MAX_DESCRIPTOR_DEPTH,
} from '../ratelimit/config/index.js';
import { reconcile } from './reconcile.js';

function tree(levels: number): Record<string, unknown> {
  let entry: Record<string, unknown> = {
    key: `k${levels}`,
    rate_limit: { unit: 'second', requests_per_unit: 1 },
  };
  for (let i = levels - 1; i >= 1; i--) entry = { key: `k${i}`, descriptors: [entry] };
  return { domain: 'deep', descriptors: [entry] };
}

function messages(doc: Record<string, unknown>, text = stringify(doc)) {
  const service = (() => {
    try {
      loadConfig([{ name: 'deep.yaml', yaml: text }]);
      return 'loaded';
    } catch (err) {
      return (err as Error).message;
    }
  })();
  const controlPlane = (() => {
    try {
      const sources = parseConfigFile('deep.yaml', text);
      compileConfig(sources.map((s) => ({ name: s.source, document: s.document })));
      return 'loaded';
    } catch (err) {
      return (err as Error).message;
    }
  })();
  const r = reconcile([
    {
      metadata: {
        name: 'deep.yaml',
        namespace: 'ns',
        generation: 1,
        creationTimestamp: '2026-01-01T00:00:00Z',
      },
      spec: doc,
    },
  ]);
  const operator = r.verdicts.get('ns/deep.yaml')!.message.replace(/^ns\//, '');
  return { service, controlPlane, operator };
}

t.test(
  `a tree of ${MAX_DESCRIPTOR_DEPTH} levels loads everywhere; one more level fails everywhere alike`,
  async (t) => {
    const ok = messages(tree(MAX_DESCRIPTOR_DEPTH));
    t.same([ok.service, ok.controlPlane], ['loaded', 'loaded']);
    t.equal(
      reconcile([{ metadata: { name: 'a', namespace: 'n' }, spec: tree(MAX_DESCRIPTOR_DEPTH) }]).verdicts.get(
        'n/a',
      )?.accepted,
      true,
    );

    const deep = messages(tree(MAX_DESCRIPTOR_DEPTH + 1));
    const field = `${'descriptors[0].'.repeat(MAX_DESCRIPTOR_DEPTH)}descriptors`;
    const expected = `deep.yaml: ${field}: ${DESCRIPTOR_DEPTH_MESSAGE}`;
    t.same(deep, { service: expected, controlPlane: expected, operator: expected });
    t.equal(DESCRIPTOR_DEPTH_MESSAGE, 'descriptor tree is deeper than 8 levels (the limit)');
  },
);

t.test('a depth-1000 tree: the same message, no stack overflow, in every door', async (t) => {
  const doc = tree(1000);
  const viaJson = messages(doc, JSON.stringify(doc)); // YAML flow style: as deep for the YAML parser
  const field = `${'descriptors[0].'.repeat(MAX_DESCRIPTOR_DEPTH)}descriptors`;
  t.equal(
    viaJson.operator,
    `deep.yaml: ${field}: ${DESCRIPTOR_DEPTH_MESSAGE}`,
    'the operator names the field',
  );
  for (const m of [viaJson.service, viaJson.controlPlane]) {
    t.match(
      m,
      /^deep\.yaml: error loading config file: nesting.* exceeds the limit of 64 \(CONFIG_YAML_MAX_DEPTH\)$/,
    );
  }
  // Block style, written out by hand (the YAML library's stringify recurses too).
  let text = 'domain: deep\ndescriptors:\n';
  let indent = '  ';
  for (let i = 1; i < 1000; i++, indent += '    ') text += `${indent}- key: k${i}\n${indent}  descriptors:\n`;
  text += `${indent}- key: k1000\n`;
  const block = messages(doc, text);
  t.equal(block.service, block.controlPlane);
  t.notMatch(JSON.stringify([viaJson, block]), /Maximum call stack/);
});

t.test('the CRD has no descriptor list below the limit (maxItems 0) and says why', async (t) => {
  let list = (generateCrd() as any).spec.versions[0].schema.openAPIV3Schema.properties.spec.properties
    .descriptors;
  for (let level = 1; level <= MAX_DESCRIPTOR_DEPTH; level++) {
    t.not(list.maxItems, 0, `level ${level} takes entries`);
    list = list.items.properties.descriptors;
  }
  t.equal(list.maxItems, 0);
  t.equal(list.description, `Not allowed: ${DESCRIPTOR_DEPTH_MESSAGE}.`);
});
