import { Ajv } from 'ajv';
import t from 'tap';
import { configSchema, crossFieldRules } from './index.js';

const ALLOWED = new Set([
  'type',
  'properties',
  'required',
  'items',
  'enum',
  'minimum',
  'maximum',
  'minLength',
  'maxLength',
  'minItems',
  'maxItems',
  'pattern',
  'description',
  'additionalProperties',
  '$ref',
]);

function walkSchema(
  node: Record<string, unknown>,
  path: string,
  visit: (n: Record<string, unknown>, p: string) => void,
) {
  visit(node, path);
  const props = node.properties as Record<string, Record<string, unknown>> | undefined;
  for (const [k, v] of Object.entries(props ?? {})) walkSchema(v, `${path}/properties/${k}`, visit);
  if (node.items !== undefined) walkSchema(node.items as Record<string, unknown>, `${path}/items`, visit);
}

t.test('schema compiles in strict ajv and is a draft-07 object schema', async (t) => {
  t.doesNotThrow(() => new Ajv({ strict: true }).compile(configSchema));
  t.equal(configSchema.type, 'object');
  t.same([...configSchema.required], ['domain']);
});

t.test('schema stays plain (CRD-convertible) and every property is described', async (t) => {
  const defs = configSchema.definitions as unknown as Record<string, Record<string, unknown>>;
  const roots: [Record<string, unknown>, string][] = [
    [configSchema as unknown as Record<string, unknown>, ''],
    ...Object.entries(defs).map(([k, v]) => [v, `/definitions/${k}`] as [Record<string, unknown>, string]),
  ];
  let properties = 0;
  for (const [root, base] of roots) {
    walkSchema(root, base, (n, p) => {
      for (const k of Object.keys(n)) {
        if (p === '' && ['$schema', '$id', 'title', 'definitions'].includes(k)) continue;
        t.ok(ALLOWED.has(k), `keyword ${k} at ${p || '/'} is plain`);
      }
      if (n.$ref === undefined) t.type(n.description, 'string', `${p || '/'} has a description`);
      if (n.$ref !== undefined) t.same(Object.keys(n), ['$ref'], `${p} has nothing beside $ref`);
      if (p.includes('/properties/')) properties++;
    });
  }
  t.ok(properties >= 18, 'walked every property');
});

t.test('crossFieldRules point at schema locations and carry CEL over self', async (t) => {
  t.ok(crossFieldRules.length >= 5);
  for (const r of crossFieldRules) {
    let node: unknown = configSchema;
    for (const seg of r.path.slice(1).split('/')) node = (node as Record<string, unknown>)[seg];
    t.type(node, 'object', `${r.path} exists in the schema`);
    t.match(r.rule, /self/);
    t.ok(r.message.length > 0);
  }
  t.ok(crossFieldRules.some((r) => r.message === 'should not specify rate limit unit when unlimited'));
  t.ok(crossFieldRules.some((r) => r.message.startsWith('share_threshold can only be used')));
});
