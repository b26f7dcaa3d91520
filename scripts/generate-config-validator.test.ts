import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Ajv } from 'ajv';
import t from 'tap';
import { parse } from 'yaml';
import { configSchema } from '../ratelimit/config/index.js';
import { AJV_OPTIONS, renderValidator, VALIDATOR_PATH } from './generate-config-validator.js';

/** The committed module, loaded from where the generator writes it. */
const { validate: generated } = (await import(pathToFileURL(VALIDATOR_PATH).href)) as {
  validate: ((data: unknown) => boolean) & { errors?: unknown[] | null };
};

t.test(
  'the committed validator is exactly what scripts/generate-config-validator.ts generates (run npm run config-validator:generate)',
  async (t) => {
    t.equal(
      readFileSync(VALIDATOR_PATH, 'utf8'),
      await renderValidator(),
      'schema-validator.generated.ts is up to date',
    );
  },
);

const EXAMPLES = join(import.meta.dirname, '..', 'examples');

/** Documents with schema errors of every keyword validate.ts words, and valid ones. */
function documents(): { name: string; doc: unknown }[] {
  const fromDir = (dir: string) =>
    readdirSync(dir)
      .filter((f) => f.endsWith('.yaml'))
      .map((f) => ({ name: f, doc: parse(readFileSync(join(dir, f), 'utf8')) as unknown }));
  const descriptor = (extra: Record<string, unknown>) => ({
    domain: 'd',
    descriptors: [{ key: 'k', rate_limit: { unit: 'second', requests_per_unit: 1 }, ...extra }],
  });
  return [
    ...fromDir(join(EXAMPLES, 'invalid')),
    ...fromDir(join(EXAMPLES, 'config')),
    { name: 'not a map', doc: [1, 2] },
    { name: 'list item not a map', doc: { domain: 'd', descriptors: ['x'] } },
    { name: 'unknown keys', doc: descriptor({ shadow_mod: true, rate_limit: { unti: 'second' } }) },
    { name: 'bad failure mode', doc: descriptor({ failure_mode: 'open' }) },
    { name: 'bad algorithm', doc: descriptor({ rate_limit: { unit: 'SECOND', algorithm: 'leaky' } }) },
    { name: 'bad quota unit', doc: descriptor({ rate_limit: { unit: 'second', quota_unit: 'bytes' } }) },
    { name: 'too many limits', doc: descriptor({ rate_limits: Array(9).fill({ unit: 'second' }) }) },
    { name: 'no limits', doc: descriptor({ rate_limits: [] }) },
    { name: 'burst 0', doc: descriptor({ rate_limit: { unit: 'second', burst: 0 } }) },
    { name: 'over uint32', doc: descriptor({ rate_limit: { unit: 'second', requests_per_unit: 2 ** 32 } }) },
    { name: 'empty replaces', doc: descriptor({ rate_limit: { unit: 'second', replaces: [{}] } }) },
    {
      name: 'wrong types',
      doc: { domain: 1, descriptors: [{ key: true, shadow_mode: 'yes', metadata: 3 }] },
    },
  ];
}

t.test(
  'the generated validator gives the errors of a runtime compile of configSchema, schemas included',
  async (t) => {
    const compiled = new Ajv(AJV_OPTIONS).compile(configSchema);
    let invalid = 0;
    for (const { name, doc } of documents()) {
      const a = compiled(doc);
      const b = generated(doc);
      t.equal(b, a, `${name}: the same verdict`);
      if (!a) invalid++;
      // verbose: each error's schema and parentSchema (validate.ts reads parentSchema's keys) compared deeply.
      t.same(generated.errors ?? null, compiled.errors ?? null, `${name}: the same errors`);
    }
    t.ok(invalid >= 20, `errors were compared (${invalid} invalid documents)`);
  },
);
