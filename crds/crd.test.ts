import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { parse, parseAllDocuments } from 'yaml';
import { checkDocument } from '../ratelimit/config/index.js';
import {
  CEL_DEPTH,
  CRD_PATH,
  DESCRIPTOR_DEPTH,
  generateCrd,
  GROUP,
  KIND,
  renderCrd,
  VERSION,
} from './generate.js';

const validateDocument = (name: string, doc: unknown) => checkDocument(name, doc).errors;
const EXAMPLES = join(import.meta.dirname, '..', 'examples');

function docsIn(dir: string): { file: string; text: string; docs: any[] }[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.yaml'))
    .sort()
    .map((file) => {
      const text = readFileSync(join(dir, file), 'utf8');
      return { file, text, docs: parseAllDocuments(text).map((d) => d.toJS()) };
    });
}

function specDocument(spec: Record<string, unknown>): Record<string, unknown> {
  const { mergeDomain: _m, ...doc } = spec;
  return doc;
}

t.test(
  'the committed CRD is exactly what crds/generate.ts generates (run npm run crds:generate)',
  async (t) => {
    const committed = readFileSync(CRD_PATH, 'utf8');
    const generated = await renderCrd();
    t.equal(committed, generated, 'charts/ratelimit/crds/ratelimitconfigs.yaml is up to date');
    t.same(parse(committed), generateCrd());
  },
);

t.test(
  'the CRD names the decided group, version, kind, status subresource and printer columns',
  async (t) => {
    const crd = generateCrd() as any;
    t.equal(crd.metadata.name, `ratelimitconfigs.${GROUP}`);
    t.equal(crd.spec.scope, 'Namespaced');
    t.equal(crd.spec.names.kind, KIND);
    t.same(crd.spec.names.shortNames, ['rlc']);
    const v = crd.spec.versions[0];
    t.equal(v.name, VERSION);
    t.same(v.subresources, { status: {} });
    t.same(
      v.additionalPrinterColumns.map((c: any) => c.name),
      ['Domain', 'Accepted', 'Programmed', 'Pods ACKed', 'Age'],
    );
  },
);

t.test('the descriptor tree is unrolled to a fixed depth, with CEL on the first levels', async (t) => {
  const spec = (generateCrd() as any).spec.versions[0].schema.openAPIV3Schema.properties.spec;
  t.same(spec.required, ['domain']);
  t.ok(JSON.stringify(spec).indexOf('$ref') === -1, 'no $ref anywhere');
  let list = spec.properties.descriptors;
  for (let level = 1; level <= DESCRIPTOR_DEPTH; level++) {
    const item = list.items;
    t.equal(item.type, 'object', `level ${level} is a typed object`);
    t.same(item.required, ['key']);
    t.ok(item.properties.rate_limit.properties.unit.pattern, `level ${level} checks the unit`);
    const entryRules = (item['x-kubernetes-validations'] ?? []).length;
    const listRules = (list['x-kubernetes-validations'] ?? []).length;
    if (level <= CEL_DEPTH) t.ok(entryRules >= 1, `level ${level} entries carry CEL rules`);
    else t.equal(entryRules, 0, `level ${level} leaves cross-field rules to the operator`);
    t.equal(listRules, 0, `level ${level}: no quadratic CEL on the list`);
    t.equal(list['x-kubernetes-list-type'], 'map', `level ${level}: duplicates refused by the list map`);
    t.same(list['x-kubernetes-list-map-keys'], ['key', 'value']);
    t.equal(item.properties.value.default, '', `level ${level}: a list map key needs a default`);
    list = item.properties.descriptors;
  }
  t.same(list.items, { type: 'object', 'x-kubernetes-preserve-unknown-fields': true });
  t.equal(list.maxItems, 0, `no level below ${DESCRIPTOR_DEPTH}: the tree's depth limit`);
  const rl = spec.properties.descriptors.items.properties.rate_limit;
  const messages = rl['x-kubernetes-validations'].map((r: any) => r.message);
  t.ok(messages.includes('should not specify rate limit unit when unlimited'));
  t.ok(messages.includes("invalid rate limit unit ''"));
  t.same(spec.properties.descriptors.items.properties.metadata, {
    description: 'Free-form metadata attached to the rule (not validated).',
    type: 'object',
    'x-kubernetes-preserve-unknown-fields': true,
  });
});

t.test('every valid example is a RateLimitConfig whose spec the service validator accepts', async (t) => {
  const files = docsIn(join(EXAMPLES, 'crds'));
  t.ok(files.length >= 8, 'an example per feature');
  for (const { file, docs } of files) {
    for (const doc of docs) {
      t.equal(doc.apiVersion, `${GROUP}/${VERSION}`, file);
      t.equal(doc.kind, KIND, file);
      t.same(validateDocument(file, specDocument(doc.spec)), [], `${file}/${doc.metadata.name} is valid`);
    }
  }
});

t.test('every invalid example says what it expects and the service validator rejects it too', async (t) => {
  const operatorDoc = readFileSync(join(EXAMPLES, '..', 'docs', 'operator.md'), 'utf8');
  t.ok(operatorDoc.includes('(../examples/invalid/)'), 'docs/operator.md points at the invalid examples');
  const files = docsIn(join(EXAMPLES, 'invalid'));
  t.ok(files.length >= 10);
  for (const { file, text, docs } of files) {
    t.match(text, /^# expect: .+$/m, `${file} names the expected API server message`);
    const kubectl = /^# kubectl apply: (.+)$/m.exec(text)?.[1];
    t.ok(kubectl, `${file} names what client-side kubectl apply prints`);
    t.not(validateDocument(file, specDocument(docs[0].spec)).length, 0, `${file} is invalid to the service`);
  }
});

t.test('an existing ratelimit YAML file becomes a resource by indentation alone', async (t) => {
  const yaml = readFileSync(join(EXAMPLES, 'config', 'example.yaml'), 'utf8');
  const indented = yaml
    .split('\n')
    .map((l) => (l === '' ? l : `  ${l}`))
    .join('\n');
  const resource = parse(
    `apiVersion: ${GROUP}/${VERSION}\nkind: ${KIND}\nmetadata:\n  name: example\nspec:\n${indented}`,
  );
  t.same(resource.spec, parse(yaml));
  t.same(validateDocument('example', resource.spec), []);
});
